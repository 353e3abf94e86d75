/**
 * RedeliverModule in a real Nest application (Test.createTestingModule,
 * init, close) on SQLite files with a fake clock: @Handle methods with
 * injected dependencies receive messages, failures go through immediate and
 * delayed retries to the error queue, the injected producer sends, shutdown
 * lets a running handler finish, transports are closed only when the module
 * owns them, forRootAsync, and the start-up errors.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Inject, Injectable, Module, Scope } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { Producer } from '../../src/producer/producer.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';
import type { Transport } from '../../src/transport/types.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { Handle, InjectProducer, InjectTransport, nesbusRetry, RedeliverEndpoints, RedeliverModule } from '../../src/nestjs/index.js';
import { drain } from '../support/engine-harness.js';

const dir = mkdtempSync(join(tmpdir(), 'redeliver-nest-'));
let files = 0;
const open: TestingModule[] = [];
afterEach(async () => {
  for (const app of open.splice(0)) await app.close().catch(() => undefined);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Order {
  id: string;
  sku: string;
}

/** A service the handlers depend on, injected by Nest. */
@Injectable()
class Ledger {
  readonly placed: Order[] = [];
  charges = 0;
  record(order: Order): void {
    this.placed.push(order);
  }
}

/** Sends through the injected producer. */
@Injectable()
class Checkout {
  constructor(@InjectProducer() private readonly producer: Producer<Order>) {}
  place(order: Order): Promise<string> {
    return this.producer.send('orders', order);
  }
}

@Injectable()
class OrderHandlers {
  constructor(@Inject(Ledger) private readonly ledger: Ledger) {}

  @Handle<Order>('orders')
  placed(order: Order): void {
    this.ledger.record(order);
  }

  @Handle<Order>('payments', { recoverability: { ...nesbusRetry({ retryCount: 2, delay: 1_000, delayType: 'linear', factor: 1 }), immediateRetries: 1 } })
  charge(): void {
    this.ledger.charges++;
    throw new Error('card declined');
  }
}

/** The decorator checks the method against the message type (checked by tsc, not run). */
export class TypedHandlers {
  // @ts-expect-error a handler of orders cannot take a number
  @Handle<Order>('typed')
  wrong(count: number): number {
    return count;
  }
}

function sqlite(clock: FakeClock): SqliteTransport {
  return new SqliteTransport({ path: join(dir, `nest-${++files}.db`), clock });
}

async function boot(imports: unknown[], providers: unknown[] = [Ledger, Checkout, OrderHandlers]): Promise<TestingModule> {
  @Module({ imports: imports as never[], providers: providers as never[] })
  class AppModule {}
  const app = await Test.createTestingModule({ imports: [AppModule] }).compile();
  open.push(app);
  await app.init();
  return app;
}

function endpointOf(app: TestingModule, queue: string) {
  const found = app.get(RedeliverEndpoints).endpoints.find((e) => e.endpoint.config.queue === queue);
  if (!found) throw new Error(`no endpoint for ${queue}`);
  return found.endpoint;
}

