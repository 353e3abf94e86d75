/**
 * Queues deleted under a running RabbitMQ transport: a publish the broker
 * cannot route must never count as stored, the transport must declare the
 * queue again, and a consumer whose queue is gone must reopen with a backoff
 * instead of spinning. Also: a listener that throws releases its delivery.
 *
 * Every test uses queues and a topology prefix of its own (deleting a
 * shared delay level would break other tests), all deleted afterwards. No
 * broker-wide state is touched.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { Producer } from '../../src/producer/producer.js';
import {
  PublishReturnedError,
  RabbitMqDelivery,
  classifyRabbitMqSendError,
} from '../../src/transports/rabbitmq/index.js';
import { delayLevels, delayTopologyNames } from '../../src/transports/rabbitmq/topology.js';
import { rabbitSkipReason } from '../support/brokers.js';
import { rabbitScratch } from '../support/rabbit-scratch.js';
import { recordingLogger } from '../support/recording-logger.js';

const skip = await rabbitSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves once `predicate` holds (checked every 20 ms), or rejects after `timeoutMs`. */
async function until(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (await predicate()) return;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

describe.skipIf(Boolean(skip))('RabbitMQ: queues deleted under a running transport', () => {
  const scratch = rabbitScratch('delq');
  const { queueName, open, channel } = scratch;
  const prefix = scratch.prefix;
  /** Ready messages in `queue`, or undefined when it does not exist. */
  const depth = async (queue: string): Promise<number | undefined> => {
    const ch = await channel();
    try {
      return (await ch.checkQueue(queue)).messageCount;
    } catch {
      return undefined;
    } finally {
      await ch.close().catch(() => undefined);
    }
  };
  const deleteQueue = async (queue: string) => {
    const ch = await channel();
    await ch.deleteQueue(queue);
    await ch.close();
  };
  /** Takes every message off `queue`: their message ids, in order. */
  const drain = async (queue: string): Promise<string[]> => {
    const ch = await channel();
    const ids: string[] = [];
    for (let m = await ch.get(queue, { noAck: true }); m; m = await ch.get(queue, { noAck: true })) ids.push(String(m.properties.messageId));
    await ch.close();
    return ids;
  };

  afterEach(() => scratch.cleanup());

  it('rejects a send to a deleted work queue as transient, then declares it again and stores the next send', async () => {
    const t = open();
    const queue = queueName('send');
    await t.send(queue, { id: 'before', body: text('1'), headers: {} });
    await deleteQueue(queue);

    const returned = await t.send(queue, { id: 'lost', body: text('2'), headers: {} }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(returned).toBeInstanceOf(PublishReturnedError);
    expect((returned as PublishReturnedError).queue).toBe(queue);
    expect(classifyRabbitMqSendError(returned)).toBe('transient');
    expect(t.classifySendError(returned)).toBe('transient');

    await t.send(queue, { id: 'after', body: text('3'), headers: {} });
    expect(await drain(queue)).toEqual(['after']);
  });

  it('a Producer send to a work queue deleted under it ends stored: the retry declares the queue again', async () => {
    const t = open();
    const queue = queueName('producer');
    const producer = new Producer({ transport: t });
    await producer.send(queue, { n: 1 }, { id: 'first' });
    await deleteQueue(queue);
    const retries: string[] = [];
    producer.on('sendRetry', (e) => retries.push(`${e.kind}:${(e.error as Error).name}`));

    await producer.send(queue, { n: 2 }, { id: 'second' });
    expect(retries).toEqual(['transient:PublishReturnedError']);
    expect(await drain(queue)).toEqual(['second']);
  });

  it('a dead-letter into a deleted error queue fails, leaves the delivery open, and the next attempt declares the queue again', async () => {
    const t = open();
    const queue = queueName('work');
    const errorQueue = queueName('error');
    const deliveries: RabbitMqDelivery[] = [];
    await t.consume(queue, (d) => void deliveries.push(d as RabbitMqDelivery), { prefetch: 10 });
    await t.send(queue, { id: 'm1', body: text('1'), headers: {} });
    await t.send(queue, { id: 'm2', body: text('2'), headers: {} });
    await until(() => deliveries.length === 2, 5_000, 'two deliveries');

    await deliveries[0]!.deadLetter(errorQueue, { [HEADER.failureReason]: 'first' });
    expect(await drain(errorQueue)).toEqual(['m1']);
    await deleteQueue(errorQueue);

    const second = deliveries[1]!;
    await expect(second.deadLetter(errorQueue, { [HEADER.failureReason]: 'second' })).rejects.toBeInstanceOf(PublishReturnedError);
    expect(second.settled).toBe(false);
    // The original is still held by this consumer, not acked: the work queue has nothing ready and the copy went nowhere.
    expect(await depth(errorQueue)).toBeUndefined();

    await second.deadLetter(errorQueue, { [HEADER.failureReason]: 'second' });
    expect(second.settled).toBe(true);
    expect(await drain(errorQueue)).toEqual(['m2']);
  });

  it('a retry copy into a deleted delay level fails, and the next retry declares the levels again and comes back', async () => {
    const t = open();
    const queue = queueName('retry');
    const deliveries: RabbitMqDelivery[] = [];
    await t.consume(queue, (d) => void deliveries.push(d as RabbitMqDelivery), { prefetch: 10 });
    await t.send(queue, { id: 'r1', body: text('1'), headers: {} });
    await t.send(queue, { id: 'r2', body: text('2'), headers: {} });
    await until(() => deliveries.length === 2, 5_000, 'two deliveries');
    await deliveries[0]!.retryLater(50, {});
    await until(() => deliveries.length === 3, 5_000, 'the first retry to come back');
    await deliveries[2]!.ack();

    const top = delayLevels(50)[0]!;
    await deleteQueue(delayTopologyNames(prefix, 'quorum').level(top));
    const second = deliveries[1]!;
    await expect(second.retryLater(50, {})).rejects.toBeInstanceOf(PublishReturnedError);
    expect(second.settled).toBe(false);

    await second.retryLater(50, {});
    await until(() => deliveries.length === 4, 5_000, 'the second retry to come back');
    expect(deliveries[3]!.id).toBe('r2');
    await deliveries[3]!.ack();
  });

  it('a retry copy into a deleted delay exchange fails (404), and the next retry declares the levels again and comes back', async () => {
    const t = open();
    const queue = queueName('retry-exchange');
    const deliveries: RabbitMqDelivery[] = [];
    await t.consume(queue, (d) => void deliveries.push(d as RabbitMqDelivery), { prefetch: 10 });
    await t.send(queue, { id: 'x1', body: text('1'), headers: {} });
    await until(() => deliveries.length === 1, 5_000, 'a delivery');

    const ch = await channel();
    await ch.deleteExchange(delayTopologyNames(prefix, 'quorum').level(delayLevels(50)[0]!));
    await ch.close();
    const first = deliveries[0]!;
    await expect(first.retryLater(50, {})).rejects.toMatchObject({ name: 'PublishChannelClosedError', replyCode: 404 });
    expect(first.settled).toBe(false);

    await first.retryLater(50, {});
    await until(() => deliveries.length === 2, 5_000, 'the retry to come back');
    await deliveries[1]!.ack();
  });

  it('sendBack to a deleted work queue is refused, keeps the entry and declares nothing; once the queue is back it moves the entry', async () => {
    const t = open();
    const queue = queueName('replay');
    const errorQueue = queueName('replay-error');
    const deliveries: RabbitMqDelivery[] = [];
    const sub = await t.consume(queue, (d) => void deliveries.push(d as RabbitMqDelivery), { prefetch: 10 });
    await t.send(queue, { id: 'e1', body: text('1'), headers: {} });
    await until(() => deliveries.length === 1, 5_000, 'a delivery');
    await deliveries[0]!.deadLetter(errorQueue, { [HEADER.failureQueue]: queue });
    await sub.close();
    const [entry] = await t.errorQueue.browse(errorQueue);
    await deleteQueue(queue);

    // A send-back never creates a queue: the name may come from a forged entry.
    await expect(t.errorQueue.sendBack(errorQueue, entry!.key)).rejects.toMatchObject({ name: 'SendBackRefusedError', reason: 'missing', queue });
    expect(await depth(errorQueue)).toBe(1);
    expect(await depth(queue)).toBeUndefined();

    const ch = await channel();
    await ch.assertQueue(queue, { durable: true });
    await ch.close();
    expect(await t.errorQueue.sendBack(errorQueue, entry!.key)).toBe(queue);
    expect(await drain(queue)).toEqual(['e1']);
    expect(await depth(errorQueue)).toBe(0);
  });

  it('a consumer whose queue is deleted declares it again, reopens once, and handles what is sent afterwards', async () => {
    let reopenWaits = 0;
    const t = open({ reconnect: () => (reopenWaits++, 200) });
    const queue = queueName('consume');
    const handled: string[] = [];
    await t.consume(queue, (d) => void d.ack().then(() => handled.push(d.id)), { prefetch: 10 });
    await t.send(queue, { id: 'before', body: text('1'), headers: {} });
    await until(() => handled.length === 1, 5_000, 'the first message');

    await deleteQueue(queue);
    // Sent through another transport: this one must find its queue again by itself.
    const sender = open({ connectionName: `${prefix}-sender` });
    await until(async () => (await depth(queue)) !== undefined, 5_000, 'the consumer to declare its queue again');
    for (let i = 0; i < 5; i++) await sender.send(queue, { id: `after-${i}`, body: text('2'), headers: {} });
    await until(() => handled.length === 6, 5_000, 'the messages sent after the deletion');
    expect(handled.slice(1)).toEqual(['after-0', 'after-1', 'after-2', 'after-3', 'after-4']);
    expect(reopenWaits).toBe(1);
  });

  it('a consumer whose queue is gone for good (declareQueues: false) retries at the reconnect backoff, not in a spin', async () => {
    const queue = queueName('gone');
    const ch = await channel();
    await ch.assertQueue(queue, { durable: true });
    await ch.close();
    let reopenWaits = 0;
    const logger = recordingLogger();
    const t = open({ declareQueues: false, reconnect: () => (reopenWaits++, 200), logger });
    const handled: string[] = [];
    await t.consume(queue, (d) => void d.ack().then(() => handled.push(d.id)), { prefetch: 10 });

    await deleteQueue(queue);
    const windowMs = 2_000;
    await sleep(windowMs); // the window in which reopen attempts are counted
    // One attempt per 200 ms wait at most, plus the one under way.
    expect(reopenWaits).toBeGreaterThanOrEqual(2);
    expect(reopenWaits).toBeLessThanOrEqual(windowMs / 200 + 2);
    expect(logger.lines.some((l) => l.level === 'warn' && /does not exist/.test(String((l.fields['err'] as Error | undefined)?.message)))).toBe(true);

    const again = await channel();
    await again.assertQueue(queue, { durable: true });
    await again.close();
    const sender = open({ connectionName: `${prefix}-sender` });
    await until(async () => {
      if (handled.length > 0) return true;
      await sender.send(queue, { id: `back-${handled.length}`, body: text('3'), headers: {} }).catch(() => undefined);
      return false;
    }, 5_000, 'the consumer to come back once the queue exists');
  });

  it('a listener that throws releases its delivery: it comes back instead of holding a prefetch slot', async () => {
    const logger = recordingLogger();
    const t = open({ logger });
    const queue = queueName('throws');
    const seen: { id: string; redelivered: boolean }[] = [];
    await t.consume(
      queue,
      (d) => {
        seen.push({ id: d.id, redelivered: (d as RabbitMqDelivery).redelivered });
        if (seen.length === 1) throw new Error('listener bug');
        void d.ack();
      },
      { prefetch: 1 },
    );
    await t.send(queue, { id: 'm', body: text('1'), headers: {} });
    await until(() => seen.length === 2, 5_000, 'the delivery to come back');
    expect(seen).toEqual([
      { id: 'm', redelivered: false },
      { id: 'm', redelivered: true },
    ]);
    expect(logger.lines.some((l) => l.level === 'error' && /listener threw/.test(l.message) && /released/.test(l.message))).toBe(true);
  });
});
