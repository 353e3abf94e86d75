/**
 * The bare side of `npm run bench -- rocketmq`: Apache's
 * `rocketmq-client-nodejs` alone. A `SimpleConsumer` loop that receives and
 * acks each message, nothing else; and timed messages sent with a
 * `deliveryTimestamp`, to read the broker's own timer lateness.
 */
import { Producer, SimpleConsumer, type MessageView } from 'rocketmq-client-nodejs';
import { AckBatch } from '../../src/transports/rocketmq/acks.js';
import { countdown, within, summariseLateness, type LatenessSummary } from '../redis/workload.js';
import type { Throughput } from '../jetstream/workload.js';

/** What the bare side is given. */
export interface RawSetup {
  /** The gRPC proxy, `host:port`. */
  readonly endpoints: string;
  /** A MIXED topic the caller made, read by {@link group}. */
  readonly topic: string;
  readonly group: string;
  /** Messages received and not yet acked at most: receive loops of up to 32 messages each. */
  readonly prefetch: number;
  /** The invisible duration of each receive. */
  readonly invisibleMs: number;
  /** `single`: `SimpleConsumer.ack`, one request a message; `batched`: the acks of a turn in one request, as the transport sends them. Default `single`. */
  readonly acks?: 'single' | 'batched';
  readonly timeoutMs: number;
}

/** The most one `receive` asks for. */
export const RECEIVE_BATCH = 32;
/** Sends in flight at once while a topic is loaded. */
const SEND_WINDOW = 200;

/** The client's log lines: errors only, to stderr. */
const quietLogger = {
  info: () => undefined,
  debug: () => undefined,
  trace: () => undefined,
  warn: () => undefined,
  error: (...args: unknown[]) => console.error('rocketmq-client:', ...args),
};

const clientOptions = (endpoints: string) => ({ endpoints, namespace: '', logger: quietLogger as never, requestTimeout: 10_000 });

/** A started producer for `topic`, one attempt per send; shut down once `fn` is done. */
export async function withProducer<T>(endpoints: string, topic: string, fn: (producer: Producer) => Promise<T>): Promise<T> {
  const producer = new Producer({ ...clientOptions(endpoints), topic, maxAttempts: 1 });
  await producer.startup();
  try {
    return await fn(producer);
  } finally {
    await producer.shutdown();
  }
}

/** Sends `n` messages to `topic`, {@link SEND_WINDOW} in flight at once. */
export async function load(producer: Producer, topic: string, n: number, body: (i: number) => Buffer): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < n; i = next++) await producer.send({ topic, body: body(i) });
  };
  await Promise.all(Array.from({ length: Math.min(SEND_WINDOW, n) }, lane));
}

/**
 * Loads `n` messages into the topic, then receives them with
 * `ceil(prefetch / 32)` receive loops, acking each message as it comes
 * without waiting for the ack before the next receive; at most `prefetch`
 * messages are received and not yet acked. Timed from the consumer's start
 * (as the redeliver side's is) to the last ack confirmed.
 */
export async function rawThroughput(setup: RawSetup, n: number, body: (i: number) => Buffer): Promise<Throughput> {
  await withProducer(setup.endpoints, setup.topic, (producer) => load(producer, setup.topic, n, body));
  const consumer = new SimpleConsumer({
    ...clientOptions(setup.endpoints),
    consumerGroup: setup.group,
    subscriptions: new Map([[setup.topic, '*']]),
    awaitDuration: 2_000,
  });
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  await consumer.startup();
  const acked = countdown(n);
  let fail!: (error: unknown) => void;
  const failed = new Promise<never>((_, reject) => (fail = reject));
  failed.catch(() => undefined);
  const batched = setup.acks === 'batched' ? new AckBatch({ group: setup.group, requestTimeoutMs: 10_000, consumer: async () => consumer }) : undefined;
  const ack = (message: MessageView) => (batched === undefined ? consumer.ack(message) : batched.ack(message));
  let left = n;
  let stop = false;
  const batch = Math.min(RECEIVE_BATCH, setup.prefetch);
  const loops = Math.ceil(setup.prefetch / batch);
  // Received and not yet acked: a loop asks for more only while this leaves room for a whole batch.
  let held = 0;
  let waiting: (() => void)[] = [];
  const wake = () => {
    const woken = waiting;
    waiting = [];
    for (const w of woken) w();
  };
  const loop = async () => {
    while (!stop && left > 0) {
      while (held + batch > setup.prefetch && !stop) await new Promise<void>((r) => waiting.push(r));
      held += batch;
      const messages: MessageView[] = await consumer.receive(batch, setup.invisibleMs);
      held -= batch - messages.length;
      for (const message of messages) {
        ack(message).then(
          () => {
            held--;
            left--;
            acked.tick();
            wake();
          },
          (error: unknown) => fail(error),
        );
      }
    }
  };
  const running = Promise.all(Array.from({ length: loops }, loop));
  try {
    await within(Promise.race([acked.done, failed, running.then(() => acked.done)]), setup.timeoutMs, 'bare SimpleConsumer');
    const drainMs = performance.now() - t0;
    const cpuUsed = process.cpuUsage(cpu);
    return { side: 'raw', messages: n, drainMs: Math.round(drainMs), perSec: Math.round((n * 1000) / drainMs), cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000) };
  } finally {
    stop = true;
    wake();
    await running.catch(() => undefined);
    await consumer.shutdown();
  }
}

/**
 * The broker's own timer: one timed message per delay (`deliveryTimestamp`
 * = send time + delay), sent at `rate` per second, received by a
 * `SimpleConsumer`; lateness = received - delivery time (negative: early).
 * The bare figure beside redeliver's delayed retries, which ride the same
 * timer.
 */
export async function rawTimerLateness(setup: RawSetup, delays: readonly number[], rate: number): Promise<LatenessSummary> {
  const consumer = new SimpleConsumer({
    ...clientOptions(setup.endpoints),
    consumerGroup: setup.group,
    subscriptions: new Map([[setup.topic, '*']]),
    awaitDuration: 2_000,
  });
  await consumer.startup();
  const lateness: number[] = [];
  const received = countdown(delays.length);
  let stop = false;
  const loop = async () => {
    while (!stop) {
      const messages = await consumer.receive(RECEIVE_BATCH, setup.invisibleMs).catch(() => [] as MessageView[]);
      const now = Date.now();
      for (const message of messages) {
        const due = Number(message.properties.get('bench-due'));
        lateness.push(now - due);
        received.tick();
        void consumer.ack(message).catch(() => undefined);
      }
    }
  };
  const running = Promise.all([loop(), loop()]);
  try {
    await withProducer(setup.endpoints, setup.topic, async (producer) => {
      const started = performance.now();
      for (let i = 0; i < delays.length; i++) {
        const wait = started + (i / rate) * 1000 - performance.now();
        if (wait > 1) await new Promise((r) => setTimeout(r, wait));
        const due = Date.now() + delays[i]!;
        await producer.send({ topic: setup.topic, body: Buffer.from(String(i)), deliveryTimestamp: new Date(due), properties: new Map([['bench-due', String(due)]]) });
      }
    });
    await within(received.done, setup.timeoutMs + Math.max(...delays), 'bare timed messages');
    return summariseLateness(lateness);
  } finally {
    stop = true;
    await running;
    await consumer.shutdown();
  }
}
