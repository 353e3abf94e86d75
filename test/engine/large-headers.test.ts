/**
 * redeliver's retry state survives user headers as large as a send accepts:
 * a message allowed 4 attempts reaches the error queue after exactly 4, with
 * its failure history and the user's headers intact, on every transport.
 * (RabbitMQ: test/engine/rabbitmq-engine.test.ts.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { constant } from '../../src/backoff/constant.js';
import { HEADER } from '../../src/headers/names.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { drain, sendJson, startEndpoint, type TransportFactory } from '../support/engine-harness.js';
import { userHeadersAtTheLimit } from '../support/large-headers.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-large-headers-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const transports: [string, TransportFactory][] = [
  ['memory', (clock) => new MemoryTransport({ clock })],
  ['sqlite', (clock) => new SqliteTransport({ path: join(dir, `${Math.random().toString(36).slice(2)}.db`), clock })],
];

describe.each(transports)('user headers at the send limit on %s', (_name, factory) => {
  it('leave the retry limit and the failure history intact', async () => {
    let calls = 0;
    const harness = await startEndpoint(factory, {
      recoverability: { immediateRetries: 1, delayedRetries: 1, delayedBackoff: constant(1_000) },
      handler: () => {
        calls++;
        throw new Error(`failure ${calls}`);
      },
    });
    const user = userHeadersAtTheLimit();
    await sendJson(harness.transport, 'orders', 'big-1', {}, user);
    await harness.until(1);
    expect(calls).toBe(4);
    const [copy] = await drain(harness.transport, 'error', harness.clock, 1);
    expect(copy!.headers[HEADER.failureAttempts]).toBe('4');
    expect(JSON.parse(copy!.headers[HEADER.history]!).map((r: { message: string }) => r.message)).toEqual(['failure 1', 'failure 2', 'failure 3', 'failure 4']);
    for (const [key, value] of Object.entries(user)) expect(copy!.headers[key]).toBe(value);
    await harness.close();
  });
});
