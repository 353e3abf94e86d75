import { describe, expect, it } from 'vitest';
import { describeSweep, isDefaultTopology, isTestRabbitName, isTestRedisKey, isTestStream } from './sweep.js';

describe('which names on the shared brokers are a test run\'s', () => {
  it('RabbitMQ: names with a run token and the default delay topology; never amq.* or other names', () => {
    for (const name of ['rmq-test-dup-1a2b3c4d', 'onepass-large-1a2b3c4d-9f8e7d', 'onepass-1a2b3c4d.delay-quorum.05', 'eqtest-1a2b3c4d.error-queue.x', 'redeliver.delay-quorum.27', 'redeliver.delay.deliver', 'redeliver.error-queue.orders']) {
      expect(isTestRabbitName(name), name).toBe(true);
    }
    for (const name of ['', 'amq.topic', 'amq.rabbitmq.trace', 'orders', 'orders.error', 'redeliver-demo', 'payments-2024', 'abcdefgh-queue', '1a2b3c4d5e-long']) {
      expect(isTestRabbitName(name), name).toBe(false);
    }
    expect(isDefaultTopology('redeliver.delay-quorum.00')).toBe(true);
    expect(isDefaultTopology('onepass-1a2b3c4d.delay-quorum.00')).toBe(false);
  });

  it('Redis: keys whose hash tag carries a run token or is the demo prefix', () => {
    expect(isTestRedisKey('{test-cli-1a2b3c4d}:q:orders')).toBe(true);
    expect(isTestRedisKey('{rt-1a2b3c4d}:s:1-0:1:cut')).toBe(true);
    expect(isTestRedisKey('{redeliver-demo}:queues')).toBe(true);
    expect(isTestRedisKey('{orders}:q:orders')).toBe(false);
    expect(isTestRedisKey('session:1a2b3c4d')).toBe(false);
    expect(isTestRedisKey('{redeliver-demo-2}:queues')).toBe(false);
  });

  it('JetStream: streams with a run token or of the demo prefix', () => {
    expect(isTestStream('test-jt-1a2b3c4d_DELAYS')).toBe(true);
    expect(isTestStream('test-jt-1a2b3c4d_Q_orders')).toBe(true);
    expect(isTestStream('redeliver-demo_DELAYS')).toBe(true);
    expect(isTestStream('ORDERS')).toBe(false);
    expect(isTestStream('redeliver_DELAYS')).toBe(false);
  });

  it('describes a sweep, leaving out the shared default topology when asked for leaks only', () => {
    const report = { queues: ['redeliver.delay-quorum.00', 'rmq-test-x-1a2b3c4d'], exchanges: ['redeliver.delay-quorum.deliver'], redisKeys: 2, redisPrefixes: ['rt-1a2b3c4d'], streams: [], skipped: [] };
    expect(describeSweep(report)).toEqual([
      'RabbitMQ queues: redeliver.delay-quorum.00, rmq-test-x-1a2b3c4d',
      'RabbitMQ exchanges: redeliver.delay-quorum.deliver',
      'Redis: 2 keys of rt-1a2b3c4d',
    ]);
    expect(describeSweep(report, true)).toEqual(['RabbitMQ queues: rmq-test-x-1a2b3c4d', 'Redis: 2 keys of rt-1a2b3c4d']);
  });
});
