/**
 * The endpoint on a real RabbitMQ broker: a dead-letter the broker refuses
 * ends retried then released, never stuck unacked; a reconnection never
 * makes the endpoint run more than its concurrency, nor one id twice at once.
 * Run under `flock /tmp/redeliver-rabbit.lock`; touches only its own queues
 * and its own connection.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { EndpointEvents } from '../../src/endpoint/events.js';
import { constant } from '../../src/backoff/constant.js';
import { HEADER } from '../../src/headers/names.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { RabbitMqTransport, type RabbitMqTransportEvents, type RabbitMqTransportOptions } from '../../src/transports/rabbitmq/index.js';
import { closeConnectionsNamed, deleteQueues, RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { userHeadersAtTheLimit } from '../support/large-headers.js';

const skip = await rabbitSkipReason();
const text = (s: string) => new TextEncoder().encode(s);

async function waitFor(predicate: () => boolean, timeoutMs: number, what: string, step?: () => Promise<void>): Promise<void> {
  const started = Date.now();
  while (!predicate()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    if (step) await step();
    await new Promise((r) => setTimeout(r, 10));
  }
}

function nextEvent<K extends keyof RabbitMqTransportEvents>(t: RabbitMqTransport, event: K, timeoutMs = 30_000): Promise<RabbitMqTransportEvents[K]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} event within ${timeoutMs} ms`)), timeoutMs);
    t.once(event, (args) => {
      clearTimeout(timer);
      resolve(args);
    });
  });
}

describe.skipIf(Boolean(skip))('the endpoint on RabbitMQ', () => {
  const cleanups: (() => Promise<unknown>)[] = [];
  const queues = new Set<string>();
  const queueName = (label: string) => {
    const name = `eng-test-${label}-${randomUUID().slice(0, 8)}`;
    queues.add(name);
    return name;
  };
  const open = (options: RabbitMqTransportOptions = {}) => {
    const t = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: `redeliver-engine-test-${randomUUID().slice(0, 8)}`, ...options });
    cleanups.push(() => t.close());
    return t;
  };
  const adminChannel = async () => {
    const connection = await amqp.connect(RABBITMQ_URL);
    connection.on('error', () => undefined);
    cleanups.push(() => connection.close().catch(() => undefined));
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => undefined);
    return channel;
  };

  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await deleteQueues(queues);
    queues.clear();
  });

  it('retries a dead-letter the broker nacks (full error queue), then releases the message; it lands there once there is room', async () => {
    const queue = queueName('settle');
    const errorQueue = queueName('settle-error');
    const admin = await adminChannel();
    // An error queue that refuses every publish while it holds one message.
    await admin.assertQueue(errorQueue, { durable: true, arguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish' } });
    admin.sendToQueue(errorQueue, Buffer.from('filler'), { persistent: true });
    await admin.waitForConfirms();

    const clock = new FakeClock(Date.now());
    const transport = open();
    let calls = 0;
    const endpoint = new Endpoint({
      name: queue,
      transport,
      clock,
      random: () => 0.5,
      concurrency: 1,
      settlementRetries: 2,
      recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue },
      handler: () => {
        calls++;
        throw new Error('always fails');
      },
    });
    cleanups.push(() => endpoint.stop());
    const failed: EndpointEvents['settlementFailed'][] = [];
    endpoint.on('settlementFailed', (e) => failed.push(e));
    await endpoint.start();
    await transport.send(queue, { id: 'full-1', body: text('{}'), headers: {} });

    await waitFor(() => failed.length === 1, 10_000, 'the first refused dead-letter');
    expect(failed[0]).toMatchObject({ messageId: 'full-1', action: 'deadLetter', attempt: 1, outcome: 'retrying', retryInMs: 1_000 });
    expect((failed[0]!.error as Error).name).toBe('PublishNackedError');
    expect(endpoint.stats.inFlight).toBe(1);
    await clock.advance(1_000);
    await waitFor(() => failed.length === 2, 10_000, 'the second refused dead-letter');
    expect(failed[1]).toMatchObject({ attempt: 2, outcome: 'retrying', retryInMs: 1_600 });
    await clock.advance(1_600);
    await waitFor(() => failed.length >= 3, 10_000, 'the release');
    expect(failed[2]).toMatchObject({ attempt: 3, outcome: 'released' });

    // Released, it is delivered again and fails again; once the error queue has room, it lands there.
    await waitFor(() => calls >= 2, 10_000, 'the redelivery');
    await admin.purgeQueue(errorQueue);
    await waitFor(() => endpoint.stats.deadLettered === 1, 20_000, 'the dead-letter', () => clock.advance(500));
    await waitFor(() => endpoint.stats.inFlight === 0, 5_000, 'nothing held');
    expect((await admin.checkQueue(queue)).messageCount).toBe(0);
    expect((await admin.checkQueue(errorQueue)).messageCount).toBe(1);
    const copy = await admin.get(errorQueue, { noAck: true });
    expect(copy && copy.properties.messageId).toBe('full-1');
    expect(copy && String(copy.properties.headers?.[HEADER.failureReason])).toBe('retries-exhausted');
  });

  it('never runs more than `concurrency` handlers, nor one id twice at once, when its connection is cut mid-handling', async () => {
    const concurrency = 3;
    const queue = queueName('concurrency');
    const connectionName = `redeliver-engine-test-${randomUUID().slice(0, 8)}`;
    const transport = open({ connectionName });
    const running = new Map<string, number>();
    const handled = new Set<string>();
    let now = 0;
    let max = 0;
    let overlap = false;
    let openGate!: () => void;
    const gate = new Promise<void>((r) => (openGate = r));
    const endpoint = new Endpoint({
      name: queue,
      transport,
      concurrency,
      handler: async (_m, ctx) => {
        now++;
        max = Math.max(max, now);
        running.set(ctx.messageId, (running.get(ctx.messageId) ?? 0) + 1);
        if (running.get(ctx.messageId)! > 1) overlap = true;
        await gate;
        running.set(ctx.messageId, running.get(ctx.messageId)! - 1);
        now--;
        handled.add(ctx.messageId);
      },
    });
    cleanups.push(() => endpoint.stop());
    for (let i = 0; i < concurrency; i++) await transport.send(queue, { id: `c-${i}`, body: text('{}'), headers: {} });
    await endpoint.start();
    await waitFor(() => now === concurrency, 10_000, 'every slot busy');

    const reconnected = nextEvent(transport, 'connected');
    expect(await closeConnectionsNamed(connectionName)).toBe(1);
    await reconnected;
    // The broker redelivers every message while the first handlers still run.
    await waitFor(() => endpoint.stats.inFlight >= 2 * concurrency, 15_000, `${2 * concurrency} deliveries held`);
    openGate();
    await waitFor(() => handled.size === concurrency && endpoint.stats.inFlight === 0, 15_000, 'every message handled');
    expect(max).toBe(concurrency);
    expect(overlap).toBe(false);
    expect(endpoint.stats.handled).toBe(concurrency);
    const admin = await adminChannel();
    expect((await admin.checkQueue(queue)).messageCount).toBe(0);
  });

  it('keeps the retry limit and the failure history of a message sent with user headers at the send limit', async () => {
    const queue = queueName('big-headers');
    const errorQueue = queueName('big-headers-error');
    const transport = open();
    let calls = 0;
    const endpoint = new Endpoint({
      name: queue,
      transport,
      recoverability: { immediateRetries: 1, delayedRetries: 1, delayedBackoff: constant(50), errorQueue },
      handler: () => {
        calls++;
        throw new Error(`failure ${calls}`);
      },
    });
    cleanups.push(() => endpoint.stop());
    await endpoint.start();
    const user = userHeadersAtTheLimit();
    await transport.send(queue, { id: 'big-1', body: text('{}'), headers: user });
    // Without its retry state the message would run again and again: stop looking once it ran too often.
    await waitFor(() => endpoint.stats.deadLettered === 1 || calls > 4, 15_000, 'the dead-letter');
    expect(calls).toBe(4);
    const admin = await adminChannel();
    const copy = await admin.get(errorQueue, { noAck: true });
    expect(copy).not.toBe(false);
    const headers = (copy as amqp.GetMessage).properties.headers as Record<string, unknown>;
    expect(String(headers[HEADER.failureAttempts])).toBe('4');
    expect(JSON.parse(String(headers[HEADER.history])).map((r: { message: string }) => r.message)).toEqual(['failure 1', 'failure 2', 'failure 3', 'failure 4']);
    for (const [key, value] of Object.entries(user)) expect(String(headers[key])).toBe(value);
  });

  it('refuses a send whose user headers a consumer would cut, before publishing anything', async () => {
    const queue = queueName('too-big');
    const transport = open();
    const user = { ...userHeadersAtTheLimit(), one: 'more' };
    await expect(transport.send(queue, { id: 'too-big-1', body: text('{}'), headers: user })).rejects.toThrow(RangeError);
    await expect(transport.send(queue, { id: 'too-big-1', body: text('{}'), headers: user })).rejects.toThrow(/user headers.*32768/);
    await transport.send(queue, { id: 'fits-1', body: text('{}'), headers: userHeadersAtTheLimit() });
    const admin = await adminChannel();
    expect((await admin.checkQueue(queue)).messageCount).toBe(1);
  });
});
