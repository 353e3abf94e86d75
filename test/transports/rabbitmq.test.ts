/**
 * The RabbitMQ transport against a real broker: delay precision, connection
 * loss, the duplicate window, delivery limits, hostile headers, header
 * bounds and confirm timeouts. Connection cuts close only the test's own
 * connections; the memory alarm runs on a broker node of the test's own.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { afterEach, describe, expect, it } from 'vitest';
import type { Delivery, Subscription } from '../../src/transport/types.js';
import {
  ConfirmTimeoutError,
  DELAY_LEVELS,
  deliveryLimitWarning,
  delayLevels,
  delayRoutingKey,
  expectedBrokerDeliveries,
  HEADER_LIMITS,
  MAX_DELAY_MS,
  PublishBlockedError,
  RabbitMqDelivery,
  RabbitMqTransport,
  StaleDeliveryError,
  totalAttempts,
  type RabbitMqTransportEvents,
  type RabbitMqTransportOptions,
} from '../../src/transports/rabbitmq/index.js';
import { closeConnections, closeConnectionsNamed, connectionPidsNamed, RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { RabbitCluster } from '../support/rabbit-node.js';
import { recordingLogger } from '../support/recording-logger.js';
import { until } from '../support/own-servers.js';
import type { ConnectionRole } from '../../src/transports/rabbitmq/connection.js';

const skip = await rabbitSkipReason();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const text = (s: string) => new TextEncoder().encode(s);

/** Polls `predicate` every 10 ms until it holds, failing after `timeoutMs`. */
function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  return until(what, timeoutMs, predicate, 10);
}

/** The next `event`; of a connection event, the next about the consume connection (the one the tests cut), unless `connection` says otherwise. */
function nextEvent<K extends keyof RabbitMqTransportEvents>(
  t: RabbitMqTransport,
  event: K,
  timeoutMs = 15_000,
  connection: ConnectionRole = 'consume',
): Promise<RabbitMqTransportEvents[K]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      t.off(event, listener);
      reject(new Error(`no ${event} event within ${timeoutMs} ms`));
    }, timeoutMs);
    const listener = (args: RabbitMqTransportEvents[K]) => {
      const about = (args as { connection?: ConnectionRole }).connection;
      if (about !== undefined && about !== connection) return;
      t.off(event, listener);
      clearTimeout(timer);
      resolve(args);
    };
    t.on(event, listener);
  });
}

describe('delay levels (pure)', () => {
  it('writes a delay as 28 bits whose levels add up to the delay, rounding up', () => {
    expect(DELAY_LEVELS).toBe(28);
    expect(delayRoutingKey(0)).toBe(Array(28).fill('0').join('.'));
    expect(delayRoutingKey(5).endsWith('1.0.1')).toBe(true);
    for (const d of [0, 1, 2, 3, 1000, 1023, 300_000, 24 * 3600_000, MAX_DELAY_MS]) {
      expect(delayLevels(d).reduce((sum, n) => sum + 2 ** n, 0)).toBe(d);
    }
    expect(delayLevels(0.2)).toEqual([0]);
    expect(() => delayLevels(MAX_DELAY_MS + 1)).toThrow(RangeError);
    expect(() => delayLevels(-1)).toThrow(RangeError);
    expect(() => delayLevels(Number.NaN)).toThrow(RangeError);
    expect(delayLevels(24 * 3600_000).length).toBeLessThanOrEqual(DELAY_LEVELS);
  });

  it('warns when a delivery limit cannot carry the retry policy, counting broker deliveries', () => {
    const nsb = { immediateRetries: 5, delayedRetries: 3 };
    expect(totalAttempts(nsb)).toBe(24);
    expect(expectedBrokerDeliveries(nsb)).toBe(1);
    expect(deliveryLimitWarning(nsb, undefined)).toBeUndefined();
    expect(deliveryLimitWarning(nsb, 5)).toBeUndefined();
    // Limit 0 allows exactly one delivery: no room for a connection loss.
    expect(deliveryLimitWarning(nsb, 0, 'orders')).toMatch(/orders.*x-delivery-limit 0/);
    const viaBroker = { ...nsb, immediateRetriesInProcess: false };
    expect(expectedBrokerDeliveries(viaBroker)).toBe(6);
    expect(deliveryLimitWarning(viaBroker, 3)).toMatch(/drop or dead-letter/);
    expect(deliveryLimitWarning(viaBroker, 6)).toBeUndefined();
  });
});

