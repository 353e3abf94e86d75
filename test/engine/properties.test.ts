import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { UnrecoverableError } from '../../src/policy/errors.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { drain, sendJson } from '../support/engine-harness.js';

type Outcome = 'ok' | 'fail' | 'unrecoverable' | 'requeue' | 'retry-later';

const outcome = fc.constantFrom<Outcome>('ok', 'fail', 'fail', 'fail', 'unrecoverable', 'requeue', 'retry-later');

describe('every message ends acked or in the error queue, exactly once', () => {
  it('holds under any sequence of failures, unrecoverable errors and requeues', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(outcome, { maxLength: 30 }), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer(),
        async (scripts, immediateRetries, delayedRetries, concurrency, seed) => {
          const clock = new FakeClock(0);
          const transport = new MemoryTransport({ clock });
          const attempts = new Map<string, number>();
          const handledIds: string[] = [];
          const endpoint = new Endpoint<{ i: number }>({
            name: 'prop',
            transport,
            clock,
            random: seededRandom(seed),
            concurrency,
            recoverability: { immediateRetries, delayedRetries },
            handler: (m, ctx) => {
              const n = attempts.get(ctx.messageId) ?? 0;
              attempts.set(ctx.messageId, n + 1);
              const step = scripts[m.i]![n] ?? 'ok';
              if (step === 'fail') throw new Error(`fail ${n}`);
              if (step === 'unrecoverable') throw new UnrecoverableError('bad');
              if (step === 'retry-later') throw Object.assign(new Error('later'), {});
              if (step === 'requeue') ctx.requeue({ delayMs: 1_000 });
            },
          });
          endpoint.on('handled', (e) => handledIds.push(e.messageId));
          await endpoint.start();
          for (let i = 0; i < scripts.length; i++) await sendJson(transport, 'prop', `m${i}`, { i });
          const settled = () => endpoint.stats.handled + endpoint.stats.deadLettered;
          const done = await clock.runUntil(() => settled() >= scripts.length);
          expect(done).toBe(true);
          await endpoint.stop();
          const dead = await drain(transport, 'error', clock, endpoint.stats.deadLettered);
          const deadIds = dead.map((d) => d.id);
          const all = [...handledIds, ...deadIds].sort();
          expect(all).toEqual(scripts.map((_, i) => `m${i}`).sort());
          expect(transport.depth('prop')).toBe(0);
          expect(transport.delayedCount).toBe(0);
          for (const n of attempts.values()) expect(n).toBeLessThanOrEqual((immediateRetries + 1) * (delayedRetries + 1));
          await transport.close();
        },
      ),
      { numRuns: 150 },
    );
  });
});
