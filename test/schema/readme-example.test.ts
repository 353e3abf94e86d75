/** The README's "Typed messages" example, as written, on the memory transport. */
import { expect, expectTypeOf, it } from 'vitest';
import { z } from 'zod';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { Producer } from '../../src/producer/producer.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';

it('runs the README example', async () => {
  const clock = new FakeClock(Date.UTC(2026, 4, 1));
  const transport = new MemoryTransport({ clock });
  const seen: Date[] = [];

  const Order = z.object({
    orderId: z.string(),
    amount: z.number().positive(),
    placedAt: z.iso.datetime().transform((s) => new Date(s)),
    priority: z.enum(['normal', 'rush']).default('normal'),
  });

  const endpoint = new Endpoint({
    name: 'orders',
    transport,
    clock,
    schema: Order,
    handler: async (order) => {
      expectTypeOf(order).toEqualTypeOf<{ orderId: string; amount: number; placedAt: Date; priority: 'normal' | 'rush' }>();
      order.placedAt.getTime();
      seen.push(order.placedAt);
    },
  });
  await endpoint.start();

  const producer = new Producer({ transport, schema: Order, clock });
  await producer.send('orders', { orderId: 'A-1', amount: 42, placedAt: '2026-05-01T09:30:00Z' });
  await expect(producer.send('orders', { orderId: 'A-2', amount: -1, placedAt: 'soon' })).rejects.toThrow(
    'the body failed its schema (2 issues): amount: Too small: expected number to be >0; placedAt: Invalid ISO datetime',
  );

  await clock.runUntil(() => endpoint.stats.handled === 1);
  expect(seen).toEqual([new Date('2026-05-01T09:30:00Z')]);
  await endpoint.stop();
  await transport.close();
});
