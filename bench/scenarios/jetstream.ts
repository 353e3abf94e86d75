/**
 * `npm run bench -- jetstream [--messages N] [--prefetch P] [--rounds R] [--delayed M] [--rate S] [--seed X] [--delayed-sends D] [--only-delayed-sends] [--no-async-traces] [--servers URL]`
 *
 * redeliver on NATS JetStream against a bare `@nats-io/jetstream` pull
 * consumer on the same server, in the same run. Everything is written
 * under a random prefix of its own; every stream of it is deleted after
 * each case.
 *
 * 1. throughput: N messages (default 20,000), each `{ i, payload }` as
 *    JSON with a 256-character payload, are loaded first into a work-queue
 *    stream, then consumed with prefetch P (default 100): the consumer's
 *    `max_ack_pending` and the messages asked for per pull.
 *    - raw: `consumer.consume()`, `ack()` of each message (sent, not
 *      confirmed), nothing else.
 *    - raw, confirmed acks: the same with `ackAck()`, each ack confirmed by
 *      the server as redeliver's are, the acks of different messages in
 *      flight side by side.
 *    - raw, a flush per turn: `ack()`, then one `flush()` for the acks of
 *      each event-loop turn: what confirming acks in batches would cost.
 *    - redeliver: an Endpoint of concurrency P over a JetStreamTransport
 *      (`maxAckPending` P) with a handler that does nothing.
 *    Throughput = N / (consumer start to the last ack). R rounds (default
 *    3), the sides' order reversed every other round; each side reports
 *    its median round. `ratio` = redeliver / raw.
 * 2. delays: M messages (default 2,000) sent at S per second (default
 *    500), each thrown back once with a `RetryLaterError` of a delay
 *    uniform in [100 ms, 5 s) (seeded); lateness = the second attempt's
 *    start - (the throw + delay); negative is early.
 * 3. delayed sends: D (default 1,000) sent by a Producer with `delayMs`
 *    uniform in [1 s, 5 s), consumed with prefetch P; see
 *    bench/delayed-sends.ts. With `--only-delayed-sends`, the only case run.
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
      messages: { type: 'string', default: '20000' },
      prefetch: { type: 'string', default: '100' },
      rounds: { type: 'string', default: '3' },
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
  const timeoutMs = 120_000;
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
    { name: 'raw, confirmed acks', throughput: raw('confirmed') },
    { name: 'raw, a flush per turn', throughput: raw('flushed') },
    { name: 'redeliver', throughput: (count, round) => redeliverThroughput(redeliverSetup, count, round) },
  ];

  try {
    if (values['only-delayed-sends']) {
      const sends = await redeliverDelayedSends(redeliverSetup, delayedSends, seed);
      printDelayedSends(sends);
      printJson({ scenario: 'jetstream', delayedSends, ...delayedSendJson(sends) });
      return;
    }
    const runs: Throughput[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const side of round % 2 === 0 ? sides : [...sides].reverse()) runs.push(await side.throughput(n, round));
      load.push(loadavg()[0]!);
    }
    const delays = uniformDelays(m, seed, MIN_DELAY_MS, MAX_DELAY_MS);
    const lateness = await redeliverDelayLateness(redeliverSetup, delays, rate);
    load.push(loadavg()[0]!);
    const sends = await redeliverDelayedSends(redeliverSetup, delayedSends, seed);
    load.push(loadavg()[0]!);

    const of = (side: Throughput['side']) => runs.filter((r) => r.side === side);
    const median = (side: Throughput['side']) => Math.round(medianOf(of(side).map((r) => r.perSec)));
    printTable(
      `jetstream: ${n} messages loaded first, then consumed with prefetch ${prefetch}${noAsyncTraces ? ', noAsyncTraces' : ''}; per second from consumer start to the last ack (${rounds} rounds, order reversed every other round)`,
      sides.map((side) => ({
        side: side.name,
        'per sec (median)': median(side.name),
        'vs raw': roundTo(median(side.name) / median('raw'), 2),
        rounds: of(side.name).map((r) => r.perSec.toLocaleString('en-US')).join(' / '),
        'cpu ms': of(side.name).map((r) => r.cpuMs.toLocaleString('en-US')).join(' / '),
      })),
    );
    printTable(`delayed: ${m} messages sent at ${rate}/s, each retried once after a delay uniform in [${MIN_DELAY_MS} ms, ${MAX_DELAY_MS} ms); lateness = handled - (thrown + delay), ms`, [
      { side: 'redeliver', p50: lateness.p50, p99: lateness.p99, max: lateness.max, early: lateness.early, handled: lateness.count },
    ]);
    printDelayedSends(sends);
    console.log(`\nload average (1 min) during the run: ${load.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs`);

    const rawPerSec = median('raw');
    const redeliverPerSec = median('redeliver');
    const rawConfirmedPerSec = median('raw, confirmed acks');
    const rawFlushedPerSec = median('raw, a flush per turn');
    printJson({
      rawPerSec,
      redeliverPerSec,
      ratio: roundTo(redeliverPerSec / rawPerSec, 3),
      delayP50LatenessMs: lateness.p50,
      delayP99LatenessMs: lateness.p99,
      delayEarlyCount: lateness.early,
      scenario: 'jetstream',
      messages: n,
      prefetch,
      rounds,
      noAsyncTraces,
      rawConfirmedPerSec,
      confirmedRatio: roundTo(redeliverPerSec / rawConfirmedPerSec, 3),
      rawFlushedPerSec,
      rawRounds: of('raw').map((r) => r.perSec),
      rawConfirmedRounds: of('raw, confirmed acks').map((r) => r.perSec),
      rawFlushedRounds: of('raw, a flush per turn').map((r) => r.perSec),
      redeliverRounds: of('redeliver').map((r) => r.perSec),
      delayed: m,
      delayRatePerSec: rate,
      delayMaxLatenessMs: lateness.max,
      delayedSends,
      ...delayedSendJson(sends),
      loadAverage: load.map((l) => roundTo(l, 2)),
    });
  } finally {
    await assertNoStreams(servers, rawPrefix);
    await assertNoStreams(servers, redeliverSetup.prefix);
  }
}
