import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { Producer } from '../../src/producer/producer.js';
import { OptionError } from '../../src/util/option-checks.js';
import { ValidationError } from '../../src/schema/validate.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import type { OutgoingMessage } from '../../src/transport/types.js';
import type { Logger } from '../../src/logger.js';

/** A memory transport that records what reaches it. */
class RecordingTransport extends MemoryTransport {
  readonly sent: { queue: string; body: unknown }[] = [];
  override async send(queue: string, message: OutgoingMessage): Promise<void> {
    this.sent.push({ queue, body: JSON.parse(new TextDecoder().decode(message.body)) });
    return super.send(queue, message);
  }
}

const Order = z.object({
  id: z.string(),
  qty: z.number().int().positive(),
  placedAt: z.iso.datetime().transform((s) => new Date(s)),
  priority: z.enum(['low', 'high']).default('low'),
});

function errorLog(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, info: () => undefined, warn: () => undefined, error: (_f, message) => void lines.push(message) };
}

/** The promise's rejection, failing the test if it resolves. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => expect.unreachable('expected a rejection'),
    (error: unknown) => error,
  );
}

describe('producer with a schema', () => {
  it('sends a valid body as given, for the consumer to parse', async () => {
    const transport = new RecordingTransport();
    const producer = new Producer({ transport, schema: Order });
    await producer.send('orders', { id: 'A-1', qty: 2, placedAt: '2026-01-01T09:30:00Z' });
    expect(transport.sent).toEqual([{ queue: 'orders', body: { id: 'A-1', qty: 2, placedAt: '2026-01-01T09:30:00Z' } }]);
  });

  it('refuses an invalid body with a ValidationError listing paths and messages; nothing is sent', async () => {
    const transport = new RecordingTransport();
    const producer = new Producer({ transport, schema: Order });
    const error = await rejectionOf(producer.send('orders', { id: 'A-1', qty: -1, placedAt: 'soon', priority: 'urgent' as 'low' }));
    expect(error).toBeInstanceOf(ValidationError);
    const { issues, message } = error as ValidationError;
    expect(issues.map((i) => i.path)).toEqual([['qty'], ['placedAt'], ['priority']]);
    expect(message).toMatch(/^the body failed its schema \(3 issues\): qty: .+; placedAt: .+; priority: .+$/);
    expect(transport.sent).toEqual([]);
    expect(producer.stats).toEqual({ sent: 0, retries: 0, throttled: 0, unavailable: 0, failed: 0 });
  });

  it('waits for an asynchronous validator', async () => {
    const transport = new RecordingTransport();
    const taken = new Set(['A-1']);
    const producer = new Producer({ transport, schema: z.object({ id: z.string().refine(async (id) => !taken.has(id), { message: 'id taken' }) }) });
    await producer.send('orders', { id: 'B-2' });
    const error = (await rejectionOf(producer.send('orders', { id: 'A-1' }))) as ValidationError;
    expect(error.issues).toEqual([{ path: ['id'], message: 'id taken' }]);
    expect(transport.sent.map((s) => s.body)).toEqual([{ id: 'B-2' }]);
  });

  it("a validator that throws rejects the send with its error; nothing is sent", async () => {
    const transport = new RecordingTransport();
    const exploding: StandardSchemaV1<{ n: number }> = {
      '~standard': {
        version: 1,
        vendor: 'hand-written',
        validate: () => {
          throw new RangeError('validator exploded');
        },
      },
    };
    const producer = new Producer({ transport, schema: exploding });
    await expect(producer.send('orders', { n: 1 })).rejects.toThrow(new RangeError('validator exploded'));
    expect(() => producer.sendInBackground('orders', { n: 1 })).toThrow('validator exploded');
    expect(transport.sent).toEqual([]);
  });

  it('works with a hand-written Standard Schema', async () => {
    const transport = new RecordingTransport();
    const positive: StandardSchemaV1<number> = {
      '~standard': {
        version: 1,
        vendor: 'hand-written',
        validate: (value) => (typeof value === 'number' && value > 0 ? { value } : { issues: [{ message: 'must be a positive number' }] }),
      },
    };
    const producer = new Producer({ transport, schema: positive });
    await producer.send('numbers', 5);
    await expect(producer.send('numbers', -5)).rejects.toThrow('the body failed its schema (1 issue): (body): must be a positive number');
    expect(transport.sent.map((s) => s.body)).toEqual([5]);
  });

  it('sendInBackground throws at once for a schema that answers at once', async () => {
    const transport = new RecordingTransport();
    const producer = new Producer({ transport, schema: Order });
    expect(() => producer.sendInBackground('orders', { id: 'A-1', qty: 0, placedAt: '2026-01-01T09:30:00Z' })).toThrow(ValidationError);
    const outcomes: unknown[] = [];
    const id = producer.sendInBackground('orders', { id: 'A-2', qty: 1, placedAt: '2026-01-01T09:30:00Z' }, { id: 'bg-ok' }, (error, sentId) => outcomes.push([sentId, error]));
    expect(id).toBe('bg-ok');
    await expect.poll(() => outcomes).toEqual([['bg-ok', undefined]]);
    expect(transport.sent.map((s) => (s.body as { id: string }).id)).toEqual(['A-2']);
  });

  it('sendInBackground with an asynchronous schema reports a refusal to the callback and the log', async () => {
    const transport = new RecordingTransport();
    const logger = errorLog();
    const rejecting: StandardSchemaV1<{ id: string }> = {
      '~standard': {
        version: 1,
        vendor: 'hand-written',
        validate: (value) => ((value as { id: string }).id === 'boom' ? Promise.reject(new Error('lookup failed')) : Promise.resolve({ value: value as { id: string } })),
      },
    };
    const Async = z.object({ id: z.string().refine(async (id) => id !== 'A-1', { message: 'id taken' }) });
    const outcomes: [string, unknown][] = [];
    const record = (error: unknown, id: string) => void outcomes.push([id, error]);
    const zodProducer = new Producer({ transport, schema: Async, logger });
    zodProducer.sendInBackground('orders', { id: 'A-1' }, { id: 'taken' }, record);
    zodProducer.sendInBackground('orders', { id: 'B-1' }, { id: 'fine' }, record);
    new Producer({ transport, schema: rejecting, logger }).sendInBackground('orders', { id: 'boom' }, { id: 'boom' }, record);
    await expect.poll(() => outcomes.length).toBe(3);
    const byId = Object.fromEntries(outcomes);
    expect(byId['fine']).toBeUndefined();
    expect((byId['taken'] as ValidationError).issues).toEqual([{ path: ['id'], message: 'id taken' }]);
    const failed = byId['boom'] as ValidationError;
    expect(failed).toBeInstanceOf(ValidationError);
    expect(failed.message).toBe('the body failed its schema (1 issue): (body): the validator failed: Error: lookup failed');
    expect((failed.cause as Error).message).toBe('lookup failed');
    expect(transport.sent.map((s) => s.body)).toEqual([{ id: 'B-1' }]);
    expect(logger.lines.sort()).toEqual([
      "Message 'boom' to 'orders' was not sent: the body failed its schema (1 issue): (body): the validator failed: Error: lookup failed",
      "Message 'taken' to 'orders' was not sent: the body failed its schema (1 issue): id: id taken",
    ]);
  });

  it('refuses a schema that is not a Standard Schema', () => {
    const transport = new MemoryTransport();
    expect(() => new Producer({ transport, schema: { parse: () => 1 } as unknown as StandardSchemaV1 })).toThrow(OptionError);
    expect(() => new Producer({ transport, schema: { parse: () => 1 } as unknown as StandardSchemaV1 })).toThrow(/schema must be a Standard Schema/);
  });
});