describe('RedeliverModule on SQLite', () => {
  it('runs a @Handle method with its injected service on messages sent by the injected producer', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = sqlite(clock);
    const app = await boot([RedeliverModule.forRoot({ transport, endpointDefaults: { clock }, producer: { clock } })]);
    expect(app.get(RedeliverEndpoints).endpoints.map((e) => [e.method, e.endpoint.config.queue, e.transport])).toEqual([
      ['OrderHandlers.placed', 'orders', undefined],
      ['OrderHandlers.charge', 'payments', undefined],
    ]);
    expect(app.get(Producer)).toBeInstanceOf(Producer);
    const id = await app.get(Checkout).place({ id: 'o-1', sku: 'book' });
    const ledger = app.get(Ledger);
    const orders = endpointOf(app, 'orders');
    expect(await clock.runUntil(() => orders.stats.handled === 1, 60_000)).toBe(true);
    expect(ledger.placed).toEqual([{ id: 'o-1', sku: 'book' }]);
    expect(typeof id).toBe('string');
  });

  it('sends a failing message through immediate and delayed retries to the error queue', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = sqlite(clock);
    const app = await boot([RedeliverModule.forRoot({ transport, endpointDefaults: { clock, random: seededRandom(3) }, producer: { clock }, closeTransports: false })]);
    await app.get(Producer).send('payments', { id: 'o-2', sku: 'pen' });
    const payments = endpointOf(app, 'payments');
    expect(await clock.runUntil(() => payments.stats.deadLettered === 1)).toBe(true);
    // (immediate + 1) × (delayed + 1) attempts: (1 + 1) × (2 + 1).
    expect(app.get(Ledger).charges).toBe(6);
    expect(payments.stats).toMatchObject({ immediateRetries: 2 * 1 + 1, delayedRetries: 2, deadLettered: 1 });
    await app.close();
    const [failed] = await drain(transport, 'error', clock, 1);
    expect(failed!.headers[HEADER.failureMessage]).toBe('card declined');
    expect(failed!.headers[HEADER.failureEndpoint]).toBe('payments');
    expect(failed!.headers[HEADER.failureDelayedAttempts]).toBe('2');
    await transport.close();
  });

  it('lets a running handler finish on shutdown, then closes the transport it owns', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = sqlite(clock);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const events: string[] = [];

    @Injectable()
    class Slow {
      @Handle('slow')
      async work(): Promise<void> {
        events.push('started');
        await gate;
        events.push('finished');
      }
    }

    const app = await boot([RedeliverModule.forRoot({ transport, endpointDefaults: { clock }, producer: { clock } })], [Slow]);
    await app.get(Producer).send('slow', { n: 1 });
    expect(await clock.runUntil(() => events.length === 1, 60_000)).toBe(true);
    const endpoint = endpointOf(app, 'slow');
    const closing = app.close().then(() => events.push('closed'));
    await new Promise((r) => setImmediate(r));
    expect(endpoint.running).toBe(false);
    expect(events).toEqual(['started']);
    release();
    await closing;
    expect(events).toEqual(['started', 'finished', 'closed']);
    expect(endpoint.stats).toMatchObject({ handled: 1, inFlight: 0 });
    await expect(transport.send('slow', { id: 'after', body: new Uint8Array(), headers: {} })).rejects.toThrow();
  });

  it('leaves transports open with closeTransports: false', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const transport = sqlite(clock);
    const app = await boot([RedeliverModule.forRoot({ transport, endpointDefaults: { clock }, producer: { clock }, closeTransports: false })]);
    await app.close();
    await transport.send('orders', { id: 'kept', body: new TextEncoder().encode('{}'), headers: {} });
    expect((await drain(transport, 'orders', clock, 1)).map((d) => d.id)).toEqual(['kept']);
    await transport.close();
  });

  it('forRootAsync: options from a factory with injected config, named transports injectable', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    const main = sqlite(clock);
    const audit = sqlite(clock);
    const CONFIG = 'config';

    @Module({ providers: [{ provide: CONFIG, useValue: { main, audit } }], exports: [CONFIG] })
    class ConfigModule {}

    @Injectable()
    class Auditor {
      readonly seen: unknown[] = [];
      constructor(
        @InjectProducer('audit') readonly producer: Producer,
        @InjectTransport('audit') readonly transport: Transport,
      ) {}
      @Handle('events', { transport: 'audit', name: 'audit-events' })
      event(body: unknown): void {
        this.seen.push(body);
      }
    }

    const app = await boot(
      [
        RedeliverModule.forRootAsync({
          imports: [ConfigModule],
          inject: [CONFIG],
          useFactory: async (config: { main: Transport; audit: Transport }) => ({
            transport: config.main,
            transports: { audit: config.audit },
            endpointDefaults: { clock },
            producer: { clock },
          }),
          transportNames: ['audit'],
        }),
      ],
      [Auditor],
    );
    const auditor = app.get(Auditor);
    expect(auditor.transport).toBe(audit);
    await auditor.producer.send('events', { kind: 'login' });
    expect(await clock.runUntil(() => endpointOf(app, 'events').stats.handled === 1, 60_000)).toBe(true);
    expect(auditor.seen).toEqual([{ kind: 'login' }]);
    expect(endpointOf(app, 'events').config.name).toBe('audit-events');
    expect(endpointOf(app, 'events').config.transport).toBe(audit);
  });

  it('fails the bootstrap on a transport name the module lacks, a request-scoped handler, or two handlers of one queue', async () => {
    const clock = new FakeClock(Date.UTC(2026, 0, 1));
    @Injectable()
    class Lost {
      @Handle('lost', { transport: 'nowhere' })
      lost(): void {}
    }
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Handle('per-request')
      handle(): void {}
    }
    @Injectable()
    class Twice {
      @Handle('same')
      a(): void {}
      @Handle('same')
      b(): void {}
    }
    const options = () => RedeliverModule.forRoot({ transport: sqlite(clock), endpointDefaults: { clock } });
    await expect(boot([options()], [Lost])).rejects.toThrow(/Lost\.lost names transport 'nowhere'.*named transports: none/);
    await expect(boot([options()], [PerRequest])).rejects.toThrow(/PerRequest has @Handle methods but is request-scoped/);
    await expect(boot([options()], [Twice])).rejects.toThrow(/Twice\.b and Twice\.a both handle queue 'same'/);
    expect(() => RedeliverModule.forRoot({ transport: {} as Transport })).toThrow(/transport must be a Transport/);
  });
});
