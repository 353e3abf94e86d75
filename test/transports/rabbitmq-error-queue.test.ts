/**
 * Error-queue operations and queue inspection on a real RabbitMQ, past the
 * conformance suite: what a browse leaves behind, racing replays, keys of
 * entries that redeliver did not dead-letter, the scan bound, and depths.
 *
 * Every test uses queues of its own, and a topology prefix of its own, so
 * the delay levels it counts are its own; all are deleted afterwards. It
 * never closes other connections and never touches broker settings.
 */
import { randomUUID } from 'node:crypto';
import amqp, { type Channel, type ChannelModel, type ConfirmChannel } from 'amqplib';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { Delivery } from '../../src/transport/types.js';
import { ConfirmedPublishing } from '../../src/transports/rabbitmq/confirmed-publishing.js';
import { ConnectionManager } from '../../src/transports/rabbitmq/connection.js';
import { QueueDeclarations } from '../../src/transports/rabbitmq/declarations.js';
import { ErrorQueueMarkers } from '../../src/transports/rabbitmq/error-queue-marker.js';
import { emptyStats } from '../../src/transports/rabbitmq/events.js';
import { RabbitMqTransport, ScanLimitError, SendBackIncompleteError, errorQueueMarkerName, type RabbitMqTransportOptions } from '../../src/transports/rabbitmq/index.js';
import { RabbitMqOperations } from '../../src/transports/rabbitmq/operations.js';
import { resolveOptions } from '../../src/transports/rabbitmq/options.js';
import { Publisher } from '../../src/transports/rabbitmq/publisher.js';
import { DELAY_LEVELS } from '../../src/transports/rabbitmq/topology.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { deleteDelayTopology } from '../support/delay-topology.js';

const skip = await rabbitSkipReason();
const run = randomUUID().slice(0, 8);
const prefix = `eqtest-${run}`;
const text = (s: string) => Buffer.from(s);

