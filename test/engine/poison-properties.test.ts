/**
 * Property: whatever the user's callbacks do (throw, answer garbage, hang)
 * at whatever point, the process sees no unhandled rejection and no message
 * is lost: each ends handled, in the error queue, discarded by the policy,
 * or still pending in its queue.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { CustomPolicy } from '../../src/endpoint/options.js';
import type { Backoff } from '../../src/backoff/types.js';
import { MemoryDeduplicationStore } from '../../src/dedup/memory-store.js';
import type { DedupClaim, DeduplicationStore } from '../../src/dedup/types.js';
import type { Logger } from '../../src/logger.js';
import { discard, retryLater } from '../../src/policy/decision.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';
import type { Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { drain, sendJson } from '../support/engine-harness.js';

/** What a user callback does on one call. */
type Act = 'ok' | 'throw' | 'garbage' | 'hang';

/** How often each callback misbehaves, per call: each a probability. */
interface Chaos {
  handlerFails: number;
  handlerHangs: number;
  handlerRequeues: number;
  predicate: number;
  backoff: number;
  policy: number;
  dedup: number;
  dedupHangs: number;
  listener: number;
  logger: number;
}

/** How often a callback misbehaves: never, sometimes, often. */
const p = fc.constantFrom(0, 0.05, 0.2, 0.4);
const chaos: fc.Arbitrary<Chaos> = fc.record({
  handlerFails: fc.constantFrom(0, 0.3, 0.6, 0.9),
  handlerHangs: fc.constantFrom(0, 0.02, 0.1),
  handlerRequeues: p,
  predicate: p,
  backoff: p,
  policy: p,
  dedup: p,
  dedupHangs: fc.constantFrom(0, 0.01, 0.05),
  listener: p,
  logger: p,
});

const never = () => new Promise<never>(() => undefined);

/** Picks an act: `misbehave` of the time one of throw, garbage (and hang when `hangs` > 0). */
function actor(random: () => number, misbehave: number, hangs = 0): () => Act {
  return () => {
    const r = random();
    if (r < hangs) return 'hang';
    if (r < hangs + misbehave) return random() < 0.5 ? 'throw' : 'garbage';
    return 'ok';
  };
}

function chaoticStore(random: () => number, c: Chaos): DeduplicationStore {
  const base = new MemoryDeduplicationStore(60_000);
  const act = actor(random, c.dedup, c.dedupHangs);
  const wrap =
    <A extends unknown[], R>(real: (...a: A) => Promise<R>, garbage: unknown) =>
    (...args: A): Promise<R> => {
      switch (act()) {
        case 'throw':
          throw new Error('SQLITE_BUSY: database is locked');
        case 'garbage':
          return Promise.resolve(garbage as R);
        case 'hang':
          return never();
        default:
          return real(...args);
      }
    };
  return {
    begin: wrap((id: string, now: number, leaseMs: number) => base.begin(id, now, leaseMs), { outcome: 'maybe' } as unknown as DedupClaim),
    complete: wrap((id: string, token: string, now: number) => base.complete(id, token, now), 42),
    abandon: wrap((id: string, token: string) => base.abandon(id, token), 'x'),
  };
}

