/**
 * `npm run bench -- redis [--messages N] [--concurrency C] [--delayed M] [--rate P] [--rounds R] [--seed S] [--delayed-sends D] [--only-delayed-sends] [--url URL]`
 *
 * redeliver on Redis against BullMQ on the same Redis, in the same run. Each
 * side writes only under a key prefix of its own and deletes every key it
 * wrote afterwards.
 *
 * 1. success: N messages (default 20,000) are loaded first, then consumed
 *    with concurrency C (default 50) by a handler that does nothing.
 *    Throughput = N / (consumer start to the last message handled).
 * 2. failing10: the same, with a seeded 10 % of the messages (the same ones
 *    on both sides) throwing on their first attempt: redeliver retries them
 *    at once (its default policy), BullMQ with `attempts: 2` and no backoff.
 *    The throughput cases run R rounds (default 2), the sides taking turns
 *    in the order A B, then B A, so neither always runs on a warmer machine;
 *    each side reports its median round.
 * 3. delays: M messages (default 2,000) each come back once after a delay
 *    uniform in [100 ms, 20 s) (seeded), sent at P per second (default
 *    500) on both sides, so a returning retry never waits behind first
 *    deliveries still queued. redeliver: the handler throws a
 *    `RetryLaterError(delay)` on the first attempt; lateness = the second
 *    attempt's start - (the throw + delay). BullMQ: jobs added with `delay`;
 *    lateness = the handler's start - (the job's timestamp + delay).
 *    Negative lateness is an early delivery.
 * 4. delayed sends (redeliver only): D (default 1,000) sent by a Producer
 *    with `delayMs` uniform in [1 s, 5 s); see bench/delayed-sends.ts.
 *    With `--only-delayed-sends`, the only case run.
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { bullmqDelayLateness, bullmqThroughput, type BullmqSetup } from '../redis/bullmq.js';
import { assertNoKeys } from '../redis/cleanup.js';
import { redeliverDelayedSends, redeliverDelayLateness, redeliverThroughput, type RedeliverSetup } from '../redis/redeliver.js';
import { delayedSendJson, printDelayedSends } from '../delayed-sends.js';
import { failingFirst, payloadString, uniformDelays, type LatenessSummary, type Throughput } from '../redis/workload.js';
import { medianOf, printJson, printTable, positiveArg, roundTo } from '../report.js';

/** One side of the comparison. */
interface Side {
  readonly name: Throughput['side'];
  throughput(label: Throughput['case'], n: number, failing: readonly boolean[]): Promise<Throughput>;
  delays(delays: readonly number[], rate: number): Promise<LatenessSummary>;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '20000' },
      concurrency: { type: 'string', default: '50' },
      delayed: { type: 'string', default: '2000' },
      rounds: { type: 'string', default: '2' },
      rate: { type: 'string', default: '500' },
      seed: { type: 'string', default: '42' },
      url: { type: 'string', default: process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379' },
      'delayed-sends': { type: 'string', default: '1000' },
      'only-delayed-sends': { type: 'boolean', default: false },
    },
  });
  const delayedSends = positiveArg('delayed-sends', values['delayed-sends']);
  const n = positiveArg('messages', values.messages);
  const concurrency = positiveArg('concurrency', values.concurrency);
  const m = positiveArg('delayed', values.delayed);
  const rounds = positiveArg('rounds', values.rounds);
  const rate = positiveArg('rate', values.rate);
  const seed = positiveArg('seed', values.seed);
  const url = values.url;
  const load = [loadavg()[0]!];

  const run = randomUUID().slice(0, 8);
  const payload = payloadString(seed);
  const timeoutMs = 120_000;
  const bullmqSetup: BullmqSetup = { url, prefix: `bench-bull-${run}`, concurrency, payload, timeoutMs };
  const redeliverSetup: RedeliverSetup = { url, keyPrefix: `bench-rdl-${run}`, concurrency, payload, timeoutMs };
  const sides: Side[] = [
    {
      name: 'redeliver',
      throughput: (label, count, failing) => redeliverThroughput(redeliverSetup, label, count, failing),
      delays: (delays, perSec) => redeliverDelayLateness(redeliverSetup, delays, perSec),
    },
    {
      name: 'bullmq',
      throughput: (label, count, failing) => bullmqThroughput(bullmqSetup, label, count, failing),
      delays: (delays, perSec) => bullmqDelayLateness(bullmqSetup, delays, perSec),
    },
  ];
  const none = new Array<boolean>(n).fill(false);
  const failing = failingFirst(n, 0.1, seed);

  try {
    if (values['only-delayed-sends']) {
      const sends = await redeliverDelayedSends(redeliverSetup, delayedSends, seed);
      printDelayedSends(sends);
      printJson({ scenario: 'redis', delayedSends, ...delayedSendJson(sends) });
      return;
    }
    const runs: Throughput[] = [];
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? sides : [...sides].reverse();
      for (const side of order) runs.push(await side.throughput('success', n, none));
      for (const side of [...order].reverse()) runs.push(await side.throughput('failing10', n, failing));
      load.push(loadavg()[0]!);
    }
    const delays = uniformDelays(m, seed);
    const lateness = new Map<Throughput['side'], LatenessSummary>();
    for (const side of sides) {
      lateness.set(side.name, await side.delays(delays, rate));
      load.push(loadavg()[0]!);
    }
    const sends = await redeliverDelayedSends(redeliverSetup, delayedSends, seed);
    load.push(loadavg()[0]!);

    const median = (side: Throughput['side'], label: Throughput['case']) => {
      const perSec = runs.filter((r) => r.side === side && r.case === label).map((r) => r.perSec);
      return perSec.length === 0 ? undefined : Math.round(medianOf(perSec));
    };
    printTable(
      `redis: ${n} messages loaded first, then consumed with concurrency ${concurrency}; per second from consumer start to the last handled (${rounds} rounds, sides in turns)`,
      sides.flatMap((side) =>
        (['success', 'failing10'] as const).map((label) => ({
          side: side.name,
          case: label,
          'per sec (median)': median(side.name, label) ?? '-',
          rounds: runs.filter((r) => r.side === side.name && r.case === label).map((r) => r.perSec.toLocaleString('en-US')).join(' / '),
          'cpu ms': runs.filter((r) => r.side === side.name && r.case === label).map((r) => r.cpuMs.toLocaleString('en-US')).join(' / '),
        })),
      ),
    );
    printTable(
      `delayed: ${m} messages sent at ${rate}/s, delays uniform in [100 ms, 20 s); lateness = handled - (scheduled + delay), ms`,
      sides.map((side) => {
        const l = lateness.get(side.name)!;
        return { side: side.name, p50: l.p50, p99: l.p99, max: l.max, early: l.early, handled: l.count };
      }),
    );
    printDelayedSends(sends);
    console.log(`\nload average (1 min) during the run: ${load.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs`);

    const ours = lateness.get('redeliver')!;
    const bull = lateness.get('bullmq')!;
    const redeliverPerSec = median('redeliver', 'success')!;
    const bullmqPerSec = median('bullmq', 'success')!;
    printJson({
      redeliverPerSec,
      bullmqPerSec,
      ratio: roundTo(redeliverPerSec / bullmqPerSec, 3),
      failing10PerSec: median('redeliver', 'failing10'),
      bullmqFailing10PerSec: median('bullmq', 'failing10'),
      delayP50LatenessMs: ours.p50,
      delayP99LatenessMs: ours.p99,
      delayEarlyCount: ours.early,
      bullmqDelayP99LatenessMs: bull.p99,
      scenario: 'redis',
      messages: n,
      concurrency,
      delayed: m,
      delayRatePerSec: rate,
      rounds,
      failing10Ratio: roundTo(median('redeliver', 'failing10')! / median('bullmq', 'failing10')!, 3),
      delayMaxLatenessMs: ours.max,
      bullmqDelayP50LatenessMs: bull.p50,
      bullmqDelayMaxLatenessMs: bull.max,
      bullmqDelayEarlyCount: bull.early,
      delayedSends,
      ...delayedSendJson(sends),
      loadAverage: load.map((l) => roundTo(l, 2)),
    });
  } finally {
    await assertNoKeys(url, `{${redeliverSetup.keyPrefix}}:*`);
    await assertNoKeys(url, `${bullmqSetup.prefix}:*`);
  }
}