describe.skipIf(Boolean(skip))('rabbitmq transport', () => {
  const transports: RabbitMqTransport[] = [];
  const connectionNames = new Map<RabbitMqTransport, string>();
  const queues = new Set<string>();
  let admin: amqp.ChannelModel | undefined;

  const queueName = (label: string) => {
    const name = `rmq-test-${label}-${randomUUID().slice(0, 8)}`;
    queues.add(name);
    return name;
  };
  const open = (options: RabbitMqTransportOptions = {}) => {
    const connectionName = `redeliver-test-${randomUUID().slice(0, 8)}`;
    const t = new RabbitMqTransport({ url: RABBITMQ_URL, connectionName, ...options });
    transports.push(t);
    connectionNames.set(t, connectionName);
    return t;
  };
  /** Cuts this transport's connection, and only its own: other clients of the shared broker keep theirs. */
  const cut = (t: RabbitMqTransport) => closeConnectionsNamed(connectionNames.get(t)!, 'test');
  const adminChannel = async () => {
    admin ??= await amqp.connect(RABBITMQ_URL);
    admin.on('error', () => undefined);
    const ch = await admin.createChannel();
    ch.on('error', () => undefined);
    return ch;
  };

  afterEach(async () => {
    for (const t of transports.splice(0)) await t.close();
    if (admin) {
      await admin.close().catch(() => undefined);
      admin = undefined;
    }
    const cleanup = await amqp.connect(RABBITMQ_URL);
    for (const q of queues) {
      const ch = await cleanup.createChannel();
      ch.on('error', () => undefined);
      await ch.deleteQueue(q).catch(() => undefined);
      await ch.close().catch(() => undefined);
    }
    queues.clear();
    await cleanup.close();
  });

  it('brings a 1 s retry back after about 1 s even when a 5 min retry was queued first', async () => {
    const t = open();
    const queue = queueName('order');
    const arrivals: { id: string; at: number }[] = [];
    const firsts: Delivery[] = [];
    await t.consume(
      queue,
      (d) => {
        if (d.headers['round'] === '2') {
          arrivals.push({ id: d.id, at: Date.now() });
          void d.ack();
        } else firsts.push(d);
      },
      { prefetch: 10 },
    );
    await t.send(queue, { id: 'five-minutes', body: text('l'), headers: {} });
    await t.send(queue, { id: 'one-second', body: text('s'), headers: {} });
    await waitFor(() => firsts.length === 2, 5_000, 'both first deliveries');
    const byId = new Map(firsts.map((d) => [d.id, d]));
    await byId.get('five-minutes')!.retryLater(300_000, { round: '2' });
    const scheduledAt = Date.now();
    await byId.get('one-second')!.retryLater(1_000, { round: '2' });
    await waitFor(() => arrivals.length === 1, 30_000, 'the 1 s retry');
    const took = arrivals[0]!.at - scheduledAt;
    // Never early, and not held behind the 5 min retry: it comes back first, long before that one is due.
    expect(arrivals[0]!.id).toBe('one-second');
    expect(took).toBeGreaterThanOrEqual(1_000);
    expect(took).toBeLessThan(30_000);
  });

  it('loses nothing when the broker closes its connection mid-stream, and reconnects', async () => {
    const t = open();
    const queue = queueName('stream');
    const total = 2_000;
    const acked = new Map<string, number>();
    const stale: unknown[] = [];
    let handled = 0;
    let redelivered = 0;
    let handledAtLoss = -1;
    let killed: Promise<number> | undefined;
    for (let i = 0; i < total; i++) await t.send(queue, { id: `s-${i}`, body: text(String(i)), headers: {} });
    // Looked up before the stream starts, so the cut lands mid-stream: one CLI call, not two. The consume connection is opened first.
    await t.connect();
    const connectionPids = await connectionPidsNamed(connectionNames.get(t)!);
    const reconnected = nextEvent(t, 'connected', 60_000);
    t.once('disconnected', () => (handledAtLoss = handled));
    await t.consume(
      queue,
      (d) => {
        handled++;
        if ((d as RabbitMqDelivery).redelivered) redelivered++;
        if (handled === 100) killed = closeConnections(connectionPids, 'test');
        void (async () => {
          await sleep(20 + Math.floor(Math.random() * 20));
          try {
            // Every third message fails once and comes back after up to 200 ms.
            if (d.headers['retried'] !== '1' && Number(d.id.slice(2)) % 3 === 0) {
              await d.retryLater(Math.floor(Math.random() * 200), { retried: '1' });
            } else {
              await d.ack();
              acked.set(d.id, (acked.get(d.id) ?? 0) + 1);
            }
          } catch (error) {
            stale.push(error);
          }
        })();
      },
      { prefetch: 20 },
    );
    await waitFor(() => killed !== undefined, 30_000, 'the connection kill');
    await killed;
    const event = await reconnected;
    expect(event.reconnect).toBe(true);
    await waitFor(() => acked.size === total, 60_000, `all ${total} ids acked (have ${acked.size})`);
    await sleep(500);
    const duplicates = [...acked.values()].reduce((n, c) => n + c - 1, 0);
    console.info(
      `connection kill after ${handledAtLoss} deliveries: ${total} ids acked, ${duplicates} duplicate acks, ` +
        `${redelivered} redeliveries, ${stale.length} stale settlements, stats ${JSON.stringify(t.stats)}`,
    );
    // The kill landed mid-stream, with deliveries in flight that the broker gave back.
    expect(handledAtLoss).toBeGreaterThan(0);
    expect(handledAtLoss).toBeLessThan(total);
    expect(redelivered).toBeGreaterThan(0);
    expect(stale.length).toBeGreaterThan(0);
    expect(stale.every((e) => e instanceof StaleDeliveryError)).toBe(true);
    expect(acked.size).toBe(total);
    expect(t.stats.reconnects).toBe(1);
    expect(t.stats.connectionLosses).toBe(1);
    const ch = await adminChannel();
    expect((await ch.checkQueue(queue)).messageCount).toBe(0);
  });

  it('rejects settling a delivery from a dead channel and gets it back by redelivery', async () => {
    const t = open();
    const queue = queueName('dead-channel');
    const got: Delivery[] = [];
    await t.consume(queue, (d) => got.push(d), { prefetch: 5 });
    await t.send(queue, { id: 'dc-1', body: text('x'), headers: { h: 'v' } });
    await t.send(queue, { id: 'dc-2', body: text('y'), headers: {} });
    await waitFor(() => got.length === 2, 5_000, 'the first deliveries');
    const lost = nextEvent(t, 'disconnected');
    const back = nextEvent(t, 'connected', 30_000);
    await cut(t);
    await lost;
    await expect(got[0]!.ack()).rejects.toBeInstanceOf(StaleDeliveryError);
    // A retry of a delivery from the dead channel publishes no copy: the broker redelivers the original.
    await expect(got[1]!.retryLater(10, { copy: '1' })).rejects.toThrow(/no copy was published/);
    expect(t.stats.staleSettlements).toBe(2);
    await back;
    await waitFor(() => got.length === 4, 10_000, 'the redeliveries');
    const again = got.slice(2).sort((x, y) => x.id.localeCompare(y.id));
    expect(again.map((d) => d.id)).toEqual(['dc-1', 'dc-2']);
    expect(again[0]!.headers['h']).toBe('v');
    expect(again.every((d) => d.deliveryCount === 2 && d.headers['copy'] === undefined)).toBe(true);
    for (const d of again) await d.ack();
    await sleep(300);
    expect(got).toHaveLength(4);
  });

  it('counts the duplicate window: copy confirmed, connection killed before the ack, message exists twice', async () => {
    const windows: RabbitMqTransportEvents['duplicateWindow'][] = [];
    let armed = true;
    const t = open({
      faults: {
        afterCopyConfirmed: async () => {
          if (!armed) return;
          armed = false;
          const lost = nextEvent(t, 'disconnected');
          await cut(t);
          await lost;
        },
      },
    });
    t.on('duplicateWindow', (w) => windows.push(w));
    let reconnected = false;
    t.on('connected', (e) => (reconnected ||= e.reconnect));
    const queue = queueName('dup');
    // Deliveries on the first connection, and on the one after the cut.
    const before: Delivery[] = [];
    const after: Delivery[] = [];
    await t.consume(queue, (d) => (reconnected ? after : before).push(d), { prefetch: 5 });
    await t.send(queue, { id: 'dup-1', body: text('x'), headers: {} });
    await waitFor(() => before.length === 1, 5_000, 'the first delivery');
    // The delay usually outlasts the cut, so the copy first arrives on the new connection; if the cut
    // is slower, the copy is delivered on the first connection too and the broker gives it back with the original.
    await expect(before[0]!.retryLater(4_000, { copy: 'retry' })).rejects.toThrow(/exists twice/);
    expect(t.stats.duplicateWindow).toBe(1);
    expect(windows).toEqual([{ id: 'dup-1', queue, kind: 'retry' }]);
    await waitFor(() => after.length >= 2, 30_000, 'the redelivered original and the retry copy');
    await sleep(300);
    // The message exists twice, and only twice: the original, given back unacked, and the retry copy.
    expect(after).toHaveLength(2);
    expect(after.map((d) => d.id)).toEqual(['dup-1', 'dup-1']);
    const copies = after.filter((d) => d.headers['copy'] === 'retry');
    const originals = after.filter((d) => d.headers['copy'] === undefined);
    expect(copies).toHaveLength(1);
    expect(originals).toHaveLength(1);
    expect((originals[0] as RabbitMqDelivery).redelivered).toBe(true);
    // The copy is a new message: redelivered only if the first connection had already received it.
    const copyBeforeCut = before.slice(1);
    expect(copyBeforeCut.every((d) => d.headers['copy'] === 'retry')).toBe(true);
    expect((copies[0] as RabbitMqDelivery).redelivered).toBe(copyBeforeCut.length === 1);
    for (const d of after) await d.ack();
  });

  it('warns at start-up when a quorum queue delivery limit is below the expected deliveries', async () => {
    const logger = recordingLogger();
    const t = open({ queueType: 'quorum', deliveryLimit: 2, logger });
    const warnings: string[] = [];
    t.on('warning', (w) => warnings.push(w.message));
    const queue = queueName('limit');
    const sub = await t.consume(queue, () => undefined, { prefetch: 1, expectedDeliveries: 6 });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/x-delivery-limit 2 \(3 deliveries per message\).*may need 6/);
    expect(logger.lines.some((l) => l.level === 'warn' && l.fields['deliveryLimit'] === 2)).toBe(true);
    await sub.close();

    // Enough headroom: no warning.
    const quiet = open({ queueType: 'quorum', deliveryLimit: 2 });
    const none: string[] = [];
    quiet.on('warning', (w) => none.push(w.message));
    await quiet.consume(queue, () => undefined, { prefetch: 1, expectedDeliveries: 1 });
    expect(none).toEqual([]);
  });

  it('reads the delivery limit of a quorum queue declared elsewhere', async () => {
    const queue = queueName('limit-passive');
    const ch = await adminChannel();
    await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum', 'x-delivery-limit': 1 } });
    const logger = recordingLogger();
    const t = open({ queueType: 'quorum', logger });
    const warnings: string[] = [];
    t.on('warning', (w) => warnings.push(w.message));
    await t.consume(queue, () => undefined, { prefetch: 1, expectedDeliveries: 3 });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/x-delivery-limit 1 \(2 deliveries per message\)/);
    expect(logger.lines.some((l) => /exists with other arguments/.test(l.message))).toBe(true);
  });

  it('works on quorum queues, with the broker counting deliveries', async () => {
    const t = open({ queueType: 'quorum' });
    expect(t.capabilities.nativeDeliveryCount).toBe(true);
    const queue = queueName('quorum');
    const errorQueue = queueName('quorum-error');
    const got: Delivery[] = [];
    await t.consume(queue, (d) => got.push(d), { prefetch: 5 });
    await t.send(queue, { id: 'q-1', body: text('x'), headers: {} });
    await waitFor(() => got.length === 1, 5_000, 'first');
    expect(got[0]!.deliveryCount).toBe(1);
    await got[0]!.release();
    await waitFor(() => got.length === 2, 5_000, 'after release');
    expect(got[1]!.deliveryCount).toBe(2);
    await got[1]!.release();
    await waitFor(() => got.length === 3, 5_000, 'after second release');
    expect(got[2]!.deliveryCount).toBe(3);
    await got[2]!.retryLater(50, { n: '1' });
    await waitFor(() => got.length === 4, 5_000, 'retry copy');
    // A delayed retry is a new message: its count starts again.
    expect(got[3]!.deliveryCount).toBe(1);
    expect(got[3]!.headers['n']).toBe('1');
    await got[3]!.deadLetter(errorQueue, { why: 'test' });
    const ch = await adminChannel();
    const e = await ch.get(errorQueue, { noAck: true });
    expect(e && e.properties.messageId).toBe('q-1');
    expect(e && e.properties.headers?.['why']).toBe('test');
  });

  it('decodes hostile headers defensively and keeps consuming', async () => {
    const t = open();
    const queue = queueName('hostile');
    const ch = await adminChannel();
    await ch.assertQueue(queue, { durable: true });
    const hostile = JSON.parse('{"__proto__": {"polluted": "yes"}, "constructor": "evil", "prototype": "p"}') as Record<string, unknown>;
    Object.assign(hostile, {
      str: 'plain',
      num: 42,
      float: 1.5,
      big: 2 ** 40,
      bool: true,
      utf8buf: Buffer.from('hello'),
      binbuf: Buffer.from([0xff, 0xfe, 0x00]),
      arr: [1, 'two', { three: 3 }],
      obj: { nested: { deeper: 'x' } },
      nul: null,
      stamp: { '!': 'timestamp', value: 1_700_000_000 },
      huge: 'é'.repeat(20_000),
      'x-death': [{ count: 9, reason: 'expired', queue: 'nowhere' }],
      'x-first-death-queue': 'nowhere',
      'redeliver-rmq-due-at': 'not a number',
    });
    ch.sendToQueue(queue, Buffer.from('hostile'), { headers: hostile });
    ch.sendToQueue(queue, Buffer.from('no id'), { headers: { a: 'b' } });
    ch.sendToQueue(queue, Buffer.from('after'), { messageId: 'after', headers: { ok: 'yes' } });
    const got: Delivery[] = [];
    await t.consume(queue, (d) => got.push(d), { prefetch: 10 });
    await waitFor(() => got.length === 3, 5_000, 'three deliveries');
    const [h, noId, after] = got as [Delivery, Delivery, Delivery];
    expect(Object.getPrototypeOf(h.headers)).toBeNull();
    expect(h.headers['polluted']).toBeUndefined();
    expect(Object.keys(h.headers).sort()).toEqual(['big', 'bool', 'float', 'huge', 'num', 'stamp', 'str', 'utf8buf']);
    expect(h.headers['num']).toBe('42');
    expect(h.headers['float']).toBe('1.5');
    expect(h.headers['big']).toBe(String(2 ** 40));
    expect(h.headers['bool']).toBe('true');
    expect(h.headers['utf8buf']).toBe('hello');
    expect(h.headers['stamp']).toBe('1700000000');
    expect(Buffer.byteLength(h.headers['huge']!)).toBeLessThanOrEqual(HEADER_LIMITS.maxValueBytes);
    expect(h.headers['huge']).toBe('é'.repeat(HEADER_LIMITS.maxValueBytes / 2));
    expect(t.stats.sanitizedHeaders).toBe(1);
    // No message id: a stable one derived from body and headers, the same on redelivery.
    expect(noId.id).toMatch(/^sha256-[0-9a-f]{32}$/);
    const firstId = noId.id;
    await noId.release();
    await waitFor(() => got.length === 4, 5_000, 'the redelivery');
    expect(got[3]!.id).toBe(firstId);
    expect(after.id).toBe('after');
    expect(after.headers['ok']).toBe('yes');
    // The hostile message can still be retried and dead-lettered.
    await h.retryLater(5, { ...h.headers, again: '1' });
    await waitFor(() => got.length === 5, 5_000, 'the hostile retry copy');
    expect(got[4]!.headers['huge']).toBe(h.headers['huge']);
    for (const d of [got[3]!, after, got[4]!]) await d.ack();
  });

  it('caps what a forged due time can add to the requested delay', async () => {
    const t = open();
    const queue = queueName('forged');
    const ch = await adminChannel();
    await ch.assertQueue(queue, { durable: true });
    const got: { d: Delivery; at: number }[] = [];
    await t.consume(queue, (d) => got.push({ d, at: Date.now() }), { prefetch: 10 });
    const sentAt = Date.now();
    ch.sendToQueue(queue, Buffer.from('f'), {
      messageId: 'forged',
      headers: { 'redeliver-rmq-due-at': String(Date.now() + 3_600_000), 'redeliver-rmq-delay': '100', k: 'v' },
    });
    await waitFor(() => got.length === 1, 30_000, 'the forged message');
    // Held for the requested 100 ms, not the forged hour.
    expect(got[0]!.at - sentAt).toBeGreaterThanOrEqual(100);
    expect(got[0]!.at - sentAt).toBeLessThan(30_000);
    expect(t.stats.rescheduledEarly).toBe(1);
    expect(got[0]!.d.headers['k']).toBe('v');
    expect(got[0]!.d.headers['redeliver-rmq-due-at']).toBeUndefined();
    await got[0]!.d.ack();
  });

  it('keeps the header table bounded over 1,000 retry cycles', async () => {
    const t = open();
    const queue = queueName('cycles');
    const sizes: number[] = [];
    const cycles = 1_000;
    await t.consume(
      queue,
      (d) => {
        sizes.push((d as RabbitMqDelivery).rawHeaderBytes);
        const n = Number(d.headers['cycle'] ?? '0');
        if (n >= cycles) {
          void d.ack();
          return;
        }
        // Pass every received header back, as an endpoint adding its retry state does.
        void d.retryLater(n % 2, { ...d.headers, cycle: String(n + 1) });
      },
      { prefetch: 1 },
    );
    await t.send(queue, { id: 'cycler', body: text('x'), headers: { app: 'a', cycle: '0' } });
    await waitFor(() => sizes.length === cycles + 1, 60_000, `${cycles} cycles (at ${sizes.length})`);
    const early = Math.max(...sizes.slice(2, 100));
    const late = Math.max(...sizes.slice(cycles - 100));
    console.info(`header table bytes: first ${sizes[0]}, max of cycles 2-100 ${early}, max of last 100 ${late}`);
    // Only the cycle counter's digits may grow (from 2 to 4 digits).
    expect(late).toBeLessThanOrEqual(early + 4);
    expect(Math.max(...sizes)).toBeLessThan(1_000);
  });

  it('rejects a publish with ConfirmTimeoutError, then PublishBlockedError at the gate, while the broker blocks publishing, rather than hang', async () => {
    // A memory alarm blocks every publisher of a broker: it runs on a node of the test's own, never the shared one.
    const node = await RabbitCluster.start({ namePrefix: 'rmqalarm' });
    try {
      const t = open({ url: node.url(), confirmTimeoutMs: 1_000 });
      const queue = queueName('blocked');
      // Outside the alarm, the 1 s confirm timeout also bounds the first connection and the declarations on
      // the new node, which a loaded machine can outlast: such a send is sent again (a second copy is harmless here).
      const sendUnblocked = async (id: string) => {
        for (let attempt = 1; ; attempt++) {
          const error = await t.send(queue, { id, body: text('x'), headers: {} }).then(() => undefined, (e: unknown) => e);
          if (error === undefined) return;
          if (!(error instanceof ConfirmTimeoutError) || attempt === 10) throw error;
        }
      };
      await sendUnblocked('before');
      const timeoutsBefore = t.stats.confirmTimeouts;
      const blocked = nextEvent(t, 'blocked', 20_000, 'publish');
      // The broker lifts the block while rabbitmqctl is still running: listen first.
      const unblocked = nextEvent(t, 'unblocked', 60_000, 'publish');
      unblocked.catch(() => undefined);
      try {
        await node.memoryAlarm(true);
        // The broker blocks a connection when it next publishes: this publish is never confirmed.
        let started = Date.now();
        await expect(t.send(queue, { id: 'during-1', body: text('x'), headers: {} })).rejects.toBeInstanceOf(ConfirmTimeoutError);
        let waited = Date.now() - started;
        // Bounded by the 1 s confirm timeout while the alarm lasts (it is only cleared below): not a hang.
        expect(waited).toBeGreaterThanOrEqual(990);
        expect(waited).toBeLessThan(15_000);
        expect((await blocked).reason).toMatch(/memory/);
        // Now the transport knows: the next publish waits at the gate, is never written, and fails as throttled.
        started = Date.now();
        await expect(t.send(queue, { id: 'during-2', body: text('x'), headers: {} })).rejects.toBeInstanceOf(PublishBlockedError);
        waited = Date.now() - started;
        expect(waited).toBeGreaterThanOrEqual(990);
        expect(waited).toBeLessThan(15_000);
        expect(t.stats.confirmTimeouts - timeoutsBefore).toBe(2);
      } finally {
        await node.memoryAlarm(false);
      }
      await unblocked;
      await sendUnblocked('after');
      const admin = await amqp.connect(node.url());
      const ch = await admin.createChannel();
      const ids: string[] = [];
      for (let m = await ch.get(queue, { noAck: true }); m; m = await ch.get(queue, { noAck: true })) ids.push(String(m.properties.messageId));
      await admin.close();
      // A timed-out publish may or may not be stored; one held at the gate never is.
      expect(ids).toContain('before');
      expect(ids).toContain('after');
      expect(ids).not.toContain('during-2');
    } finally {
      for (const t of transports.splice(0)) await t.close();
      await node.stop();
    }
  }, 120_000);

  it('pause cancels the consumer and resume keeps unsettled deliveries within the prefetch', async () => {
    const t = open();
    const queue = queueName('pause');
    const got: Delivery[] = [];
    let unsettled = 0;
    let maxUnsettled = 0;
    const sub: Subscription = await t.consume(
      queue,
      (d) => {
        got.push(d);
        unsettled++;
        maxUnsettled = Math.max(maxUnsettled, unsettled);
      },
      { prefetch: 3 },
    );
    const ack = async (d: Delivery) => {
      // Count it settled first: acking may hand out the next delivery before ack() returns.
      unsettled--;
      await d.ack();
    };
    for (let i = 0; i < 12; i++) await t.send(queue, { id: `p-${i}`, body: text(String(i)), headers: {} });
    await waitFor(() => got.length === 3, 5_000, 'three deliveries');
    await sub.pause();
    await ack(got[0]!);
    await sleep(300);
    expect(got).toHaveLength(3);
    await sub.resume();
    await waitFor(() => got.length === 4, 5_000, 'one more after resume');
    await sleep(300);
    expect(got).toHaveLength(4);
    for (let i = 1; i < 12; i++) {
      await waitFor(() => got.length > i, 5_000, `delivery ${i}`);
      await ack(got[i]!);
    }
    expect(maxUnsettled).toBeLessThanOrEqual(3);
    expect(new Set(got.map((d) => d.id)).size).toBe(12);
  });

  it('coalesced acks never settle a message still being handled', async () => {
    const t = open();
    const queue = queueName('coalesce');
    const got: Delivery[] = [];
    await t.consume(queue, (d) => got.push(d), { prefetch: 10 });
    for (let i = 0; i < 6; i++) await t.send(queue, { id: `c-${i}`, body: text(String(i)), headers: {} });
    await waitFor(() => got.length === 6, 5_000, 'six deliveries');
    // Ack everything but the second message, in an order that leaves a gap.
    for (const d of [got[5]!, got[0]!, got[3]!, got[2]!, got[4]!]) await d.ack();
    await sleep(200);
    await t.close();
    const again = open();
    const back: Delivery[] = [];
    await again.consume(queue, (d) => back.push(d), { prefetch: 10 });
    await waitFor(() => back.length === 1, 5_000, 'the unsettled message');
    await sleep(300);
    expect(back.map((d) => d.id)).toEqual(['c-1']);
    expect(back[0]!.deliveryCount).toBe(2);
    await back[0]!.ack();
  });

  it('lets two endpoints share the delay topology and a queue (same arguments, declared idempotently)', async () => {
    const a = open();
    const b = open();
    const queue = queueName('shared');
    const got: Delivery[] = [];
    await a.consume(queue, (d) => got.push(d), { prefetch: 5 });
    await b.consume(queue, (d) => got.push(d), { prefetch: 5 });
    await a.send(queue, { id: 'sh-1', body: text('x'), headers: {} });
    await waitFor(() => got.length === 1, 5_000, 'first');
    await got[0]!.retryLater(20, { r: '1' });
    await waitFor(() => got.length === 2, 5_000, 'retry');
    expect(got[1]!.headers['r']).toBe('1');
    await got[1]!.ack();
    expect(a.topology.levels).toBe(28);
    expect(a.topology.level(27)).toBe('redeliver.delay-quorum.27');
  });
});
