import { EventEmitter, once } from 'node:events';
import { Inject, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Producer } from 'redeliver';
import { Handle, RedeliverModule, nesbusRetry } from 'redeliver/nestjs';
import { SqliteTransport } from 'redeliver/sqlite';

interface Order {
  id: string;
  sku: string;
}

@Injectable()
class Inventory extends EventEmitter {
  reserve(order: Order): void {
    console.log(`reserved ${order.sku} for order ${order.id}`);
    this.emit('reserved', order);
  }
}

@Injectable()
class OrderHandlers {
  constructor(@Inject(Inventory) private readonly inventory: Inventory) {}

  // Throwing retries 3 times, no sooner than 1, 2 and 3 s later (± 10 %), then moves the order to the error queue.
  @Handle<Order>('orders', { recoverability: nesbusRetry({ retryCount: 3, factor: 1, delayType: 'linear' }) })
  placed(order: Order): void {
    this.inventory.reserve(order);
  }
}

@Module({
  imports: [RedeliverModule.forRoot({ transport: new SqliteTransport({ path: 'orders.db' }) })],
  providers: [Inventory, OrderHandlers],
})
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
app.enableShutdownHooks();
const reserved = once(app.get(Inventory), 'reserved');
await app.get(Producer).send('orders', { id: 'o-1', sku: 'book-42' });
await reserved;
await app.close();
