/**
 * Error queues and delivery limits. Every browse of an error queue gives its
 * messages back, which a quorum queue counts as a delivery: an error queue
 * with a delivery limit loses entries to an open dashboard. RabbitMQ 4 gives
 * quorum queues a default limit of 20, so there the transport declares
 * `x-delivery-limit: -1`; on 3.x (the broker here) it declares none, and -1
 * would drop a message at its first return. The version logic is tested as
 * pure functions; the broker tests run on 3.10 with queues of their own.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import {
  brokerMajorVersion,
  effectiveDeliveryLimit,
  errorQueueDeliveryLimit,
  errorQueueLimitWarning,
  QUORUM_DEFAULT_DELIVERY_LIMIT_4X,
} from '../../src/transports/rabbitmq/delivery-limit.js';
import type { RabbitMqDelivery, RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { rabbitSkipReason } from '../support/brokers.js';
import { rabbitScratch } from '../support/rabbit-scratch.js';
import { recordingLogger } from '../support/recording-logger.js';

const skip = await rabbitSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('error-queue delivery limits by broker version (pure)', () => {
  it('reads the major version from the server properties', () => {
    expect(brokerMajorVersion('3.10.8')).toBe(3);
    expect(brokerMajorVersion('4.0.5')).toBe(4);
    expect(brokerMajorVersion(Buffer.from('4.1.0-rc.1'))).toBe(4);
    expect(brokerMajorVersion(undefined)).toBeUndefined();
    expect(brokerMajorVersion('')).toBeUndefined();
    expect(brokerMajorVersion('unknown')).toBeUndefined();
  });

  it('declares -1 on a quorum error queue from RabbitMQ 4 on, and nothing on 3.x, classic queues or an unknown version', () => {
    expect(errorQueueDeliveryLimit('quorum', 4)).toBe(-1);
    expect(errorQueueDeliveryLimit('quorum', 5)).toBe(-1);
    expect(errorQueueDeliveryLimit('quorum', 3)).toBeUndefined();
    // -1 on 3.x drops a message at its first return: never declared when the version is unknown.
    expect(errorQueueDeliveryLimit('quorum', undefined)).toBeUndefined();
    expect(errorQueueDeliveryLimit('classic', 4)).toBeUndefined();
  });

  it('knows the limit that applies: 4.x defaults quorum queues to 20 and reads -1 as none; 3.x has no default', () => {
    expect(QUORUM_DEFAULT_DELIVERY_LIMIT_4X).toBe(20);
    expect(effectiveDeliveryLimit('quorum', undefined, 4)).toBe(20);
    expect(effectiveDeliveryLimit('quorum', undefined, 3)).toBeUndefined();
    expect(effectiveDeliveryLimit('quorum', undefined, undefined)).toBeUndefined();
    expect(effectiveDeliveryLimit('quorum', -1, 4)).toBeUndefined();
    expect(effectiveDeliveryLimit('quorum', -1, 3)).toBe(-1);
    expect(effectiveDeliveryLimit('quorum', 7, 4)).toBe(7);
    expect(effectiveDeliveryLimit('quorum', 'unknown', 4)).toBe('unknown');
    expect(effectiveDeliveryLimit('classic', 5, 4)).toBeUndefined();
  });

  it('warns about an error queue only when a limit applies', () => {
    expect(errorQueueLimitWarning('errors', undefined)).toBeUndefined();
    expect(errorQueueLimitWarning('errors', 'unknown')).toBeUndefined();
    expect(errorQueueLimitWarning('errors', 20)).toMatch(/error queue 'errors' has a delivery limit of 20: every browse/);
  });
});

describe.skipIf(Boolean(skip))('RabbitMQ error queues and delivery limits (3.10)', () => {
  const scratch = rabbitScratch('eqlim');
  const { queueName, open, channel } = scratch;
  /** Consumes `count` messages sent to a fresh work queue and dead-letters each into `errorQueue`. */
  async function deadLetter(t: RabbitMqTransport, errorQueue: string, count: number): Promise<void> {
    const queue = queueName('work');
    const deliveries: RabbitMqDelivery[] = [];
    const sub = await t.consume(queue, (d) => void deliveries.push(d as RabbitMqDelivery), { prefetch: 10 });
    for (let i = 0; i < count; i++) await t.send(queue, { id: `m${i}`, body: text(String(i)), headers: {} });
    const started = Date.now();
    while (deliveries.length < count) {
      if (Date.now() - started > 5_000) throw new Error('deliveries did not arrive');
      await sleep(10);
    }
    for (const d of deliveries) await d.deadLetter(errorQueue, { [HEADER.failureQueue]: queue });
    await sub.close();
  }

  afterEach(() => scratch.cleanup());

  it("declares quorum error queues without the transport's delivery limit: browsing past the limit loses nothing", async () => {
    const t = open({ queueType: 'quorum', deliveryLimit: 1, allowQuorumErrorQueueReads: true });
    const errorQueue = queueName('error');
    await deadLetter(t, errorQueue, 1);
    // A limit of 1 allows 2 deliveries; each browse counts one. Five browses later the entry is still there.
    for (let i = 0; i < 5; i++) expect(await t.errorQueue.browse(errorQueue)).toHaveLength(1);
    // Declared without x-delivery-limit: declaring it so again is equivalent.
    const ch = await channel();
    await expect(ch.assertQueue(errorQueue, { durable: true, arguments: { 'x-queue-type': 'quorum' } })).resolves.toMatchObject({ queue: errorQueue });
  });

  it('warns once, by log and event, when an error queue in use has a delivery limit', async () => {
    const errorQueue = queueName('limited');
    const ch = await channel();
    await ch.assertQueue(errorQueue, { durable: true, arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 5 } });
    const logger = recordingLogger();
    const t = open({ logger });
    const warnings: { message: string; queue?: string }[] = [];
    t.on('warning', (w) => warnings.push(w));

    await deadLetter(t, errorQueue, 2);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.queue).toBe(errorQueue);
    expect(warnings[0]!.message).toMatch(/has a delivery limit of 5: every browse/);
    expect(logger.lines.filter((l) => l.level === 'warn' && l.fields['deliveryLimit'] === 5 && l.fields['queue'] === errorQueue)).toHaveLength(1);
  });

  it('warns about a limited error queue that it may not declare (declareQueues: false)', async () => {
    const errorQueue = queueName('limited-passive');
    const ch = await channel();
    await ch.assertQueue(errorQueue, { durable: true, arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 3 } });
    const t = open({ declareQueues: false });
    const warnings: string[] = [];
    t.on('warning', (w) => warnings.push(w.message));
    const queue = queueName('work-passive');
    await ch.assertQueue(queue, { durable: true });
    const deliveries: RabbitMqDelivery[] = [];
    await t.consume(queue, (d) => void deliveries.push(d as RabbitMqDelivery), { prefetch: 1 });
    await t.send(queue, { id: 'p', body: text('p'), headers: {} });
    const started = Date.now();
    while (deliveries.length < 1 && Date.now() - started < 5_000) await sleep(10);
    await deliveries[0]!.deadLetter(errorQueue, {});
    expect(warnings.filter((w) => /has a delivery limit of 3/.test(w))).toHaveLength(1);
  });
});
