/**
 * `npm run bench -- rocketmq [--messages N] [--prefetch P] [--rounds R] [--delayed M] [--rate S] [--seed X] [--endpoints host:port] [--name-server host:port] [--timer-precision-ms T] [--bare-acks single|batched]`
 *
 * redeliver on Apache RocketMQ 5 against a bare `SimpleConsumer` loop on the
 * same broker, in the same run. Every topic and consumer group is named
 * with a random token of the run's own and deleted at the end.
 *
 * 1. throughput: N messages (default 20,000), each `{ i, payload }` as JSON
 *    with a 256-character payload, are loaded first into a topic, then
 *    consumed with prefetch P (default 64):
 *    - raw: `SimpleConsumer` loops, `ceil(P / 32)` of them, each
 *      `receive(32, 30 s)` then `ack` of every message received (the acks
 *      of a batch in flight side by side), nothing else; with
 *      `--bare-acks batched` the acks of a turn go out in one request, as
 *      the transport sends them (default `single`, `SimpleConsumer.ack`);
 *    - redeliver: an Endpoint of concurrency P over a RocketMqTransport with
 *      a handler that does nothing.
 *    Throughput = N / (consumer start to the last ack). R rounds (default
 *    3), the sides' order reversed every other round; each side reports its
 *    median round. `ratio` = redeliver / raw.
 * 2. delays: M messages (default 300) sent at S per second (default 20),
 *    each thrown back once with a `RetryLaterError` of a delay uniform in
 *    [1 s, 60 s) (seeded): a timed copy the broker holds. Lateness = the
 *    second attempt's start - (the throw + delay); negative is early.
 *    Beside it, the broker's own timer: M timed messages sent bare with the
 *    same delays, lateness = received - delivery time. Both run at once.
 *    The broker's `timerPrecisionMs` is read off the broker and reported.
 *
 * With `--timer-precision-ms T` the run starts a broker of its own (the
 * fault suite's nodes on ports of the bench's own, {@link BENCH_PORTS}:
 * name server 12100, broker 12110, proxy 12131; a temporary store) with
 * `timerPrecisionMs=T`, runs there instead, and reports
 * the size of its timer files (`timerwheel`, `timerlog`) beside the
 * lateness: what a finer timer costs on disk and in page cache.
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { RocketMqAdmin } from '../../src/transports/rocketmq/index.js';
import { medianOf, printJson, printTable, positiveArg, roundTo } from '../report.js';
import { payloadString, uniformDelays } from '../redis/workload.js';
import { messageBody, type Throughput } from '../jetstream/workload.js';
import { rawThroughput, rawTimerLateness, type RawSetup } from '../rocketmq/raw.js';
import { redeliverDelayLateness, redeliverThroughput, type RedeliverSetup } from '../rocketmq/redeliver.js';
import { timerFileBytes, timerPrecisionMs } from '../rocketmq/broker.js';
import { RocketMqNodes, type RocketMqPorts } from '../../test/faults/rocketmq-nodes.js';

/** The ports of the bench's own broker, apart from the shared broker's and the fault suite's (a broker also takes its port - 2 and + 1). */
export const BENCH_PORTS: RocketMqPorts = { nameServer: 12100, brokerA: 12110, brokerB: 12120, grpcProxy: 12131, remotingProxy: 12130 };

const MIN_DELAY_MS = 1_000;
const MAX_DELAY_MS = 60_000;

