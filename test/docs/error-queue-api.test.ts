/**
 * docs/error-queue-api.md's example, run as written against a real SQLite
 * file: read an error queue page by page with the failure facts, then send
 * back one kind of failure, once however often it runs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readFailureFacts } from '../../src/index.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { sendJson, startEndpoint } from '../support/engine-harness.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-error-queue-api-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

class PaymentDeclinedError extends Error {
  override readonly name = 'PaymentDeclinedError';
}

describe('the error-queue API of docs/error-queue-api.md', () => {
  it('scans entries with their failure facts and sends back one kind of failure once', async () => {
    const harness = await startEndpoint<{ declined: boolean }>((clock) => new SqliteTransport({ path: join(dir, 'orders.db'), clock }), {
      recoverability: { immediateRetries: 0, delayedRetries: 0 },
      handler: (message) => {
        throw message.declined ? new PaymentDeclinedError('card declined') : new TypeError('bad order');
      },
    });
    for (let i = 0; i < 3; i++) await sendJson(harness.transport, 'orders', `declined-${i}`, { declined: true });
    await sendJson(harness.transport, 'orders', 'broken', { declined: false });
    await harness.until(4, 30_000);
    await harness.endpoint.stop({ timeoutMs: 1_000 });

    const errors = harness.transport.errorQueue!;
    expect(await errors.count('error')).toBe(4);
    const seen: { messageId: string; queue: string; reason: string; errorName: string }[] = [];
    for await (const page of errors.scan('error', { pageSize: 2 })) {
      for (const entry of page) {
        const facts = readFailureFacts(entry.headers);
        seen.push({ messageId: entry.messageId, queue: facts.queue, reason: facts.reason, errorName: facts.errorName });
      }
    }
    expect(seen.map((s) => s.messageId).sort()).toEqual(['broken', 'declined-0', 'declined-1', 'declined-2']);
    expect(seen.every((s) => s.queue === 'orders')).toBe(true);
    expect(seen.find((s) => s.messageId === 'broken')).toMatchObject({ reason: 'retries-exhausted', errorName: 'TypeError' });

    const select = (e: { headers: Readonly<Record<string, string>> }) => readFailureFacts(e.headers).errorName === 'PaymentDeclinedError';
    const first = await errors.sendBackEach('error', { select, allowedQueues: ['orders'] });
    expect(first).toMatchObject({ read: 4, selected: 3, done: 3, refused: 0, failed: 0 });
    const second = await errors.sendBackEach('error', { select, allowedQueues: ['orders'] });
    expect(second).toMatchObject({ selected: 0, done: 0 });
    expect(await errors.count('error')).toBe(1);
    await harness.transport.close();
  });
});
