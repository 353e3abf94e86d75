import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { describe, expect, it } from 'vitest';
import { realDriver, runOutage } from '../../bench/outage/simulation.js';
import { systemClock } from '../../src/time/clock.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';

const skip = await rabbitSkipReason();

describe.skipIf(Boolean(skip))('flow control through a real outage on RabbitMQ', () => {
  it('keeps the dependency near its normal load during the outage and handles every message after it', async () => {
    const queue = `flow-${randomUUID().slice(0, 8)}`;
    const errorQueue = `${queue}-error`;
    const transport = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: `redeliver-test-${queue}` });
    try {
      const result = await runOutage(
        transport,
        realDriver(systemClock),
        {
          capacityPerSec: 100,
          loadShare: 0.8,
          warmupSec: 2,
          outageSec: 6,
          afterSec: 8,
          concurrency: 8,
          recoverability: { errorQueue },
          flowControl: { consumerBackoff: { maxMs: 4_000 }, rateLimit: { consecutiveFailures: 20, waitMs: 500 }, retryBudget: true },
        },
        queue,
      );
      expect(result.outageCalls).toBeGreaterThan(0);
      expect(result.peakLoadRatio).toBeLessThanOrEqual(1.1);
      expect(result.deadLettered).toBe(0);
      expect(result.handled).toBe(result.sent);
    } finally {
      await transport.close();
      const connection = await amqp.connect(RABBITMQ_URL);
      const channel = await connection.createChannel();
      for (const q of [queue, errorQueue]) await channel.deleteQueue(q).catch(() => undefined);
      await connection.close();
    }
  }, 120_000);
});