interface Side {
  readonly name: Throughput['side'];
  throughput(n: number, round: number): Promise<Throughput>;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '20000' },
      prefetch: { type: 'string', default: '64' },
      rounds: { type: 'string', default: '3' },
      delayed: { type: 'string', default: '300' },
      rate: { type: 'string', default: '20' },
      seed: { type: 'string', default: '42' },
      endpoints: { type: 'string', default: '127.0.0.1:8081' },
      'name-server': { type: 'string', default: '127.0.0.1:9876' },
      'timer-precision-ms': { type: 'string' },
      'bare-acks': { type: 'string', default: 'single' },
    },
  });
  const n = positiveArg('messages', values.messages);
  const prefetch = positiveArg('prefetch', values.prefetch);
  const rounds = positiveArg('rounds', values.rounds);
  const m = positiveArg('delayed', values.delayed);
  const rate = positiveArg('rate', values.rate);
  const seed = positiveArg('seed', values.seed);
  const bareAcks = values['bare-acks'];
  if (bareAcks !== 'single' && bareAcks !== 'batched') throw new Error(`--bare-acks must be single or batched, not ${bareAcks}`);
  const ownTimer = values['timer-precision-ms'] === undefined ? undefined : positiveArg('timer-precision-ms', values['timer-precision-ms']);
  const own = ownTimer === undefined ? undefined : await RocketMqNodes.start({ brokerConfig: { timerPrecisionMs: ownTimer }, ports: BENCH_PORTS });
  const endpoints = own?.endpoints ?? values.endpoints!;
  const nameServer = own?.nameServer ?? values['name-server']!;
  const load = [loadavg()[0]!];

  const token = randomUUID().slice(0, 8);
  const payload = payloadString(seed);
  const body = (i: number) => messageBody(i, payload);
  const timeoutMs = 180_000;
  const admin = new RocketMqAdmin(nameServer, 'DefaultCluster', 4, 10_000);
  const topics = { raw: `bench-rmq-${token}-raw`, rawTimer: `bench-rmq-${token}-timer`, throughput: `bench-rmq-${token}-throughput`, delays: `bench-rmq-${token}-delays` };
  const groups = { raw: `bench-rmq-${token}-raw`, redeliver: `bench-rmq-${token}-rdl` };
  const raw: RawSetup = { endpoints, topic: topics.raw, group: groups.raw, prefetch, invisibleMs: 30_000, timeoutMs, acks: bareAcks };
  const redeliver: RedeliverSetup = { endpoints, nameServer, group: groups.redeliver, prefetch, timeoutMs };
  const sides: Side[] = [
    { name: 'raw', throughput: (count) => rawThroughput(raw, count, body) },
    { name: 'redeliver', throughput: (count, round) => redeliverThroughput(redeliver, topics.throughput, count, round, body) },
  ];

  try {
    const precision = await timerPrecisionMs(admin);
    await admin.ensure(topics.raw, 'work');
    await admin.ensure(topics.rawTimer, 'work');
    const runs: Throughput[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const side of round % 2 === 0 ? sides : [...sides].reverse()) runs.push(await side.throughput(n, round));
      load.push(loadavg()[0]!);
    }
    const delays = uniformDelays(m, seed, MIN_DELAY_MS, MAX_DELAY_MS);
    const [lateness, bare] = await Promise.all([
      redeliverDelayLateness(redeliver, topics.delays, delays, rate, body),
      rawTimerLateness({ ...raw, topic: topics.rawTimer }, delays, rate),
    ]);
    load.push(loadavg()[0]!);

    const of = (side: Throughput['side']) => runs.filter((r) => r.side === side);
    const median = (side: Throughput['side']) => Math.round(medianOf(of(side).map((r) => r.perSec)));
    printTable(
      `rocketmq: ${n} messages loaded first, then consumed with prefetch ${prefetch}, bare acks ${bareAcks}; per second from consumer start to the last ack (${rounds} rounds, order reversed every other round)`,
      sides.map((side) => ({
        side: side.name,
        'per sec (median)': median(side.name),
        'vs raw': roundTo(median(side.name) / median('raw'), 2),
        rounds: of(side.name).map((r) => r.perSec.toLocaleString('en-US')).join(' / '),
        'cpu ms': of(side.name).map((r) => r.cpuMs.toLocaleString('en-US')).join(' / '),
      })),
    );
    printTable(
      `delayed: ${m} messages sent at ${rate}/s, each retried once after a delay uniform in [${MIN_DELAY_MS / 1000} s, ${MAX_DELAY_MS / 1000} s); lateness, ms; the broker's timerPrecisionMs ${precision.join(', ')}`,
      [
        { side: 'redeliver: handled - (thrown + delay)', p50: lateness.p50, p99: lateness.p99, max: lateness.max, early: lateness.early, count: lateness.count },
        { side: 'bare timed message: received - due', p50: bare.p50, p99: bare.p99, max: bare.max, early: bare.early, count: bare.count },
      ],
    );
    const timerFiles = own === undefined ? undefined : timerFileBytes(own.storeOf('broker-a'));
    if (timerFiles !== undefined) console.log(`\ntimer files of the bench's own broker: timerwheel ${timerFiles.wheel.toLocaleString('en-US')} bytes, timerlog ${timerFiles.log.toLocaleString('en-US')} bytes`);
    console.log(`\nload average (1 min) during the run: ${load.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs`);

    const rawPerSec = median('raw');
    const redeliverPerSec = median('redeliver');
    printJson({
      scenario: 'rocketmq',
      rawPerSec,
      redeliverPerSec,
      ratio: roundTo(redeliverPerSec / rawPerSec, 3),
      delayP50LatenessMs: lateness.p50,
      delayP99LatenessMs: lateness.p99,
      delayMaxLatenessMs: lateness.max,
      delayEarlyCount: lateness.early,
      timerPrecisionMs: Math.max(...precision),
      bareTimerP99LatenessMs: bare.p99,
      bareTimerEarlyCount: bare.early,
      messages: n,
      prefetch,
      bareAcks,
      rounds,
      rawRounds: of('raw').map((r) => r.perSec),
      redeliverRounds: of('redeliver').map((r) => r.perSec),
      delayed: m,
      delayRatePerSec: rate,
      ...(timerFiles === undefined ? {} : { ownBroker: true, timerWheelBytes: timerFiles.wheel, timerLogBytes: timerFiles.log }),
      loadAverage: load.map((l) => roundTo(l, 2)),
    });
  } finally {
    for (const topic of Object.values(topics)) await admin.deleteTopic(topic).catch(() => undefined);
    for (const group of Object.values(groups)) {
      await admin.deleteTopic(`%RETRY%${group}`).catch(() => undefined);
      await admin.deleteGroup(group).catch(() => undefined);
    }
    await own?.stop();
  }
}
