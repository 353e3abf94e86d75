/**
 * Whatever a handler throws (a value whose getters or traps throw, null, a
 * symbol, a huge message or stack) becomes a bounded failure summary and
 * follows its policy to the error queue: never a release without limit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER, LIMITS } from '../../src/headers/names.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { drain, sendJson, startEndpoint } from '../support/engine-harness.js';
import { HOSTILE_VALUES } from '../support/hostile-values.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-hostile-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('hostile thrown values on SQLite', () => {
  it('each reaches the error queue after exactly 2 handler calls, and a normal message after them is handled', async () => {
    const calls = new Map<string, number>();
    const harness = await startEndpoint<{ hostile?: number }>((clock) => new SqliteTransport({ path: join(dir, 'hostile.db'), clock }), {
      recoverability: { immediateRetries: 1, delayedRetries: 0 },
      handler: (message, ctx) => {
        calls.set(ctx.messageId, (calls.get(ctx.messageId) ?? 0) + 1);
        if (message.hostile !== undefined) throw HOSTILE_VALUES[message.hostile]![1]();
      },
    });
    for (const [index] of HOSTILE_VALUES.entries()) await sendJson(harness.transport, 'orders', `hostile-${index}`, { hostile: index });
    await harness.until(HOSTILE_VALUES.length, 60_000);
    await sendJson(harness.transport, 'orders', 'normal', {});
    await harness.until(HOSTILE_VALUES.length + 1, 60_000);
    expect(harness.endpoint.stats).toMatchObject({ handled: 1, deadLettered: HOSTILE_VALUES.length, inFlight: 0 });
    for (const [index] of HOSTILE_VALUES.entries()) expect(calls.get(`hostile-${index}`)).toBe(2);
    expect(calls.get('normal')).toBe(1);
    await harness.endpoint.stop({ timeoutMs: 1_000 });
    expect(harness.endpoint.running).toBe(false);
    const copies = await drain(harness.transport, 'error', harness.clock, HOSTILE_VALUES.length);
    expect(copies.map((c) => c.id).sort()).toEqual(HOSTILE_VALUES.map((_, i) => `hostile-${i}`).sort());
    for (const copy of copies) {
      expect(copy.headers[HEADER.failureReason]).toBe('retries-exhausted');
      expect(copy.headers[HEADER.failureAttempts]).toBe('2');
      expect(copy.headers[HEADER.failureMessage]!.length).toBeLessThanOrEqual(LIMITS.messageChars);
      expect((copy.headers[HEADER.failureStack] ?? '').length).toBeLessThanOrEqual(LIMITS.stackChars);
    }
    await harness.transport.close();
  });
});
