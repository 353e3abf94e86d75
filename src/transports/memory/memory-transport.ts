import { systemClock, type Clock } from '../../time/clock.js';
import type {
  ConsumeOptions,
  Delivery,
  DeliveryListener,
  Headers,
  OutgoingMessage,
  Subscription,
  Transport,
  TransportCapabilities,
} from '../../transport/types.js';
import { MinHeap } from '../../util/min-heap.js';
import type { ErrorEntry, ErrorQueueOperations } from '../../transport/error-queue.js';
import { deleteEachByKey, sendBackEachByKey } from '../../operations/bulk.js';
import { pageSizeOf } from '../../operations/scan-page.js';
import type { QueueInspection } from '../../transport/inspection.js';
import { failureQueueOf, replayHeaders } from '../../headers/replay.js';
import { checkDestinationAllowed, noDestination, SendBackRefusedError } from '../../operations/send-back-destination.js';
import { checkDelay, MAX_HELD_DELAY_MS, sendDelay } from '../../transport/delay.js';

/** Options of {@link MemoryTransport}. */
export interface MemoryTransportOptions {
  /** Source of time for delays. Default the system clock; pass a FakeClock in tests. */
  clock?: Clock;
}

interface StoredMessage {
  /** Unique among all messages this transport holds. */
  key?: string;
  readonly id: string;
  readonly body: Uint8Array;
  readonly headers: Headers;
  deliveries: number;
}

interface DelayedMessage {
  readonly queue: string;
  readonly dueAt: number;
  readonly seq: number;
  readonly message: StoredMessage;
}

/** A settlement was asked of a delivery that is already settled. */
export class AlreadySettledError extends Error {
  override readonly name = 'AlreadySettledError';
  /** The delivery can no longer be settled; the broker delivers the message again (see `isDeliveryGone`). */
  readonly deliveryGone = true as const;
}

/**
 * An in-process transport for tests and examples, with the same semantics as
 * the durable ones: delays wait in one time-ordered heap driven by the
 * injected clock (one wake-up for the earliest due time, no timer per
 * message). A delayed send waits in the same heap. Nothing survives the
 * process.
 */
export class MemoryTransport implements Transport {
  readonly name = 'memory';
  readonly capabilities: TransportCapabilities = { nativeDelay: true, nativeDeliveryCount: true, atomicSettle: true };
  /** Delays are timed by the clock, whose timers hold at most 2^31-1 ms. */
  readonly limits = Object.freeze({ maxDelayMs: MAX_HELD_DELAY_MS });
  readonly #clock: Clock;
  readonly #ready = new Map<string, StoredMessage[]>();
  readonly #delayed = new MinHeap<DelayedMessage>((a, b) => a.dueAt < b.dueAt || (a.dueAt === b.dueAt && a.seq < b.seq));
  readonly #subscriptions = new Map<string, Set<MemorySubscription>>();
  readonly #errorQueues = new Set<string>();
  #seq = 0;
  #wake: { dueAt: number; abort: AbortController } | undefined;
  #closed = false;

  constructor(options: MemoryTransportOptions = {}) {
    this.#clock = options.clock ?? systemClock;
  }

  /** Messages ready on `queue` now (not counting delayed or held ones). */
  depth(queue: string): number {
    return this.#ready.get(queue)?.length ?? 0;
  }

  /** Messages waiting for a delay on any queue. */
  get delayedCount(): number {
    return this.#delayed.size;
  }

