/**
 * The defects of `rocketmq-client-nodejs` 1.0.x the transport works
 * around, each shown: on the client's own code, on the subscription with a
 * consumer that fails like the client does, and on the real broker.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { BadRequestException, ExponentialBackoffRetryPolicy, InternalErrorException, PayloadTooLargeException, ProxyTimeoutException, SimpleConsumer, TooManyRequestsException } from 'rocketmq-client-nodejs';
// @ts-expect-error google-protobuf ships no types; the client builds its durations with it.
import { Duration } from 'google-protobuf/google/protobuf/duration_pb.js';
import { ExponentialBackoff, RetryPolicy } from 'rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb.js';
import { classifyRocketMqSendError } from '../../../src/transports/rocketmq/index.js';
import { systemClock } from '../../../src/time/clock.js';
import { FAKE_MESSAGE, fakeSubscription } from './fake-consumer.js';
import { ROCKETMQ_ENDPOINTS, RocketScratch, rocketSkipReason } from './scratch.js';

describe('rocketmq-client-nodejs: throttling backoff', () => {
  it('reads the proxy backoff in seconds and returns it as milliseconds, so the transport builds its producer with one attempt', () => {
    // The proxy's publishing settings: 1 s initial backoff, × 1.6, at most 120 s (seed 002).
    const proxyPolicy = new RetryPolicy()
      .setMaxAttempts(3)
      .setExponentialBackoff(new ExponentialBackoff().setInitial(new Duration().setSeconds(1)).setMax(new Duration().setSeconds(120)).setMultiplier(1.6));
    const inherited = ExponentialBackoffRetryPolicy.immediatelyRetryPolicy(3).inheritBackoff(proxyPolicy);
    // The producer waits this many milliseconds (setTimeout) before a throttled attempt: 1 ms instead of 1 000.
    expect(inherited.getNextAttemptDelay(1)).toBe(1);
    expect(inherited.getNextAttemptDelay(2)).toBeCloseTo(1.6);
  });

  it('the proxy status codes map onto the producer: throttled, unavailable, transient, fatal', () => {
    expect(classifyRocketMqSendError(new TooManyRequestsException(42900, 'TOO_MANY_REQUESTS'))).toBe('throttled');
    expect(classifyRocketMqSendError(new InternalErrorException(50001, 'INTERNAL_SERVER_ERROR'))).toBe('transient');
    expect(classifyRocketMqSendError(new ProxyTimeoutException(50400, 'PROXY_TIMEOUT'))).toBe('transient');
    expect(classifyRocketMqSendError(new BadRequestException(40002, 'ILLEGAL_TOPIC'))).toBe('fatal');
    expect(classifyRocketMqSendError(new BadRequestException(40007, 'ILLEGAL_MESSAGE_PROPERTY_KEY'))).toBe('fatal');
    expect(classifyRocketMqSendError(new PayloadTooLargeException(41301, 'MESSAGE_BODY_TOO_LARGE'))).toBe('fatal');
    expect(classifyRocketMqSendError(Object.assign(new Error('14 UNAVAILABLE: Connection dropped'), { code: 14 }))).toBe('unavailable');
    expect(classifyRocketMqSendError(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8081'), { code: 'ECONNREFUSED' }))).toBe('unavailable');
    expect(classifyRocketMqSendError(Object.assign(new Error('4 DEADLINE_EXCEEDED: Deadline exceeded'), { code: 4 }))).toBe('transient');
  });
});

describe('rocketmq-client-nodejs: a receive before the settings reached the proxy', () => {
  it('a failed first receive is tried again after the backoff, and the message is handed out', async () => {
    let receives = 0;
    const waits: number[] = [];
    const { got, sub } = fakeSubscription({
      clock: systemClock,
      leaseMs: 10_000,
      async receive() {
        receives++;
        if (receives === 1) throw new InternalErrorException(50001, 'settings not received yet');
        if (receives === 2) return [FAKE_MESSAGE];
        await new Promise((r) => setTimeout(r, 20));
        return [];
      },
      backoff: (attempt) => {
        waits.push(attempt);
        return 5;
      },
    });
    for (let i = 0; i < 200 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await sub.close();
    expect(waits).toEqual([1]);
    expect(got.map((d) => d.id)).toEqual(['x']);
  });
});

const skip = await rocketSkipReason();
const scratch = new RocketScratch('defects');
afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 60_000);

describe.skipIf(Boolean(skip))('rocketmq-client-nodejs: unacked messages of a SimpleConsumer (apache/rocketmq-clients 1344)', () => {
  it('a message received and never acknowledged comes back after its invisible duration, its delivery attempt counted', async () => {
    const t = scratch.transport();
    const topic = `defect-unacked-${randomUUID().slice(0, 8)}`;
    await t.send(topic, { id: 'u-1', body: Buffer.from('x'), headers: {} });
    await t.close();
    const consumer = new SimpleConsumer({ endpoints: ROCKETMQ_ENDPOINTS, namespace: '', consumerGroup: scratch.group, subscriptions: new Map([[topic, '*']]), awaitDuration: 5_000, logger: { info() {}, warn() {}, error() {}, debug() {} } });
    await consumer.startup();
    try {
      let first: Awaited<ReturnType<SimpleConsumer['receive']>> = [];
      for (let i = 0; i < 5 && first.length === 0; i++) first = await consumer.receive(1, 10_000).catch(() => []);
      expect(first).toHaveLength(1);
      const receivedAt = Date.now();
      let again: typeof first = [];
      for (let i = 0; i < 8 && again.length === 0; i++) again = await consumer.receive(1, 10_000).catch(() => []);
      expect(again).toHaveLength(1);
      expect(again[0]!.properties.get('redeliver-id')).toBe('u-1');
      expect(Date.now() - receivedAt).toBeGreaterThanOrEqual(10_000 - 50);
      expect(again[0]!.deliveryAttempt).toBe(2);
      await consumer.ack(again[0]!);
    } finally {
      await consumer.shutdown();
    }
  }, 90_000);
});
