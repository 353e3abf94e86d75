/**
 * Type-level tests: `tsc --noEmit` checks them (the project's type check
 * includes test/); vitest runs them as ordinary tests.
 */
import { describe, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { Producer } from '../../src/producer/producer.js';
import { bytesCodec, jsonCodec } from '../../src/codec.js';
import type { MessageContext } from '../../src/endpoint/context.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import type { ValidationError } from '../../src/schema/validate.js';
import type { SendFailedError } from '../../src/producer/errors.js';

const Order = z.object({
  id: z.string(),
  lines: z.array(z.object({ sku: z.string(), qty: z.number().int() })),
  placedAt: z.iso.datetime().transform((s) => new Date(s)),
  priority: z.enum(['low', 'high']).default('low'),
});

/** A schema written by hand, with no library: output `{ n: number }`. */
const handWritten: StandardSchemaV1<unknown, { n: number }> = {
  '~standard': {
    version: 1,
    vendor: 'hand',
    validate: (value) => (typeof (value as { n?: unknown })?.n === 'number' ? { value: value as { n: number } } : { issues: [{ message: 'n must be a number', path: ['n'] }] }),
  },
};

describe('schema types', () => {
  const transport = new MemoryTransport();

  it("an endpoint's handler receives the schema's output type, with no type argument", () => {
    const endpoint = new Endpoint({
      name: 'orders',
      transport,
      schema: Order,
      handler: (order, context) => {
        expectTypeOf(order).toEqualTypeOf<z.output<typeof Order>>();
        expectTypeOf(order.placedAt).toEqualTypeOf<Date>();
        expectTypeOf(order.priority).toEqualTypeOf<'low' | 'high'>();
        expectTypeOf(context).toEqualTypeOf<MessageContext>();
      },
    });
    expectTypeOf(endpoint).toEqualTypeOf<Endpoint<z.output<typeof Order>>>();
  });

  it('inference holds with an explicit codec, and with a hand-written schema', () => {
    new Endpoint({
      name: 'orders',
      transport,
      schema: Order,
      codec: jsonCodec,
      handler: (order) => {
        expectTypeOf(order.lines).toEqualTypeOf<{ sku: string; qty: number }[]>();
      },
    });
    const endpoint = new Endpoint({ name: 'n', transport, schema: handWritten, handler: (m) => {
      expectTypeOf(m).toEqualTypeOf<{ n: number }>();
    } });
    expectTypeOf(endpoint).toEqualTypeOf<Endpoint<{ n: number }>>();
  });

  it('without a schema the codec still types the handler', () => {
    new Endpoint({ name: 'raw', transport, codec: bytesCodec, handler: (body) => {
      expectTypeOf(body).toEqualTypeOf<Uint8Array>();
    } });
    new Endpoint({ name: 'plain', transport, handler: (body) => {
      expectTypeOf(body).toEqualTypeOf<unknown>();
    } });
  });

  it('a handler typed against the schema is refused', () => {
    new Endpoint({
      name: 'orders',
      transport,
      // @ts-expect-error: the schema's output has no `total`
      schema: Order,
      handler: (order: { total: number }) => void order,
    });
  });

  it("a producer's send takes the schema's input type", () => {
    const producer = new Producer({ transport, schema: Order });
    expectTypeOf(producer).toEqualTypeOf<Producer<z.input<typeof Order>>>();
    type Body = Parameters<typeof producer.send>[1];
    expectTypeOf<Body['placedAt']>().toEqualTypeOf<string>();
    expectTypeOf<Body['priority']>().toEqualTypeOf<'low' | 'high' | undefined>();
    // Calls that must not compile; never run.
    const refused = () => {
      // @ts-expect-error: `lines` is missing
      void producer.send('orders', { id: 'A-1', placedAt: '2026-01-01T00:00:00Z' });
      // @ts-expect-error: `qty` must be a number
      void producer.send('orders', { id: 'A-1', placedAt: '2026-01-01T00:00:00Z', lines: [{ sku: 'x', qty: '2' }] });
    };
    void refused;
  });

  it("sendInBackground's callback may receive a ValidationError", () => {
    const producer = new Producer({ transport, schema: Order });
    type Callback = NonNullable<Parameters<typeof producer.sendInBackground>[3]>;
    expectTypeOf<Parameters<Callback>[0]>().toEqualTypeOf<SendFailedError | ValidationError | undefined>();
  });
});
