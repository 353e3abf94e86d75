/**
 * The two kinds of delay levels against a real broker, each test under its
 * own `topologyPrefix`: quorum levels (at-least-once hops) and classic levels
 * (at-most-once hops). Precision on both; what at-least-once dead-lettering
 * does with a hop that a full work queue refuses and with a hop that routes
 * nowhere.
 */
import { randomUUID } from 'node:crypto';
import amqp, { type ChannelModel } from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import type { Delivery, Subscription } from '../../src/transport/types.js';
import { RabbitMqTransport, type DelayLevelType, type RabbitMqTransportOptions } from '../../src/transports/rabbitmq/index.js';
import { levelQueueArguments, levelQueues } from '../../src/transports/rabbitmq/topology.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { deleteDelayTopology } from '../support/delay-topology.js';
import { RabbitCluster, rabbitNodeSkipReason } from '../support/rabbit-node.js';

const skip = await rabbitSkipReason();
const text = (s: string) => new TextEncoder().encode(s);

/**
 * How long RabbitMQ's at-least-once dead-letter worker waits before it tries
 * a refused or unconfirmed hop again: `dead_letter_worker_publisher_confirm_timeout`,
 * 180 s by default. The test that waits for such a retry runs on a node of
 * its own configured with this much instead (a broker-wide setting, never
 * changed on the shared broker).
 */
