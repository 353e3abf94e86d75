/**
 * What the JetStream transport does beyond the conformance suite, on the
 * real server: leases that run out and are extended, a deleted stream,
 * messages not written by redeliver, a bounded queue, messages too large,
 * headers NATS cannot carry as they are, delayed retries that outlive their
 * consumer, a wall clock that jumps, and a consumer whose max_deliver would
 * end retries. Every test works under a stream prefix of its own.
 */
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { AckPolicy, jetstream, jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { classifyByBrand } from '../../src/transport/send-errors.js';
import { systemClock, type Clock } from '../../src/time/clock.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { isDeliveryGone } from '../../src/transport/delivery-gone.js';
import type { Delivery } from '../../src/transport/types.js';
import { JetStreamTransport, MessageTooLargeError, QueueFullError, type JetStreamTransportOptions } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';
import { recordingLogger } from '../support/recording-logger.js';

const skip = await natsSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(predicate: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!predicate()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(5);
  }
}

describe.skipIf(Boolean(skip))('the JetStream transport', () => {
  const prefix = jetStreamPrefix('jt');
  const cleanups: (() => Promise<unknown>)[] = [];
  let nc: NatsConnection;
  let jsm: JetStreamManager;
  let n = 0;
  const queue = (label: string) => `${label}-${++n}`;
  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL, name: `${prefix}-admin` });
    jsm = await jetstreamManager(nc);
  });
  afterAll(async () => {
    await nc?.close();
    await deleteJetStreamPrefix(prefix);
  });
  const open = (options: JetStreamTransportOptions = {}) => {
    const t = new JetStreamTransport({ servers: NATS_URL, prefix, connectionName: `${prefix}-conn`, ...options });
    cleanups.push(() => t.close());
    return t;
  };
  const collect = () => {
    const got: { delivery: Delivery; at: number }[] = [];
    return { got, listener: (delivery: Delivery) => got.push({ delivery, at: Date.now() }) };
  };
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('a delivery whose lease ran out goes to another consumer with a higher count, and the first holder can no longer settle it', async () => {
    const t = open();
    const q = queue('lease');
    await t.send(q, { id: 'l-1', body: text('x'), headers: {} });
    const first = collect();
    await t.consume(q, first.listener, { prefetch: 1, leaseMs: 600 });
    await waitFor(() => first.got.length === 1, 5_000, 'the first delivery');
    const second = collect();
    await open().consume(q, second.listener, { prefetch: 1, leaseMs: 600 });
    await waitFor(() => second.got.length === 1, 5_000, 'the redelivery to the other consumer after the lease ran out');
    const stale = first.got[0]!.delivery;
    const fresh = second.got[0]!.delivery;
    expect(fresh.deliveryCount).toBe(2);
    const refused = await stale.retryLater(10, {}).catch((e: unknown) => e);
    expect(isDeliveryGone(refused)).toBe(true);
    await fresh.ack();
    await sleep(400);
    expect(first.got).toHaveLength(1);
    expect(second.got).toHaveLength(1);
    const info = await jsm.streams.info(t.names.of(q).stream);
    expect(info.state.messages).toBe(0);
    const delays = await jsm.streams.info(t.names.delayStream);
    expect(delays.state.messages).toBe(0);
  });

  /**
   * A consumer whose pull request for two was sent before its prefetch went
   * down to one: both messages come, one waits in the buffer. Time moves on
   * the fake clock only; the server's own ack_wait (2 s) runs on real time.
   */
  async function oneWaitingInTheBuffer(label: string) {
    const clock = new FakeClock(Date.now());
    const t = open({ clock });
    const q = queue(label);
    const c = collect();
    const sub = await t.consume(q, c.listener, { prefetch: 2, leaseMs: 2_000 });
    await sub.setPrefetch(1);
    await t.send(q, { id: `${label}-1`, body: text('1'), headers: {} });
    await t.send(q, { id: `${label}-2`, body: text('2'), headers: {} });
    await waitFor(() => c.got.length === 1, 5_000, 'the first delivery');
    // The second message has come too and waits for a free slot.
    await sleep(300);
    expect(c.got).toHaveLength(1);
    return { clock, c };
  }

  it('a message that waited in the buffer is handed out with what is left of the lease that began when it was pulled', async () => {
    const { clock, c } = await oneWaitingInTheBuffer('buffered');
    await clock.advance(1_000);
    await c.got[0]!.delivery.ack();
    await waitFor(() => c.got.length === 2, 5_000, 'the buffered message');
    await clock.advance(900);
    // Pulled 1.9 s ago under a 2 s ack_wait (less the 200 ms margin): its lease ran out, whatever its time in the handler.
    const refused = await c.got[1]!.delivery.ack().catch((e: unknown) => e);
    expect(isDeliveryGone(refused)).toBe(true);
  });

  it('a message whose lease ran out in the buffer is not handed out; the server offers it again', async () => {
    const { clock, c } = await oneWaitingInTheBuffer('stale');
    await clock.advance(4_000);
    // The handed-out one's lease ran out too: refused, it frees its slot.
    expect(isDeliveryGone(await c.got[0]!.delivery.ack().catch((e: unknown) => e))).toBe(true);
    await sleep(300);
    expect(c.got).toHaveLength(1);
    for (const n of [2, 3]) {
      await waitFor(() => c.got.length === n, 10_000, `redelivery ${n - 1} after the server's ack_wait`);
      await c.got[n - 1]!.delivery.ack();
    }
    expect(c.got.slice(1).map((g) => [g.delivery.id, g.delivery.deliveryCount]).sort()).toEqual([['stale-1', 2], ['stale-2', 2]]);
  });

  it('extendLease keeps a delivery from other consumers past its lease, then acks it', async () => {
    const t = open();
    const q = queue('extend');
    await t.send(q, { id: 'e-1', body: text('x'), headers: {} });
    const c = collect();
    await t.consume(q, c.listener, { prefetch: 2, leaseMs: 600 });
    await waitFor(() => c.got.length === 1, 5_000, 'the delivery');
    await c.got[0]!.delivery.extendLease!(2_000);
    await sleep(1_500);
    expect(c.got).toHaveLength(1);
    await c.got[0]!.delivery.ack();
    await sleep(800);
    expect(c.got).toHaveLength(1);
  });

  it('keeps consuming when its stream is deleted and made again', async () => {
    const t = open({ heartbeatMs: 200, pullExpiresMs: 1_000 });
    const q = queue('deleted');
    const c = collect();
    await t.consume(q, c.listener, { prefetch: 5 });
    await t.send(q, { id: 'd-1', body: text('1'), headers: {} });
    await waitFor(() => c.got.length === 1, 5_000, 'the first message');
    await c.got[0]!.delivery.ack();
    await jsm.streams.delete(t.names.of(q).stream);
    // As an operator would: the server needs a moment to remove a stream's files before one of the same name is made.
    await sleep(1_500);
    const sender = open();
    let sent = false;
    for (let i = 0; i < 50 && !sent; i++) {
      sent = await sender.send(q, { id: 'd-2', body: text('2'), headers: {} }).then(() => true, () => false);
      if (!sent) await sleep(100);
    }
    expect(sent).toBe(true);
    await waitFor(() => c.got.length === 2, 15_000, 'a message sent after the stream was made again');
    expect(c.got[1]!.delivery.id).toBe('d-2');
    await c.got[1]!.delivery.ack();
  });

  it('delivers a message not written by redeliver with its Nats-Msg-Id and headers, and logs why', async () => {
    const logger = recordingLogger();
    const t = open({ logger });
    const q = queue('foreign');
    const c = collect();
    await t.consume(q, c.listener, { prefetch: 5 });
    const h = natsHeaders();
    h.set('x-app', 'yes');
    await jetstream(nc).publish(t.names.of(q).subject, text('raw'), { headers: h, msgID: 'their-id' });
    await jetstream(nc).publish(t.names.of(q).subject, text('bare'));
    await waitFor(() => c.got.length === 2, 5_000, 'both foreign messages');
    const [withId, bare] = c.got.map((g) => g.delivery);
    expect(withId!.id).toBe('their-id');
    expect(withId!.headers).toEqual({ 'x-app': 'yes' });
    expect(bare!.id).toBe(`${t.names.of(q).stream}:2`);
    expect(decode(bare!.body)).toBe('bare');
    expect(logger.lines.some((l) => l.level === 'warn' && /not written by redeliver/.test(l.message))).toBe(true);
    await withId!.ack();
    await bare!.ack();
  });

  it('refuses a send to a queue at its maxLength with a throttling error, and stores nothing', async () => {
    const t = open({ maxLength: 2 });
    const q = queue('bounded');
    await t.send(q, { id: 'b-1', body: text('1'), headers: {} });
    await t.send(q, { id: 'b-2', body: text('2'), headers: {} });
    const error = await t.send(q, { id: 'b-3', body: text('3'), headers: {} }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(QueueFullError);
    expect(t.classifySendError(error)).toBe('throttled');
    expect((await jsm.streams.info(t.names.of(q).stream)).state.messages).toBe(2);
  });

  it('refuses a message larger than the server takes before sending it, as a fatal error', async () => {
    const t = open();
    const q = queue('large');
    const maxPayload = (await t.ready()).nc.info!.max_payload;
    const error = await t.send(q, { id: 'big', body: new Uint8Array(10), headers: { 'x-pad': 'h'.repeat(maxPayload) } }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MessageTooLargeError);
    expect(classifyByBrand(error)).toBe('fatal');
    expect(t.classifySendError(error)).toBe('fatal');
  });

  it('a second send of the same id within the duplicate window stores one message, and each replay of it one more', async () => {
    const t = open();
    const q = queue('dedup');
    await t.send(q, { id: 'same', body: text('1'), headers: {} });
    await t.send(q, { id: 'same', body: text('1'), headers: {} });
    expect((await jsm.streams.info(t.names.of(q).stream)).state.messages).toBe(1);
    // A replay of it (from an error queue or the error store) is a new send, once per replay.
    await t.send(q, { id: 'same', body: text('1'), headers: { 'redeliver-replay-count': '1' } });
    await t.send(q, { id: 'same', body: text('1'), headers: { 'redeliver-replay-count': '1' } });
    await t.send(q, { id: 'same', body: text('1'), headers: { 'redeliver-replay-count': '2' } });
    expect((await jsm.streams.info(t.names.of(q).stream)).state.messages).toBe(3);
  });

  it('carries multi-line and UTF-8 header values and odd queue names through a retry and a dead-letter', async () => {
    const t = open();
    const q = queue('odd.name *>');
    const errorQueue = `${q} errors`;
    const stack = 'Error: boom\n    at handler (app.ts:1:1)\r\n  ünïcødé ✓';
    await t.send(q, { id: 'id with spaces ✓', body: text('x'), headers: { note: ' padded ' } });
    const c = collect();
    await t.consume(q, c.listener, { prefetch: 1 });
    await waitFor(() => c.got.length === 1, 5_000, 'the message');
    expect(c.got[0]!.delivery.id).toBe('id with spaces ✓');
    expect(c.got[0]!.delivery.headers['note']).toBe(' padded ');
    await c.got[0]!.delivery.retryLater(50, { 'redeliver-failure-stack': stack });
    await waitFor(() => c.got.length === 2, 5_000, 'the retry');
    expect(c.got[1]!.delivery.headers['redeliver-failure-stack']).toBe(stack);
    await c.got[1]!.delivery.deadLetter(errorQueue, { 'redeliver-failure-stack': stack });
    const errors = collect();
    await t.consume(errorQueue, errors.listener, { prefetch: 1 });
    await waitFor(() => errors.got.length === 1, 5_000, 'the error entry');
    expect(errors.got[0]!.delivery.id).toBe('id with spaces ✓');
    expect(errors.got[0]!.delivery.headers['redeliver-failure-stack']).toBe(stack);
    await errors.got[0]!.delivery.ack();
  });

  it('delayed retries wait on the server while no consumer runs and come back to the next one, on time', async () => {
    const q = queue('outlive');
    const first = open();
    const c = collect();
    const sub = await first.consume(q, c.listener, { prefetch: 5 });
    await first.send(q, { id: 'o-1', body: text('x'), headers: {} });
    await waitFor(() => c.got.length === 1, 5_000, 'the message');
    const scheduledAt = Date.now();
    await c.got[0]!.delivery.retryLater(1_500, { attempt: '2' });
    await sub.close();
    await first.close();
    expect((await jsm.streams.info(first.names.delayStream)).state.messages).toBe(1);
    const second = open();
    const d = collect();
    await second.consume(q, d.listener, { prefetch: 5 });
    await waitFor(() => d.got.length === 1, 10_000, 'the retry in the next consumer');
    expect(d.got[0]!.at - scheduledAt).toBeGreaterThanOrEqual(1_500);
    expect(d.got[0]!.delivery.headers['attempt']).toBe('2');
    await d.got[0]!.delivery.ack();
  });

  it('times delayed retries by the server: a wall clock an hour ahead neither brings them early nor holds them', async () => {
    const ahead: Clock = { ...systemClock, now: () => Date.now() + 3_600_000 };
    const t = open({ clock: ahead });
    const q = queue('clock');
    await t.send(q, { id: 'c-1', body: text('x'), headers: {} });
    const c = collect();
    await t.consume(q, c.listener, { prefetch: 1 });
    await waitFor(() => c.got.length === 1, 5_000, 'the message');
    const scheduledAt = Date.now();
    await c.got[0]!.delivery.retryLater(800, {});
    await waitFor(() => c.got.length === 2, 5_000, 'the retry');
    const waited = c.got[1]!.at - scheduledAt;
    expect(waited).toBeGreaterThanOrEqual(799);
    expect(waited).toBeLessThan(1_500);
    await c.got[1]!.delivery.ack();
  });

  it('warns at start about a consumer whose max_deliver would end a message redeliver still retries', async () => {
    const logger = recordingLogger();
    const t = open({ logger });
    const q = queue('maxdeliver');
    const names = t.names.of(q);
    await t.send(q, { id: 'm-1', body: text('x'), headers: {} });
    await jsm.consumers.add(names.stream, { durable_name: 'redeliver', ack_policy: AckPolicy.Explicit, max_deliver: 3 });
    const c = collect();
    await t.consume(q, c.listener, { prefetch: 1 });
    await waitFor(() => c.got.length === 1, 5_000, 'the message');
    await c.got[0]!.delivery.ack();
    expect(logger.lines.some((l) => l.level === 'warn' && /max_deliver 3/.test(l.message))).toBe(true);
  });

  it('asks for the next messages while the acks of the last are on their way, and hands them out once the acks are confirmed', async () => {
    const own = await connect({ servers: NATS_URL, name: `${prefix}-pull-ahead` });
    cleanups.push(() => own.close());
    const t = new JetStreamTransport({ connection: own, prefix });
    cleanups.push(() => t.close());
    const q = queue('ahead');
    for (let i = 0; i < 10; i++) await t.send(q, { id: `a-${i}`, body: text(String(i)), headers: {} });
    const events: string[] = [];
    const publish = own.publish.bind(own);
    own.publish = (subject, payload, options) => {
      if (subject.includes('.CONSUMER.MSG.NEXT.')) events.push(`pull ${(JSON.parse(String(payload)) as { batch: number }).batch}`);
      publish(subject, payload, options);
    };
    // Runs before the transport hears of the flush's answer: the acks sent before it are confirmed.
    const flush = own.flush.bind(own);
    own.flush = () => {
      const answered = flush();
      answered.then(() => events.push('acks confirmed'), () => undefined);
      return answered;
    };
    const c = collect();
    await t.consume(q, (delivery) => {
      events.push('handed out');
      c.listener(delivery);
    }, { prefetch: 5 });
    await waitFor(() => c.got.length === 5, 5_000, 'the first five');
    await sleep(300);
    expect(c.got).toHaveLength(5);
    events.length = 0;
    await Promise.all(c.got.map(({ delivery }) => delivery.ack()));
    await waitFor(() => c.got.length === 10, 5_000, 'the next five');
    // The pull went out with the acks, before the server confirmed any; no sixth delivery before they were.
    expect(events[0]).toBe('pull 5');
    expect(events.indexOf('acks confirmed')).toBeGreaterThan(0);
    expect(events.indexOf('handed out')).toBeGreaterThan(events.indexOf('acks confirmed'));
    for (const { delivery } of c.got.slice(5)) await delivery.ack();
    expect(c.got.map((g) => g.delivery.id).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `a-${i}`).sort());
  });

  it('runs on a connection the application already has, and leaves it open when closed', async () => {
    const own = await connect({ servers: NATS_URL, name: `${prefix}-app` });
    const t = new JetStreamTransport({ connection: own, prefix });
    const q = queue('given');
    await t.send(q, { id: 'g-1', body: text('x'), headers: {} });
    const c = collect();
    await t.consume(q, c.listener, { prefetch: 1 });
    await waitFor(() => c.got.length === 1, 5_000, 'the message');
    await c.got[0]!.delivery.ack();
    await t.close();
    expect(own.isClosed()).toBe(false);
    await own.request('$JS.API.INFO', '', { timeout: 2_000 });
    await own.close();
  });
});
