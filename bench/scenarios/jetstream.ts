/**
 * `npm run bench -- jetstream [--messages N] [--prefetch P] [--rounds R] [--raw-variants] [--throughput-only] [--delayed M] [--rate S] [--seed X] [--delayed-sends D] [--only-delayed-sends] [--no-async-traces] [--servers URL]`
 *
 * redeliver on NATS JetStream against a bare `@nats-io/jetstream` pull
 * consumer on the same server, in the same run. Everything is written
 * under a random prefix of its own; every stream of it is deleted after
 * each case.
 *
 * 1. throughput: N messages (default 100,000), each `{ i, payload }` as
 *    JSON with a 256-character payload, are loaded first into a work-queue
 *    stream of the round's own, then consumed with prefetch P (default
 *    100): the consumer's `max_ack_pending` and the messages asked for per
 *    pull.
 *    - raw: `consumer.consume()`, `ack()` of each message (sent, not
 *      confirmed), one `flush()` after the last.
 *    - redeliver: an Endpoint of concurrency P over a JetStreamTransport
 *      (`maxAckPending` P) with a handler that does nothing; each ack
 *      confirmed by the server before the message counts as handled.
 *    - with `--raw-variants`, two more raw sides in every round:
 *      `ackAck()` of each message (each ack confirmed by its own reply),
 *      and `ack()` with one `flush()` per event-loop turn.
 *    Throughput = N / (consumer start to the last ack). One warm-up round
 *    of each side first, not counted; then R rounds (default 5), raw then
 *    redeliver, the order reversed every other round. `ratio` = the median
 *    of the rounds' redeliver / raw; `cpuRatio` = the median of the rounds'
 *    CPU time of the bench process, redeliver / raw (the server's CPU not
 *    in it), steadier than `ratio` on a machine shared with other work.
 * 2. delays (skipped with `--throughput-only`): M messages (default 2,000)
 *    sent at S per second (default 500), each thrown back once with a
 *    `RetryLaterError` of a delay uniform in [100 ms, 5 s) (seeded);
 *    lateness = the second attempt's start - (the throw + delay); negative
 *    is early.
 * 3. delayed sends (skipped with `--throughput-only`): D (default 1,000)
 *    sent by a Producer with `delayMs` uniform in [1 s, 5 s), consumed with
 *    prefetch P; see bench/delayed-sends.ts. With `--only-delayed-sends`,
 *    the only case run.
 *
 * `--no-async-traces` makes the bare consumers' connections with the
 * client's `noAsyncTraces`: no `Error` captured up front for each request
 * (every confirmed ack and every publish is one). The transport makes its
 * own connection that way by default.
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { medianOf, printJson, printTable, positiveArg, roundTo } from '../report.js';
import { payloadString, uniformDelays } from '../redis/workload.js';
import { rawThroughput, type RawAcks } from '../jetstream/raw.js';
import { redeliverDelayedSends, redeliverDelayLateness, redeliverThroughput, type RedeliverSetup } from '../jetstream/redeliver.js';
import { delayedSendJson, printDelayedSends } from '../delayed-sends.js';
import { assertNoStreams, deleteStreams, withClients } from '../jetstream/server.js';
import type { Throughput } from '../jetstream/workload.js';

const MIN_DELAY_MS = 100;
const MAX_DELAY_MS = 5_000;

interface Side {
  readonly name: Throughput['side'];
  throughput(n: number, round: number): Promise<Throughput>;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '100000' },
      prefetch: { type: 'string', default: '100' },
      rounds: { type: 'string', default: '5' },
      'raw-variants': { type: 'boolean', default: false },
      'throughput-only': { type: 'boolean', default: false },
      delayed: { type: 'string', default: '2000' },
      rate: { type: 'string', default: '500' },
      seed: { type: 'string', default: '42' },
      'no-async-traces': { type: 'boolean', default: false },
      servers: { type: 'string', default: process.env['NATS_URL'] ?? '127.0.0.1:4222' },
      'delayed-sends': { type: 'string', default: '1000' },
      'only-delayed-sends': { type: 'boolean', default: false },
    },
  });
  const delayedSends = positiveArg('delayed-sends', values['delayed-sends']);
  const n = positiveArg('messages', values.messages);
  const prefetch = positiveArg('prefetch', values.prefetch);
  const rounds = positiveArg('rounds', values.rounds);
  const m = positiveArg('delayed', values.delayed);
  const rate = positiveArg('rate', values.rate);
  const seed = positiveArg('seed', values.seed);
  const servers = values.servers;
  const noAsyncTraces = values['no-async-traces'];
  const load = [loadavg()[0]!];

  const run = randomUUID().slice(0, 8);
  const payload = payloadString(seed);
  const timeoutMs = 180_000;
  const rawPrefix = `bench-js-raw-${run}`;
  const redeliverSetup: RedeliverSetup = { servers, prefix: `bench-js-rdl-${run}`, prefetch, payload, timeoutMs };
  const raw = (acks: RawAcks) => (count: number, round: number) =>
    withClients(
      servers,
      'redeliver-bench-raw',
      async (clients) => {
        const setup = { stream: `${rawPrefix}_RAW`, subject: `${rawPrefix}.raw`, prefetch, payload, acks, timeoutMs };
        try {
          return await rawThroughput(clients, setup, count, round);
        } finally {
          await deleteStreams(clients.jsm, rawPrefix);
        }
      },
      noAsyncTraces,
    );
  const sides: Side[] = [
    { name: 'raw', throughput: raw('sent') },
    ...(values['raw-variants']
      ? [
          { name: 'raw, confirmed acks', throughput: raw('confirmed') },
          { name: 'raw, a flush per turn', throughput: raw('flushed') },
        ] satisfies Side[]
      : []),
    { name: 'redeliver', throughput: (count, round) => redeliverThroughput(redeliverSetup, count, round) },
  ];

  try {
    if (values['only-delayed-sends']) {
      const sends = await redeliverDelayedSends(redeliverSetup, delayedSends, seed);
      printDelayedSends(sends);
      printJson({ scenario: 'jetstream', delayedSends, ...delayedSendJson(sends) });
      return;
    }
    // 1. throughput: a warm-up round of each side (round -1, not counted), then interleaved rounds.
    const runs: (Throughput & { round: number })[] = [];
    for (let round = -1; round < rounds; round++) {
      for (const side of round % 2 === 1 ? [...sides].reverse() : sides) {
        const result = await side.throughput(n, round + 1);
        if (round >= 0) runs.push({ ...result, round });
      }
      load.push(loadavg()[0]!);
    }
    const of = (side: Throughput['side']) => runs.filter((r) => r.side === side);
    const median = (side: Throughput['side']) => Math.round(medianOf(of(side).map((r) => r.perSec)));
    const perSec = (round: number, side: Throughput['side']) => runs.find((r) => r.round === round && r.side === side)!.perSec;
    const roundRatios = Array.from({ length: rounds }, (_, round) => roundTo(perSec(round, 'redeliver') / perSec(round, 'raw'), 3));
    const ratio = roundTo(medianOf(roundRatios), 3);
    const cpuMs = (round: number, side: Throughput['side']) => runs.find((r) => r.round === round && r.side === side)!.cpuMs;
    const cpuRoundRatios = Array.from({ length: rounds }, (_, round) => roundTo(cpuMs(round, 'redeliver') / cpuMs(round, 'raw'), 3));
    const cpuRatio = roundTo(medianOf(cpuRoundRatios), 3);
    printTable(
      `jetstream: ${n} messages loaded first, then consumed with prefetch ${prefetch}${noAsyncTraces ? ', noAsyncTraces' : ''}; per second from consumer start to the last ack (a warm-up round, then ${rounds} rounds, order reversed every other round)`,
      sides.map((side) => ({
        side: side.name,
        'per sec (median)': median(side.name),
        'vs raw (median of rounds)': side.name === 'raw' ? 1 : roundTo(medianOf(Array.from({ length: rounds }, (_, round) => perSec(round, side.name) / perSec(round, 'raw'))), 3),
        rounds: of(side.name).map((r) => r.perSec.toLocaleString('en-US')).join(' / '),
        'cpu ms': of(side.name).map((r) => r.cpuMs.toLocaleString('en-US')).join(' / '),
      })),
    );
    console.log(`redeliver / raw by round: ${roundRatios.join(' / ')}; CPU of the bench process, redeliver / raw: ${cpuRoundRatios.join(' / ')} (median ${cpuRatio})`);

    let delayFigures: Record<string, unknown> = {};
    if (!values['throughput-only']) {
      const delays = uniformDelays(m, seed, MIN_DELAY_MS, MAX_DELAY_MS);
      const lateness = await redeliverDelayLateness(redeliverSetup, delays, rate);
      load.push(loadavg()[0]!);
      const sends = await redeliverDelayedSends(redeliverSetup, delayedSends, seed);
      load.push(loadavg()[0]!);
      printTable(`delayed: ${m} messages sent at ${rate}/s, each retried once after a delay uniform in [${MIN_DELAY_MS} ms, ${MAX_DELAY_MS} ms); lateness = handled - (thrown + delay), ms`, [
        { side: 'redeliver', p50: lateness.p50, p99: lateness.p99, max: lateness.max, early: lateness.early, handled: lateness.count },
      ]);
      printDelayedSends(sends);
      delayFigures = {
        delayP50LatenessMs: lateness.p50,
        delayP99LatenessMs: lateness.p99,
        delayMaxLatenessMs: lateness.max,
        delayEarlyCount: lateness.early,
        delayed: m,
        delayRatePerSec: rate,
        delayedSends,
        ...delayedSendJson(sends),
      };
    }
    console.log(`\nload average (1 min) during the run: ${load.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs`);

    const variants = values['raw-variants']
      ? {
          rawConfirmedPerSec: median('raw, confirmed acks'),
          rawFlushedPerSec: median('raw, a flush per turn'),
          rawConfirmedRounds: of('raw, confirmed acks').map((r) => r.perSec),
          rawFlushedRounds: of('raw, a flush per turn').map((r) => r.perSec),
        }
      : {};
    printJson({
      ratio,
      roundRatios,
      cpuRatio,
      cpuRoundRatios,
      rawPerSec: median('raw'),
      redeliverPerSec: median('redeliver'),
      rawRounds: of('raw').map((r) => r.perSec),
      redeliverRounds: of('redeliver').map((r) => r.perSec),
      rawCpuMs: of('raw').map((r) => r.cpuMs),
      redeliverCpuMs: of('redeliver').map((r) => r.cpuMs),
      rawDrainMs: of('raw').map((r) => r.drainMs),
      redeliverDrainMs: of('redeliver').map((r) => r.drainMs),
      scenario: 'jetstream',
      messages: n,
      prefetch,
      rounds,
      noAsyncTraces,
      ...variants,
      ...delayFigures,
      loadAverage: load.map((l) => roundTo(l, 2)),
    });
  } finally {
    await assertNoStreams(servers, rawPrefix);
    await assertNoStreams(servers, redeliverSetup.prefix);
  }
}
