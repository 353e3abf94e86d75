/**
 * `npm run bench -- redis-replicas [--messages N] [--window W] [--concurrency C] [--rounds R] [--port P]`
 *
 * The cost of `waitReplicas: 1` on Redis, against `waitReplicas: 0` in the
 * same run, on a primary with one replica of the benchmark's own (ports P
 * and P + 1, default 7250; see bench/redis/replica-pair.ts).
 *
 * 1. send: N messages (default 5,000) sent with W sends in flight (default
 *    50). Throughput = N / (first send to the last one resolved).
 * 2. retry-once: N messages loaded first, then an Endpoint of concurrency
 *    C (default 50) handles them; each throws a `RetryLaterError(1)` on its
 *    first attempt, so every message writes a delayed-retry copy (a
 *    settlement that waits for the replica) and is acked on its second.
 *    Throughput = N / (endpoint start to the last message handled).
 *
 * Each case runs R rounds (default 3), the settings taking turns (0 then
 * 1, then 1 then 0, ...); each reports its median round, and the ratio is
 * the median over rounds of waitReplicas 1 over 0 in the same round.
 */
import { randomUUID } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RetryLaterError } from '../../src/policy/errors.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { deleteKeys } from '../redis/cleanup.js';
import { ReplicaPair } from '../redis/replica-pair.js';
import { countdown, messageName, within } from '../redis/workload.js';
import { medianOf, positiveArg, printJson, printTable, roundTo } from '../report.js';

type Case = 'send' | 'retry-once';
interface Round {
  readonly round: number;
  readonly waitReplicas: number;
  readonly case: Case;
  readonly perSec: number;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '5000' },
      window: { type: 'string', default: '50' },
      concurrency: { type: 'string', default: '50' },
      rounds: { type: 'string', default: '3' },
      port: { type: 'string', default: '7250' },
    },
  });
  const n = positiveArg('messages', values.messages);
  const window = positiveArg('window', values.window);
  const concurrency = positiveArg('concurrency', values.concurrency);
  const rounds = positiveArg('rounds', values.rounds);
  const port = positiveArg('port', values.port);
  const load = [loadavg()[0]!];
  const pair = await ReplicaPair.start(port);
  const body = Buffer.from(JSON.stringify({ payload: 'x'.repeat(256) }));
  const runs: Round[] = [];

  /** A transport on a prefix of its own, closed and its keys deleted once `fn` is done. */
  async function withTransport<T>(waitReplicas: number, fn: (transport: RedisTransport) => Promise<T>): Promise<T> {
    const keyPrefix = `bench-wr-${randomUUID().slice(0, 8)}`;
    const transport = new RedisTransport({ url: pair.url, keyPrefix, connectionName: 'redeliver-bench', checkServer: false, waitReplicas });
    try {
      return await fn(transport);
    } finally {
      await transport.close();
      await deleteKeys(pair.url, `{${keyPrefix}}:*`);
    }
  }

  async function sendAll(transport: RedisTransport, queue: string): Promise<void> {
    let next = 0;
    const lane = async () => {
      for (let i = next++; i < n; i = next++) await transport.send(queue, { id: messageName('m', i), body, headers: {} });
    };
    await Promise.all(Array.from({ length: window }, lane));
  }

  const cases: Record<Case, (waitReplicas: number) => Promise<number>> = {
    send: (waitReplicas) =>
      withTransport(waitReplicas, async (transport) => {
        const t0 = performance.now();
        await sendAll(transport, 'send');
        return (n * 1000) / (performance.now() - t0);
      }),
    'retry-once': (waitReplicas) =>
      withTransport(waitReplicas, async (transport) => {
        await sendAll(transport, 'retry');
        const handled = countdown(n);
        const endpoint = new Endpoint({
          name: 'bench-retry-once',
          queue: 'retry',
          transport,
          concurrency,
          handler: (_message, context) => {
            if (context.delayedAttempt === 0) throw new RetryLaterError(1);
            handled.tick();
          },
        });
        const t0 = performance.now();
        await endpoint.start();
        try {
          await within(handled.done, 300_000, `retry-once, waitReplicas ${waitReplicas}`);
          return (n * 1000) / (performance.now() - t0);
        } finally {
          await endpoint.stop();
        }
      }),
  };

  try {
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? [0, 1] : [1, 0];
      for (const label of ['send', 'retry-once'] as const) {
        for (const waitReplicas of order) runs.push({ round, waitReplicas, case: label, perSec: Math.round(await cases[label](waitReplicas)) });
      }
      load.push(loadavg()[0]!);
    }
  } finally {
    pair.stop();
  }

  const median = (waitReplicas: number, label: Case) => Math.round(medianOf(runs.filter((r) => r.waitReplicas === waitReplicas && r.case === label).map((r) => r.perSec)));
  /** The median over rounds of each round's waitReplicas 1 over 0. */
  const ratio = (label: Case) => {
    const of = (round: number, waitReplicas: number) => runs.find((r) => r.round === round && r.case === label && r.waitReplicas === waitReplicas)!.perSec;
    return roundTo(medianOf(Array.from({ length: rounds }, (_, round) => of(round, 1) / of(round, 0))), 3);
  };
  printTable(
    `redis-replicas: ${n} messages on a primary with one replica of its own (ports ${port}, ${port + 1}); ${window} sends in flight, endpoint concurrency ${concurrency}; ${rounds} rounds, settings in turns`,
    (['send', 'retry-once'] as const).flatMap((label) =>
      [0, 1].map((waitReplicas) => ({
        case: label,
        waitReplicas,
        'per sec (median)': median(waitReplicas, label),
        rounds: runs.filter((r) => r.waitReplicas === waitReplicas && r.case === label).map((r) => r.perSec.toLocaleString('en-US')).join(' / '),
        'ratio to 0 (median of rounds)': waitReplicas === 0 ? 1 : ratio(label),
      })),
    ),
  );
  console.log(`\nload average (1 min) during the run: ${load.map((l) => roundTo(l, 2)).join(' -> ')} on ${cpus().length} CPUs`);
  printJson({
    scenario: 'redis-replicas',
    sendPerSecWait0: median(0, 'send'),
    sendPerSecWait1: median(1, 'send'),
    sendRatio: ratio('send'),
    retryOncePerSecWait0: median(0, 'retry-once'),
    retryOncePerSecWait1: median(1, 'retry-once'),
    retryOnceRatio: ratio('retry-once'),
    messages: n,
    window,
    concurrency,
    rounds,
    loadAverage: load.map((l) => roundTo(l, 2)),
  });
}