async function runChaos(makeTransport: (clock: FakeClock) => Transport, c: Chaos, seed: number, messages: number, withDedup: boolean): Promise<void> {
  const unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', onUnhandled);
  const clock = new FakeClock(Date.UTC(2026, 0, 1));
  const transport = makeTransport(clock);
  const random = seededRandom(seed);
  const handlerAct = () => {
    const r = random();
    if (r < c.handlerHangs) return 'hang';
    if (r < c.handlerHangs + c.handlerRequeues) return random() < 0.5 ? 'requeue' : 'bad-requeue';
    if (r < c.handlerHangs + c.handlerRequeues + c.handlerFails) return random() < 0.7 ? 'throw' : 'reject-garbage';
    return 'ok';
  };
  const predicateAct = actor(random, c.predicate);
  const backoffAct = actor(random, c.backoff);
  const policyAct = actor(random, c.policy);
  const listenerAct = actor(random, c.listener);
  const loggerAct = actor(random, c.logger);
  const log = () => {
    if (loggerAct() !== 'ok') throw new Error('logger bug');
  };
  const logger: Logger = { info: log, warn: log, error: log };
  const backoff: Backoff = () => {
    const act = backoffAct();
    if (act === 'throw') throw new Error('backoff bug');
    if (act === 'garbage') return (random() < 0.5 ? Number.NaN : 'soon') as unknown as number;
    return 1_000;
  };
  const policy: CustomPolicy = (_failure, defaultDecision) => {
    const act = policyAct();
    if (act === 'throw') throw new Error('policy bug');
    if (act === 'garbage') return (random() < 0.5 ? { kind: 'explode' } : retryLater(-5)) as never;
    return random() < 0.05 ? discard('obsolete') : defaultDecision;
  };
  const endpoint = new Endpoint<{ n: number }>({
    name: 'chaos',
    transport,
    clock,
    random: seededRandom(seed + 1),
    logger,
    concurrency: 3,
    settlementRetries: 1,
    ...(withDedup ? { deduplication: chaoticStore(random, c) } : {}),
    recoverability: {
      immediateRetries: 1,
      delayedRetries: 2,
      maxDelayMs: 5_000,
      delayedBackoff: backoff,
      isUnrecoverable: (error) => {
        const act = predicateAct();
        if (act === 'throw') throw new Error('predicate bug');
        if (act === 'garbage') return 'perhaps' as unknown as boolean;
        return (error as Error)?.message === 'fatal';
      },
      policy,
    },
    handler: async (_m, ctx) => {
      switch (handlerAct()) {
        case 'hang':
          return never();
        case 'requeue':
          ctx.requeue({ delayMs: 500 });
          return;
        case 'bad-requeue':
          ctx.requeue({ delayMs: -1 });
          return;
        case 'throw':
          throw new Error(random() < 0.2 ? 'fatal' : 'transient');
        case 'reject-garbage':
          return Promise.reject(random() < 0.5 ? undefined : 'a string');
        default:
          return;
      }
    },
  });
  const handled = new Set<string>();
  const discarded = new Set<string>();
  const chaoticListener = () => {
    if (listenerAct() !== 'ok') throw new Error('listener bug');
  };
  endpoint.on('handled', (e) => {
    handled.add(e.messageId);
    chaoticListener();
  });
  endpoint.on('duplicate', (e) => {
    handled.add(e.messageId);
    chaoticListener();
  });
  endpoint.on('discarded', (e) => {
    discarded.add(e.messageId);
    chaoticListener();
  });
  endpoint.on('deadLettered', chaoticListener);
  endpoint.on('immediateRetry', chaoticListener);
  endpoint.on('delayedRetry', chaoticListener);

  const ids = Array.from({ length: messages }, (_, i) => `m${i}`);
  try {
    for (const id of ids) await sendJson(transport, 'chaos', id, { n: 1 });
    await endpoint.start();
    await clock.runUntil(() => endpoint.stats.handled + endpoint.stats.deadLettered + endpoint.stats.discarded >= messages, 120_000);
    const stopping = endpoint.stop({ timeoutMs: 1_000 });
    let stopped = false;
    void stopping.then(() => (stopped = true));
    expect(await clock.runUntil(() => stopped, 10_000)).toBe(true);
    await stopping;

    const errorIds = new Set((await drain(transport, 'error', clock, endpoint.stats.deadLettered)).map((d) => d.id));
    const accounted = () => new Set([...handled, ...discarded, ...errorIds]);
    const missing = ids.filter((id) => !accounted().has(id));
    const pending = new Set((await drain(transport, 'chaos', clock, missing.length)).map((d) => d.id));
    const lost = missing.filter((id) => !pending.has(id));
    expect(lost).toEqual([]);
    expect(unhandled).toEqual([]);
  } finally {
    process.off('unhandledRejection', onUnhandled);
    await transport.close();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'redeliver-chaos-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let file = 0;

const transports: [string, (clock: FakeClock) => Transport, number][] = [
  ['memory', (clock) => new MemoryTransport({ clock }), 60],
  ['SQLite', (clock) => new SqliteTransport({ path: join(dir, `chaos-${++file}.db`), clock }), 25],
];

describe.each(transports)('chaotic user callbacks on the %s transport', (_name, makeTransport, runs) => {
  it('never reject unhandled, and every message ends handled, dead-lettered, discarded or pending', async () => {
    await fc.assert(
      fc.asyncProperty(chaos, fc.integer(), fc.integer({ min: 1, max: 15 }), fc.boolean(), (c, seed, messages, withDedup) =>
        runChaos(makeTransport, c, seed, messages, withDedup),
      ),
      { numRuns: runs },
    );
  }, 60_000);
});