const BROKER_HOP_RETRY_MS = 2_000;

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  for (;;) {
    if (await predicate()) return;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe.skipIf(skip)('RabbitMQ delay levels', () => {
  const transports: RabbitMqTransport[] = [];
  const prefixes = new Set<string>();
  const queues = new Set<string>();
  let admin: ChannelModel | undefined;

  const uniquePrefix = () => {
    const prefix = `rmq-test-levels-${randomUUID().slice(0, 8)}`;
    prefixes.add(prefix);
    return prefix;
  };
  const queueName = (label: string) => {
    const name = `rmq-test-levels-${label}-${randomUUID().slice(0, 8)}`;
    queues.add(name);
    return name;
  };
  const open = (options: RabbitMqTransportOptions) => {
    const t = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: `redeliver-test-levels-${randomUUID().slice(0, 8)}`, ...options });
    transports.push(t);
    return t;
  };
  const adminConnection = async () => {
    admin ??= await amqp.connect(RABBITMQ_URL);
    admin.on('error', () => undefined);
    return admin;
  };
  /** Ready messages of `queue`, on a throwaway channel (a missing queue closes it). */
  const depth = async (queue: string) => {
    const channel = await (await adminConnection()).createChannel();
    channel.on('error', () => undefined);
    try {
      return (await channel.checkQueue(queue)).messageCount;
    } finally {
      await channel.close().catch(() => undefined);
    }
  };

  afterEach(async () => {
    for (const t of transports.splice(0)) await t.close();
    const connection = await adminConnection();
    for (const prefix of prefixes) await deleteDelayTopology(connection, prefix, queues);
    prefixes.clear();
    queues.clear();
    await connection.close().catch(() => undefined);
    admin = undefined;
  });

  it('declares quorum levels under their own names, with at-least-once hops, beside classic levels of the same prefix', async () => {
    const prefix = uniquePrefix();
    const quorum = open({ topologyPrefix: prefix, delayLevels: 'quorum' });
    const classic = open({ topologyPrefix: prefix, delayLevels: 'classic' });
    // A second quorum transport declares the same topology again: idempotent.
    const again = open({ topologyPrefix: prefix, delayLevels: 'quorum' });
    for (const t of [quorum, classic, again]) await t.send(queueName('declare'), { id: 'x', body: text('x'), headers: {} });

    expect(quorum.topology.level(5)).toBe(`${prefix}.delay-quorum.05`);
    expect(classic.topology.level(5)).toBe(`${prefix}.delay.05`);
    expect(quorum.topology.unroutable).toBe(`${prefix}.delay-quorum.unroutable`);
    expect(classic.topology.unroutable).toBeUndefined();
    const channel = await (await adminConnection()).createChannel();
    // Declaring with the arguments the transport uses succeeds only if they are exactly those the queue has.
    for (const names of [quorum.topology, classic.topology]) {
      for (const [n, level] of levelQueues(names).entries()) {
        await channel.assertQueue(level, { durable: true, arguments: levelQueueArguments(names, n) });
      }
    }
    expect(levelQueueArguments(quorum.topology, 0)).toEqual({
      'x-message-ttl': 1,
      'x-dead-letter-exchange': `${prefix}.delay-quorum.deliver`,
      'x-queue-type': 'quorum',
      'x-dead-letter-strategy': 'at-least-once',
      'x-overflow': 'reject-publish',
    });
    await channel.close();
  });

  it.each<DelayLevelType>(['quorum', 'classic'])('%s levels: never early, and back near the due time, across a spread of delays', async (kind) => {
    const t = open({ topologyPrefix: uniquePrefix(), delayLevels: kind });
    const queue = queueName(`spread-${kind}`);
    const delays = [0, 1, 2, 3, 5, 8, 13, 21, 50, 99, 127, 128, 250, 333, 511, 512, 777, 1_000, 1_023, 1_500, 2_047, 2_500];
    const scheduled = new Map<string, { at: number; delay: number }>();
    const lateness = new Map<string, number>();
    await t.consume(
      queue,
      (d) => {
        void (async () => {
          if (d.headers['back'] === '1') {
            const s = scheduled.get(d.id)!;
            lateness.set(d.id, Date.now() - s.at - s.delay);
            await d.ack();
            return;
          }
          const delay = Number(d.headers['delay']);
          scheduled.set(d.id, { at: Date.now(), delay });
          await d.retryLater(delay, { back: '1' });
        })();
      },
      { prefetch: 50 },
    );
    for (const [i, delay] of delays.entries()) await t.send(queue, { id: `d-${i}`, body: text(String(delay)), headers: { delay: String(delay) } });
    await waitFor(() => lateness.size === delays.length, 15_000, 'every delayed copy');
    const values = [...lateness.values()];
    expect(Math.min(...values)).toBeGreaterThanOrEqual(0);
    // Each level hop costs the broker a few ms; 2,047 ms crosses 11 levels.
    expect(Math.max(...values)).toBeLessThan(500);
  });

  it.skipIf(Boolean(rabbitNodeSkipReason()))(
    'quorum levels: a delayed copy returning to a full maxLength work queue waits in its level until there is room',
    async () => {
      // The broker's hop retry is broker-wide: a node of the test's own, whose dead-letter worker retries every 2 s.
      const node = await RabbitCluster.start({
        namePrefix: 'rmqlevels',
        rabbitEnv: { dead_letter_worker_publisher_confirm_timeout: String(BROKER_HOP_RETRY_MS) },
      });
      try {
        const t = open({ url: node.url(), topologyPrefix: uniquePrefix(), maxLength: 1 });
        const queue = queueName('full');
        const probeQueue = queueName('probe');
        const got: Delivery[] = [];
        const probes: Delivery[] = [];
        const sub: Subscription = await t.consume(queue, (d) => void got.push(d), { prefetch: 1 });
        await t.consume(probeQueue, (d) => void probes.push(d), { prefetch: 1 });
        await t.send(queue, { id: 'retried', body: text('r'), headers: {} });
        await t.send(probeQueue, { id: 'probe', body: text('p'), headers: {} });
        await waitFor(() => got.length === 1 && probes.length === 1, 5_000, 'both first deliveries');
        // The consumer stops taking messages; one ready message fills the queue (maxLength 1).
        await sub.pause();
        await t.send(queue, { id: 'filler', body: text('f'), headers: {} });
        await got[0]!.retryLater(20, { back: '1' });
        // The probe takes the same levels right behind the copy: once it is back, the copy's last hop has met the full queue.
        await probes[0]!.retryLater(20, { back: '1' });
        await waitFor(() => probes.length === 2, 5_000, 'the probe behind the copy');
        const admin = await amqp.connect(node.url());
        try {
          const channel = await admin.createChannel();
          const depth = async (q: string) => (await channel.checkQueue(q)).messageCount;
          expect(await depth(queue)).toBe(1);
          // Through two of the broker's hop retries the queue stays full: the copy is refused each time and stays in its level.
          await new Promise((r) => setTimeout(r, 2 * BROKER_HOP_RETRY_MS + 500));
          expect(await depth(queue)).toBe(1);
          expect(got).toHaveLength(1);
        } finally {
          await admin.close().catch(() => undefined);
        }

        await sub.resume();
        await waitFor(() => got.length === 2, 5_000, 'the filler');
        expect(got[1]!.id).toBe('filler');
        await got[1]!.ack();
        // The broker tries the refused hop again after its confirm timeout: the copy comes back then.
        await waitFor(() => got.length === 3, BROKER_HOP_RETRY_MS + 20_000, 'the delayed copy, once the queue had room');
        expect(got[2]!.id).toBe('retried');
        expect(got[2]!.headers['back']).toBe('1');
        await got[2]!.ack();
      } finally {
        for (const t of transports.splice(0)) await t.close();
        await node.stop();
      }
    },
    120_000,
  );

  it('quorum levels: copies whose work queue was deleted go to the unroutable queue and do not stall the level for other queues', async () => {
    const prefix = uniquePrefix();
    const t = open({ topologyPrefix: prefix });
    const gone = queueName('gone');
    const live = queueName('live');
    // More copies than RabbitMQ's dead-letter worker keeps in flight per level (32).
    const count = 40;
    const goneDeliveries: Delivery[] = [];
    const sub = await t.consume(gone, (d) => void goneDeliveries.push(d), { prefetch: count });
    for (let i = 0; i < count; i++) await t.send(gone, { id: `g-${i}`, body: text('g'), headers: {} });
    await waitFor(() => goneDeliveries.length === count, 5_000, 'every first delivery');
    await Promise.all(goneDeliveries.map((d) => d.retryLater(1_000, { back: '1' })));
    await sub.close();
    const channel = await (await adminConnection()).createChannel();
    await channel.deleteQueue(gone);
    await channel.close();

    const back: Delivery[] = [];
    await t.consume(live, (d) => void back.push(d), { prefetch: 1 });
    await t.send(live, { id: 'live', body: text('l'), headers: {} });
    await waitFor(() => back.length === 1, 5_000, 'the first delivery on the live queue');
    // The same delay: the same levels, right behind the copies for the deleted queue.
    await back[0]!.retryLater(1_000, { back: '1' });
    await waitFor(() => back.length === 2, 10_000, 'the live queue\'s copy, behind the unroutable ones');
    await back[1]!.ack();
    await waitFor(async () => (await depth(t.topology.unroutable!)) === count, 5_000, 'every unroutable copy kept');
    const depths = await t.inspection.queueDepths([t.topology.unroutable!]);
    expect(depths).toEqual([{ queue: t.topology.unroutable, kind: 'error', ready: count, delayed: 0, inFlight: 0 }]);
  });
});
