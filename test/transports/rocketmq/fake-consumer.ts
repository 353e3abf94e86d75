/**
 * A RocketMQ subscription over a fake consumer, for the tests of what the
 * subscription does with the consumer's answers: one message (id `x`), a
 * consumer whose `receive` the test writes, and settlements that do nothing.
 */
import type { SimpleConsumer } from 'rocketmq-client-nodejs';
import type { Clock } from '../../../src/time/clock.js';
import type { Delivery } from '../../../src/transport/types.js';
import { RocketMqSubscription } from '../../../src/transports/rocketmq/subscription.js';

/** The message the fake consumer's receive answers: redeliver id `x`, empty headers. */
export const FAKE_MESSAGE = { messageId: 'm', properties: new Map([['redeliver-id', 'x'], ['redeliver-headers', '{}']]), body: Buffer.from('b'), keys: [] };

/** A subscription (prefetch 1, a `leaseMs` lease) whose consumer answers with `receive`; every delivery it hands out goes to `got`. */
export function fakeSubscription(options: { receive: () => Promise<unknown[]>; clock: Clock; leaseMs: number; backoff?: (attempt: number) => number }) {
  const consumer = { receive: options.receive, async shutdown() {}, async changeInvisibleDuration() {} } as unknown as SimpleConsumer;
  const got: Delivery[] = [];
  const sub = new RocketMqSubscription({
    queue: 'q',
    group: 'g',
    requestTimeoutMs: 5_000,
    listener: (d) => got.push(d),
    prefetch: 1,
    leaseMs: options.leaseMs,
    start: async () => consumer,
    owner: { clock: options.clock, changeInvisible: async () => undefined, sendCopy: async () => undefined, errorQueue: async () => undefined, recordDuplicate: () => undefined },
    hop: async () => undefined,
    backoff: ({ attempt }) => options.backoff?.(attempt) ?? 5,
    clock: options.clock,
    random: () => 0.5,
    logger: undefined,
    onClosed: () => undefined,
  });
  return { got, sub };
}