describe.skipIf(Boolean(skip))('RabbitMQ error-queue operations', () => {
  let admin: ChannelModel;
  let publish: ConfirmChannel;
  const queues = new Set<string>();
  const transports: RabbitMqTransport[] = [];

  const queueName = (what: string) => {
    const name = `eqt-${what}-${run}-${randomUUID().slice(0, 6)}`;
    queues.add(name);
    return name;
  };

  const open = (options: Partial<RabbitMqTransportOptions> & { errorQueueMaxScan?: number } = {}) => {
    const t = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: 'redeliver-test-error-queue', topologyPrefix: prefix, ...options });
    transports.push(t);
    return t;
  };

  /** Puts messages straight on `queue` as another tool would: no entry id unless given. */
  async function put(queue: string, messages: { id: string; headers?: Record<string, string>; body?: string }[]): Promise<void> {
    await publish.assertQueue(queue, { durable: true });
    for (const m of messages) {
      publish.sendToQueue(queue, text(m.body ?? `body of ${m.id}`), { persistent: true, messageId: m.id, headers: m.headers ?? {} });
    }
    await publish.waitForConfirms();
  }

  /** Takes every message off `queue` (acking it) with a channel of its own: what is left, in order. */
  async function drainRaw(queue: string): Promise<{ id: string; redelivered: boolean; headers: Record<string, unknown> }[]> {
    const channel: Channel = await admin.createChannel();
    const out: { id: string; redelivered: boolean; headers: Record<string, unknown> }[] = [];
    for (;;) {
      const m = await channel.get(queue, { noAck: true });
      if (!m) break;
      out.push({ id: String(m.properties.messageId), redelivered: m.fields.redelivered, headers: m.properties.headers ?? {} });
    }
    await channel.close();
    return out;
  }

  async function depth(queue: string): Promise<number> {
    const channel = await admin.createChannel();
    channel.on('error', () => undefined);
    try {
      return (await channel.checkQueue(queue)).messageCount;
    } finally {
      await channel.close().catch(() => undefined);
    }
  }

  /** Dead-letters `ids` from a fresh work queue into `errorQueue` through the transport, so each copy gets an entry id. */
  async function deadLetter(t: RabbitMqTransport, errorQueue: string, ids: string[]): Promise<string> {
    const queue = queueName('work');
    for (const id of ids) await t.send(queue, { id, body: text(`body of ${id}`), headers: { 'x-n': id } });
    const got: Delivery[] = [];
    const sub = await t.consume(queue, (d) => void got.push(d), { prefetch: 1 });
    for (let i = 0; i < ids.length; i++) {
      while (got.length <= i) await new Promise((r) => setTimeout(r, 5));
      await got[i]!.deadLetter(errorQueue, { ...got[i]!.headers, [HEADER.failureQueue]: queue, [HEADER.failureReason]: 'retries-exhausted' });
    }
    await sub.close();
    return queue;
  }

  beforeAll(async () => {
    admin = await amqp.connect(RABBITMQ_URL);
    publish = await admin.createConfirmChannel();
  });

  afterEach(async () => {
    for (const t of transports.splice(0)) await t.close();
  });

  afterAll(async () => {
    if (!admin) return;
    await deleteDelayTopology(admin, prefix, queues);
    await admin.close();
  });

  it('browsing leaves every message in the queue, in order, whatever the pages', async () => {
    const t = open();
    const errorQueue = queueName('error');
    const ids = Array.from({ length: 30 }, (_, i) => `m-${String(i).padStart(2, '0')}`);
    await put(errorQueue, ids.map((id) => ({ id, headers: { [HEADER.failureQueue]: 'orders' } })));
    const ops = t.errorQueue;

    expect((await ops.browse(errorQueue, { limit: 1_000 })).map((e) => e.messageId)).toEqual(ids);
    expect((await ops.browse(errorQueue, { offset: 10, limit: 5 })).map((e) => e.messageId)).toEqual(ids.slice(10, 15));
    expect((await ops.browse(errorQueue, { offset: 28, limit: 10 })).map((e) => e.messageId)).toEqual(ids.slice(28));
    expect(await ops.browse(errorQueue, { offset: 30 })).toEqual([]);
    // Concurrent calls of one transport on one queue run one at a time, so no page hides entries from another.
    const pages = await Promise.all([0, 10, 20].map((offset) => ops.browse(errorQueue, { offset, limit: 10 })));
    expect(pages.flat().map((e) => e.messageId)).toEqual(ids);
    const [count] = await Promise.all([ops.count(errorQueue), ops.browse(errorQueue, { limit: 30 })]);
    expect(count).toBe(30);
    expect(await ops.get(errorQueue, 'no-such-key')).toBeUndefined();

    expect(await depth(errorQueue)).toBe(30);
    const left = await drainRaw(errorQueue);
    expect(left.map((m) => m.id)).toEqual(ids);
    // What a browse leaves behind: the broker's redelivered flag on the messages it read.
    expect(left.every((m) => m.redelivered)).toBe(true);
  });

  it('keys are stable across reads: entry ids for copies redeliver dead-lettered, derived keys for the rest', async () => {
    const t = open();
    const errorQueue = queueName('error');
    await deadLetter(t, errorQueue, ['dl-1', 'dl-2']);
    await put(errorQueue, [
      { id: 'raw-1', headers: { [HEADER.failureQueue]: 'orders', 'x-a': '1' } },
      { id: 'raw-1', headers: { [HEADER.failureQueue]: 'orders', 'x-a': '2' } },
      { id: 'has spaces', headers: { [HEADER.entryId]: 'not a valid id!' } },
    ]);
    const ops = t.errorQueue;
    const first = await ops.browse(errorQueue);
    const second = await ops.browse(errorQueue);
    expect(second.map((e) => e.key)).toEqual(first.map((e) => e.key));
    expect(new Set(first.map((e) => e.key)).size).toBe(5);
    const [a, b, c, d, e] = first;
    expect(a!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(a!.key).toBe(a!.headers[HEADER.entryId]);
    expect(b!.key).toMatch(/^[0-9a-f-]{36}$/);
    expect(c!.key).toMatch(/^raw-1#[0-9a-f]{16}$/);
    expect(d!.key).toMatch(/^raw-1#[0-9a-f]{16}$/);
    expect(e!.key).toMatch(/^_#[0-9a-f]{16}$/);
    expect((await ops.get(errorQueue, d!.key))?.headers['x-a']).toBe('2');
    expect(await ops.delete(errorQueue, c!.key)).toBe(true);
    expect(await ops.delete(errorQueue, c!.key)).toBe(false);
    expect((await ops.browse(errorQueue)).map((x) => x.key)).toEqual([a!.key, b!.key, d!.key, e!.key]);
  });

  it('a sendBack racing a second sendBack of the same key sends once, in one process and across two', async () => {
    const t1 = open();
    const t2 = open({ connectionName: 'redeliver-test-error-queue-2' });
    const errorQueue = queueName('error');
    const queue = await deadLetter(t1, errorQueue, ['r-0', 'r-1', 'r-2', 'r-3']);
    const entries = await t1.errorQueue.browse(errorQueue);
    expect(entries.map((e) => e.messageId)).toEqual(['r-0', 'r-1', 'r-2', 'r-3']);

    // One transport: the calls run one after the other; the second finds nothing.
    const same = await Promise.all([t1.errorQueue.sendBack(errorQueue, entries[1]!.key), t1.errorQueue.sendBack(errorQueue, entries[1]!.key)]);
    expect(same.sort()).toEqual([queue, undefined]);

    // Two transports (two processes): whichever holds the entry first sends it; the other cannot see it.
    for (const entry of [entries[0]!, entries[3]!]) {
      const racing = await Promise.all([t1.errorQueue.sendBack(errorQueue, entry.key), t2.errorQueue.sendBack(errorQueue, entry.key)]);
      expect(racing.filter((r) => r === queue)).toHaveLength(1);
      expect(racing.filter((r) => r === undefined)).toHaveLength(1);
    }

    const sent = await drainRaw(queue);
    expect(sent.map((m) => m.id).sort()).toEqual(['r-0', 'r-1', 'r-3']);
    expect(sent.every((m) => m.headers[HEADER.replayCount] === '1' && m.headers[HEADER.entryId] === undefined)).toBe(true);
    expect((await t2.errorQueue.browse(errorQueue)).map((e) => e.messageId)).toEqual(['r-2']);
  });

  it('a connection lost between the confirmed copy and the ack of the entry leaves a duplicate, never a loss, and says so', async () => {
    const t = open();
    const errorQueue = queueName('error');
    const queue = await deadLetter(t, errorQueue, ['x-1']);
    const [entry] = await t.errorQueue.browse(errorQueue);
    // The operations on connections of their own: the publisher closes the one that reads the entry right after the broker confirmed the copy.
    const options = resolveOptions({ url: RABBITMQ_URL, topologyPrefix: prefix, connectionName: 'redeliver-test-error-queue-lost' });
    const connection = new ConnectionManager(options, () => undefined, emptyStats(), 'consume');
    const publishing = new ConnectionManager(options, () => undefined, emptyStats(), 'publish');
    const declarations = new QueueDeclarations(connection, options, () => undefined);
    const real = new Publisher(new ConfirmedPublishing(publishing, declarations, options, emptyStats()), publishing.names, options);
    const publisher = Object.assign(Object.create(real) as Publisher, {
      publishCopy: async (...args: Parameters<Publisher['publishCopy']>) => {
        await real.publishCopy(...args);
        await connection.session!.model.close();
      },
    });
    const ops = new RabbitMqOperations({ connection, declarations, publisher, options, markers: new ErrorQueueMarkers(publishing, declarations, options) });
    try {
      const failure = await ops.sendBack(errorQueue, entry!.key).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(SendBackIncompleteError);
      expect((failure as Error).message).toMatch(/may still be in the error queue/);
    } finally {
      await connection.close();
      await publishing.close();
    }
    // The copy is on the work queue, and the entry is back in the error queue: twice, not zero times.
    expect((await drainRaw(queue)).map((m) => m.id)).toEqual(['x-1']);
    expect((await t.errorQueue.browse(errorQueue)).map((e) => e.key)).toEqual([entry!.key]);
  });

  it('refuses to send back to an error queue, and leaves the entry where it was', async () => {
    const t = open();
    const errorQueue = queueName('error');
    const otherErrorQueue = queueName('error-other');
    await deadLetter(t, errorQueue, ['e-1']);
    await deadLetter(t, otherErrorQueue, ['e-2']);
    await t.close();
    // A fresh transport knows the other error queue only by its marker exchange.
    const fresh = open();
    const [entry] = await fresh.errorQueue.browse(errorQueue);
    await expect(fresh.errorQueue.sendBack(errorQueue, entry!.key, { queue: otherErrorQueue })).rejects.toThrow(/is an error queue/);
    await expect(fresh.errorQueue.sendBack(errorQueue, entry!.key, { queue: errorQueue })).rejects.toThrow(/is an error queue/);
    await put(errorQueue, [{ id: 'no-origin' }]);
    const entries = await fresh.errorQueue.browse(errorQueue);
    await expect(fresh.errorQueue.sendBack(errorQueue, entries[1]!.key)).rejects.toThrow(/does not say which queue it failed on/);
    expect((await fresh.errorQueue.browse(errorQueue)).map((e) => e.messageId)).toEqual(['e-1', 'no-origin']);
  });

  it('gives up past errorQueueMaxScan without changing the queue, and caps a page at 1,000 entries', async () => {
    const t = open({ errorQueueMaxScan: 5 });
    const errorQueue = queueName('error');
    const ids = Array.from({ length: 8 }, (_, i) => `s-${i}`);
    await put(errorQueue, ids.map((id) => ({ id })));
    const ops = t.errorQueue;
    expect((await ops.browse(errorQueue, { offset: 2, limit: 3 })).map((e) => e.messageId)).toEqual(['s-2', 's-3', 's-4']);
    await expect(ops.browse(errorQueue, { offset: 4, limit: 2 })).rejects.toBeInstanceOf(ScanLimitError);
    await expect(ops.get(errorQueue, 'no-such-key')).rejects.toThrow(/more than the 5 messages one operation may read/);
    expect(await ops.count(errorQueue)).toBe(8);
    expect((await drainRaw(errorQueue)).map((m) => m.id)).toEqual(ids);

    // A queue of exactly the bound reads to its end.
    await put(errorQueue, ids.slice(0, 5).map((id) => ({ id })));
    expect(await ops.browse(errorQueue, { limit: 10 })).toHaveLength(5);
    expect(await ops.get(errorQueue, 'no-such-key')).toBeUndefined();
    await ops.purge(errorQueue);

    const big = open();
    await put(errorQueue, Array.from({ length: 1_005 }, (_, i) => ({ id: `b-${i}` })));
    const page = await big.errorQueue.browse(errorQueue, { limit: 5_000 });
    expect(page).toHaveLength(1_000);
    expect((await big.errorQueue.browse(errorQueue, { offset: 1_000, limit: 5_000 })).map((e) => e.messageId)).toEqual(['b-1000', 'b-1001', 'b-1002', 'b-1003', 'b-1004']);
    expect(await big.errorQueue.purge(errorQueue)).toBe(1_005);
  });

  it('treats a queue that does not exist as empty', async () => {
    const t = open();
    const missing = queueName('missing');
    const ops = t.errorQueue;
    expect(await ops.count(missing)).toBe(0);
    expect(await ops.browse(missing)).toEqual([]);
    expect(await ops.get(missing, 'k')).toBeUndefined();
    expect(await ops.sendBack(missing, 'k', { queue: queueName('unused') })).toBeUndefined();
    expect(await ops.delete(missing, 'k')).toBe(false);
    expect(await ops.purge(missing)).toBe(0);
    // The operations do not create it.
    await expect(depth(missing)).rejects.toThrow(/NOT_FOUND/);
  });

  it('reads depths: work and error queues, delayed retries in the delay levels, in-flight 0', async () => {
    const t = open();
    const errorQueue = queueName('error');
    const work = await deadLetter(t, errorQueue, ['d-1', 'd-2']);
    await t.send(work, { id: 'w-1', body: text('w'), headers: {} });
    const retried: Delivery[] = [];
    const sub = await t.consume(work, (d) => void retried.push(d), { prefetch: 1 });
    while (retried.length === 0) await new Promise((r) => setTimeout(r, 5));
    // 2^20 ms (about 17 min) waits in level 20 alone.
    await retried[0]!.retryLater(2 ** 20, {});
    await sub.close();

    const level20 = t.topology.level(20);
    const own = await t.inspection.queueDepths();
    expect(own.filter((d) => d.kind !== 'retry')).toEqual([
      ...[
        { queue: errorQueue, kind: 'error', ready: 2, delayed: 0, inFlight: 0 },
        { queue: work, kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
      ].sort((a, b) => a.queue.localeCompare(b.queue)),
      { queue: t.topology.unroutable, kind: 'error', ready: 0, delayed: 0, inFlight: 0 },
    ]);
    const levels = own.filter((d) => d.kind === 'retry');
    expect(levels).toHaveLength(DELAY_LEVELS);
    expect(levels.find((d) => d.queue === level20)).toEqual({ queue: level20, kind: 'retry', ready: 0, delayed: 1, inFlight: 0 });
    expect(levels.reduce((n, d) => n + d.delayed, 0)).toBe(1);
    await t.close();

    // Another process: only what it is asked about, the error queue recognised by its marker.
    const other = open();
    const missing = queueName('missing');
    expect(await other.inspection.queueDepths([work, errorQueue, missing, level20])).toEqual([
      { queue: work, kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
      { queue: errorQueue, kind: 'error', ready: 2, delayed: 0, inFlight: 0 },
      { queue: missing, kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
      { queue: level20, kind: 'retry', ready: 0, delayed: 1, inFlight: 0 },
    ]);
    // Deleting the error queue removes its marker (an auto-delete exchange bound to it).
    const channel = await admin.createChannel();
    await channel.deleteQueue(errorQueue);
    channel.on('error', () => undefined);
    await expect(channel.checkExchange(errorQueueMarkerName(prefix, errorQueue))).rejects.toThrow(/NOT_FOUND/);
    await channel.close().catch(() => undefined);
    await publish.purgeQueue(level20);
  });
});
