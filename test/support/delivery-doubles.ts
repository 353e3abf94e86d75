import type { ConsumeOptions, Delivery, DeliveryListener, Headers, Subscription, Transport } from '../../src/transport/types.js';

/** A transport that hands out `inner`'s deliveries as `wrap` rewrites them (to make settlements fail). */
export function wrappingTransport(inner: Transport, wrap: (delivery: Delivery) => Delivery): Transport {
  return {
    name: inner.name,
    capabilities: inner.capabilities,
    send: (queue, message) => inner.send(queue, message),
    close: () => inner.close(),
    consume: (queue, listener, options) => inner.consume(queue, (d) => listener(wrap(d)), options),
  };
}

/** A delivery whose methods are those of `inner`, with some replaced. */
export function overrideDelivery(inner: Delivery, overrides: Partial<Pick<Delivery, 'ack' | 'retryLater' | 'deadLetter' | 'release'>>): Delivery {
  return {
    id: inner.id,
    queue: inner.queue,
    body: inner.body,
    headers: inner.headers,
    deliveryCount: inner.deliveryCount,
    ack: () => inner.ack(),
    retryLater: (ms, h) => inner.retryLater(ms, h),
    deadLetter: (q, h) => inner.deadLetter(q, h),
    release: () => inner.release(),
    ...overrides,
  };
}

/** What a {@link ScriptedDelivery} was settled with, if anything. */
export type Settlement = 'ack' | 'retryLater' | 'deadLetter' | 'release';

/** A delivery the test hands out itself, recording how it was settled. */
export interface ScriptedDelivery extends Delivery {
  readonly settledWith: Settlement | undefined;
  /** Makes `leaseExpired()` true from now on, as when the lease ran out while the delivery waited. */
  expireLease(): void;
}

/**
 * A transport double that hands out exactly the deliveries a test pushes,
 * however many are unsettled: what a broker does after a reconnection, when
 * the old channel's deliveries are still being handled.
 */
export class PushTransport implements Transport {
  readonly name = 'push';
  readonly capabilities = { nativeDelay: true, nativeDeliveryCount: true, atomicSettle: true };
  #listener: DeliveryListener | undefined;
  prefetch: number | undefined;
  paused = false;

  send(): Promise<void> {
    return Promise.resolve();
  }

  async consume(_queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription> {
    this.#listener = listener;
    this.prefetch = options.prefetch;
    return {
      pause: async () => {
        this.paused = true;
      },
      resume: async () => {
        this.paused = false;
      },
      setPrefetch: async (prefetch) => {
        this.prefetch = prefetch;
      },
      close: async () => undefined,
    };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Hands a JSON message with `id` to the consumer and returns its delivery. */
  push(id: string, body: unknown = {}, headers: Headers = {}): ScriptedDelivery {
    if (!this.#listener) throw new Error('nothing consumes yet');
    let settledWith: Settlement | undefined;
    let expired = false;
    const settle = (how: Settlement) => async () => {
      if (settledWith) throw new Error(`${id} already settled with ${settledWith}`);
      settledWith = how;
    };
    const delivery: ScriptedDelivery = {
      id,
      queue: 'push',
      body: new TextEncoder().encode(JSON.stringify(body)),
      headers,
      deliveryCount: 1,
      get settledWith() {
        return settledWith;
      },
      ack: settle('ack'),
      retryLater: settle('retryLater'),
      deadLetter: settle('deadLetter'),
      release: settle('release'),
      leaseExpired: () => expired,
      expireLease: () => {
        expired = true;
      },
    };
    this.#listener(delivery);
    return delivery;
  }
}