  /**
   * Browse, replay and delete what waits in an error queue. A send-back goes
   * only to a queue that exists: one this transport has sent to or consumed.
   */
  readonly errorQueue: ErrorQueueOperations = {
    count: async (queue) => this.#existing(queue).length,
    browse: async (queue, { offset = 0, limit = 100 } = {}) =>
      this.#existing(queue)
        .slice(offset, offset + limit)
        .map((m) => this.#entry(queue, m)),
    scan: (queue, options = {}) => this.#scan(queue, pageSizeOf(options.pageSize)),
    sendBackEach: (queue, options) => sendBackEachByKey(this.errorQueue, queue, options),
    deleteEach: (queue, options) => deleteEachByKey(this.errorQueue, queue, options),
    get: async (queue, key) => {
      const found = this.#existing(queue).find((m) => m.key === key);
      return found && this.#entry(queue, found);
    },
    sendBack: async (queue, key, options = {}) => {
      const list = this.#existing(queue);
      const index = list.findIndex((m) => m.key === key);
      if (index < 0) return undefined;
      const message = list[index]!;
      const target = options.queue ?? failureQueueOf(message.headers);
      if (!target) throw noDestination(message.id);
      checkDestinationAllowed(target, queue, message.id, options.allowedQueues);
      if (this.#errorQueues.has(target)) throw new SendBackRefusedError(target, 'error-queue', message.id);
      if (!this.#ready.has(target) && !this.#subscriptions.has(target)) throw new SendBackRefusedError(target, 'missing', message.id);
      list.splice(index, 1);
      this.#enqueue(target, { id: message.id, body: message.body, headers: replayHeaders(message.headers, new Date(this.#clock.now())), deliveries: 0 });
      return target;
    },
    delete: async (queue, key) => {
      const list = this.#existing(queue);
      const index = list.findIndex((m) => m.key === key);
      if (index >= 0) list.splice(index, 1);
      return index >= 0;
    },
    purge: async (queue) => {
      const list = this.#existing(queue);
      const count = list.length;
      list.length = 0;
      return count;
    },
  };

  /** Queue depths; a queue that received dead-lettered messages counts as an error queue. */
  readonly inspection: QueueInspection = {
    queueDepths: async (queues) => {
      const names = queues ?? [...new Set([...this.#ready.keys(), ...this.#subscriptions.keys()])].sort();
      const delayed = new Map<string, number>();
      for (const item of this.#delayed.items()) delayed.set(item.queue, (delayed.get(item.queue) ?? 0) + 1);
      return names.map((queue) => ({
        queue,
        kind: this.#errorQueues.has(queue) ? 'error' : 'work',
        ready: this.#ready.get(queue)?.length ?? 0,
        delayed: delayed.get(queue) ?? 0,
        inFlight: [...(this.#subscriptions.get(queue) ?? [])].reduce((n, sub) => n + sub.unsettled, 0),
      }));
    },
    queueKinds: async (queues) =>
      new Map(queues.map((queue) => [queue, this.#errorQueues.has(queue) ? 'error' : this.#ready.has(queue) || this.#subscriptions.has(queue) ? 'work' : 'missing'])),
  };

  /** The entries the queue holds when the scan begins, oldest first, a page at a time; one removed meanwhile is left out. */
  async *#scan(queue: string, pageSize: number): AsyncGenerator<ErrorEntry[]> {
    const snapshot = [...this.#existing(queue)];
    const list = this.#existing(queue);
    for (let start = 0; start < snapshot.length; start += pageSize) {
      const held = new Set(list);
      const page = snapshot.slice(start, start + pageSize).filter((m) => held.has(m));
      if (page.length > 0) yield page.map((m) => this.#entry(queue, m));
    }
  }

  #entry(queue: string, message: StoredMessage): ErrorEntry {
    return { key: message.key!, messageId: message.id, errorQueue: queue, body: message.body, headers: { ...message.headers } };
  }

  async send(queue: string, message: OutgoingMessage): Promise<void> {
    this.#assertOpen();
    const delayMs = sendDelay('send', message.delayMs, MAX_HELD_DELAY_MS);
    const stored = { id: message.id, body: message.body, headers: { ...message.headers }, deliveries: 0 };
    if (delayMs > 0) this.#schedule(queue, stored, delayMs);
    else this.#enqueue(queue, stored);
  }

  async consume(queue: string, listener: DeliveryListener, options: ConsumeOptions): Promise<Subscription> {
    this.#assertOpen();
    const sub = new MemorySubscription(this, queue, listener, options.prefetch);
    let set = this.#subscriptions.get(queue);
    if (!set) this.#subscriptions.set(queue, (set = new Set()));
    set.add(sub);
    queueMicrotask(() => this.dispatch(queue));
    return sub;
  }

  async close(): Promise<void> {
    for (const set of this.#subscriptions.values()) for (const sub of set) await sub.close();
    this.#wake?.abort.abort();
    this.#closed = true;
  }

  /** @internal */
  unsubscribe(sub: MemorySubscription): void {
    this.#subscriptions.get(sub.queue)?.delete(sub);
  }

  /** @internal Hands ready messages of `queue` to subscriptions with room. */
  dispatch(queue: string): void {
    const ready = this.#ready.get(queue);
    const subs = this.#subscriptions.get(queue);
    if (!ready || !subs) return;
    let progress = true;
    while (ready.length > 0 && progress) {
      progress = false;
      for (const sub of subs) {
        if (ready.length === 0) break;
        if (!sub.hasRoom()) continue;
        const message = ready.shift()!;
        message.deliveries++;
        sub.deliver(this.#delivery(queue, message, sub));
        progress = true;
      }
    }
  }

  #delivery(queue: string, message: StoredMessage, sub: MemorySubscription): Delivery {
    let settled = false;
    const settle = (action: () => void) => {
      if (settled) return Promise.reject(new AlreadySettledError(`message ${message.id} is already settled`));
      settled = true;
      action();
      sub.settled();
      return Promise.resolve();
    };
    return {
      id: message.id,
      queue,
      body: message.body,
      headers: message.headers,
      deliveryCount: message.deliveries,
      ack: () => settle(() => undefined),
      retryLater: (delayMs, headers) => {
        let ms: number;
        try {
          ms = checkDelay('retryLater: delayMs', delayMs, MAX_HELD_DELAY_MS);
        } catch (error) {
          return Promise.reject(error);
        }
        return settle(() => this.#schedule(queue, { id: message.id, body: message.body, headers: { ...headers }, deliveries: 0 }, ms));
      },
      deadLetter: (errorQueue, headers) =>
        settle(() => {
          this.#errorQueues.add(errorQueue);
          this.#enqueue(errorQueue, { id: message.id, body: message.body, headers: { ...headers }, deliveries: 0 });
        }),
      release: () =>
        settle(() => {
          this.#readyQueue(queue).unshift(message);
          queueMicrotask(() => this.dispatch(queue));
        }),
    };
  }

  #enqueue(queue: string, message: StoredMessage): void {
    message.key ??= String(++this.#seq);
    this.#readyQueue(queue).push(message);
    queueMicrotask(() => this.dispatch(queue));
  }

  /** The ready messages of `queue`, without making the queue exist. */
  #existing(queue: string): StoredMessage[] {
    return this.#ready.get(queue) ?? [];
  }

  #readyQueue(queue: string): StoredMessage[] {
    let ready = this.#ready.get(queue);
    if (!ready) this.#ready.set(queue, (ready = []));
    return ready;
  }

  #schedule(queue: string, message: StoredMessage, delayMs: number): void {
    this.#delayed.push({ queue, dueAt: this.#clock.now() + delayMs, seq: this.#seq++, message });
    this.#armWake();
  }

  /** Keeps exactly one wake-up, for the earliest due time. */
  #armWake(): void {
    const next = this.#delayed.peek();
    if (!next || this.#closed) return;
    if (this.#wake && this.#wake.dueAt <= next.dueAt) return;
    this.#wake?.abort.abort();
    const wake = { dueAt: next.dueAt, abort: new AbortController() };
    this.#wake = wake;
    const wait = Math.max(0, next.dueAt - this.#clock.now());
    this.#clock.sleep(wait, wake.abort.signal).then(
      () => {
        if (this.#wake === wake) this.#wake = undefined;
        this.#releaseDue();
      },
      () => undefined,
    );
  }

  #releaseDue(): void {
    const now = this.#clock.now();
    const touched = new Set<string>();
    for (let next = this.#delayed.peek(); next && next.dueAt <= now; next = this.#delayed.peek()) {
      this.#delayed.pop();
      next.message.key ??= String(++this.#seq);
      this.#readyQueue(next.queue).push(next.message);
      touched.add(next.queue);
    }
    for (const queue of touched) this.dispatch(queue);
    this.#armWake();
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('the memory transport is closed');
  }
}

class MemorySubscription implements Subscription {
  #unsettled = 0;
  #paused = false;
  #closed = false;

  constructor(
    private readonly transport: MemoryTransport,
    readonly queue: string,
    private readonly listener: DeliveryListener,
    private prefetch: number,
  ) {}

  get unsettled(): number {
    return this.#unsettled;
  }

  hasRoom(): boolean {
    return !this.#paused && !this.#closed && this.#unsettled < this.prefetch;
  }

  deliver(delivery: Delivery): void {
    this.#unsettled++;
    this.listener(delivery);
  }

  settled(): void {
    this.#unsettled--;
    queueMicrotask(() => this.transport.dispatch(this.queue));
  }

  async pause(): Promise<void> {
    this.#paused = true;
  }

  async resume(): Promise<void> {
    this.#paused = false;
    this.transport.dispatch(this.queue);
  }

  async setPrefetch(prefetch: number): Promise<void> {
    this.prefetch = prefetch;
    this.transport.dispatch(this.queue);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.transport.unsubscribe(this);
  }
}
