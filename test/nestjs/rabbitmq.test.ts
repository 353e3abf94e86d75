/**
 * RedeliverModule with two transports in one Nest application: a handler on
 * RabbitMQ (the shared loopback broker, queues and delay topology of the
 * test's own) retries with a nesbus schedule held by the broker, then
 * forwards through the injected default producer to a handler on SQLite.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Inject, Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { afterAll, describe, expect, it } from 'vitest';
import { Producer } from '../../src/producer/producer.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { Handle, InjectProducer, nesbusRetry, RedeliverEndpoints, RedeliverModule } from '../../src/nestjs/index.js';
import { rabbitSkipReason } from '../support/brokers.js';
import { rabbitScratch } from '../support/rabbit-scratch.js';
import { until } from '../support/own-servers.js';

const skip = await rabbitSkipReason();
const dir = mkdtempSync(join(tmpdir(), 'redeliver-nest-rabbit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Polls `predicate` every 10 ms until it holds, failing after `timeoutMs`. */
function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  return until(what, timeoutMs, predicate, 10);
}

describe.skipIf(skip)('RedeliverModule on RabbitMQ and SQLite', () => {
  it('retries on the broker with a nesbus schedule, then forwards to a handler on the other transport', async () => {
    const scratch = rabbitScratch('nest');
    const rabbit = scratch.open();
    const sqlite = new SqliteTransport({ path: join(dir, 'default.db') });
    const orders = scratch.queueName('orders');
    const errors = scratch.queueName('error');
    const shipping = `shipping-${scratch.prefix}`;

    @Injectable()
    class Warehouse {
      attempts = 0;
      readonly shipped: string[] = [];
    }

    @Injectable()
    class Handlers {
      constructor(
        @Inject(Warehouse) private readonly warehouse: Warehouse,
        @Inject(Producer) private readonly producer: Producer<{ id: string }>,
      ) {}

      @Handle<{ id: string }>(orders, {
        transport: 'rabbit',
        recoverability: { ...nesbusRetry({ retryCount: 2, delay: 20, delayType: 'linear', factor: 1, distortFactor: 0 }), errorQueue: errors },
      })
      async order(order: { id: string }): Promise<void> {
        if (++this.warehouse.attempts < 3) throw new Error('stock service unavailable');
        await this.producer.send(shipping, order);
      }

      @Handle<{ id: string }>(shipping)
      ship(order: { id: string }): void {
        this.warehouse.shipped.push(order.id);
      }
    }

    @Injectable()
    class Shop {
      constructor(@InjectProducer('rabbit') readonly producer: Producer<{ id: string }>) {}
    }

    @Module({
      imports: [RedeliverModule.forRoot({ transport: sqlite, transports: { rabbit }, closeTransports: false })],
      providers: [Warehouse, Handlers, Shop],
    })
    class AppModule {}

    const app = await Test.createTestingModule({ imports: [AppModule] }).compile();
    try {
      await app.init();
      await app.get(Shop).producer.send(orders, { id: 'o-7' });
      const warehouse = app.get(Warehouse);
      const [onRabbit, onSqlite] = app.get(RedeliverEndpoints).endpoints;
      await waitFor(() => onRabbit!.endpoint.stats.handled === 1 && onSqlite!.endpoint.stats.handled === 1, 15_000, 'the order to be handled and shipped');
      expect(warehouse.shipped).toEqual(['o-7']);
      expect(warehouse.attempts).toBe(3);
      expect(onRabbit!.transport).toBe('rabbit');
      expect(onRabbit!.endpoint.stats).toMatchObject({ handled: 1, immediateRetries: 0, delayedRetries: 2, deadLettered: 0 });
      expect(onSqlite!.endpoint.stats).toMatchObject({ handled: 1 });
    } finally {
      await app.close();
      await sqlite.close();
      await scratch.cleanup();
    }
  });
});
