/**
 * The conformance suite every transport passes, against the real broker.
 * A transport is done when it passes this file unchanged.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { Producer } from '../../src/producer/producer.js';
import type { Delivery, Subscription, Transport } from '../../src/transport/types.js';
import { describeDeadlineConformance } from './deadline-cases.js';
import { describeHostileFailureConformance } from './hostile-cases.js';
import { describeOneHolderConformance } from './holder-cases.js';
import { describeCopySizeConformance } from './size-cases.js';

export interface ConformanceTarget {
  /** Shown in the test names. */
  readonly name: string;
  /** A fresh transport for one test. */
  create(): Promise<Transport>;
  /** When set, the suite is skipped with this reason (a broker that is not running on a laptop). */
  readonly skip?: string | undefined;
  /**
   * Where the transport holds a connection: a fresh transport whose
   * connection the test can cut (through `test/support/tcp-proxy.ts`), for
   * the cases that need a reconnect. Absent: those cases are skipped, with
   * `noConnection` as the reason.
   */
  createCuttable?(): Promise<CuttableTransport>;
  /** Why the target has no {@link createCuttable}, shown in the skipped test's name (an in-process transport has no connection). */
  readonly noConnection?: string;
  /**
   * `true` where the broker limits a message's body and headers together,
   * so a copy carrying retry state and a failure story can be too large
   * where its original was not (see size-cases.ts); otherwise why not, the
   * reason that case is skipped with. Default: skipped, the body alone
   * being limited.
   */
  readonly limitsWholeMessage?: true | string;
}

/** A transport whose connection a test can cut, from {@link ConformanceTarget.createCuttable}. */
export interface CuttableTransport {
  readonly transport: Transport;
  /** Closes the transport's connections at once, as a failing network would, and says how many; the transport reconnects. */
  cut(): number;
  /** Whether a cut ends the leases of the deliveries held then, so that another consumer may have them at once (RabbitMQ: the connection is the lease). */
  readonly cutEndsLeases: boolean;
  /** Frees what cutting needs (the proxy); called after the transport is closed. */
  dispose(): Promise<void>;
}

const text = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * How early, at most, a delayed message may be handed out by the test's
 * clock (`Date.now()`, read before the send) and still count as on time:
 * due times are whole milliseconds of another clock (the transport's, the
 * Redis or NATS server's, truncated to the millisecond), and RabbitMQ hands
 * out a copy up to 1 ms early by its dueAt header. Anything earlier is a
 * delay not held.
 */
const DELAY_TOLERANCE_MS = 5;

/** Collects deliveries and lets a test wait for the n-th one. */
class Inbox {
  readonly items: { delivery: Delivery; at: number }[] = [];
  #waiters: { n: number; resolve: () => void }[] = [];

  readonly listener = (delivery: Delivery) => {
    this.items.push({ delivery, at: Date.now() });
    this.#waiters = this.#waiters.filter((w) => {
      if (this.items.length >= w.n) w.resolve();
      return this.items.length < w.n;
    });
  };

  async waitFor(n: number, timeoutMs = 10_000): Promise<Delivery[]> {
    if (this.items.length < n) {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`timed out waiting for ${n} deliveries, have ${this.items.length}`)), timeoutMs);
        this.#waiters.push({ n, resolve: () => { clearTimeout(timer); resolve(); } });
      });
    }
    return this.items.map((i) => i.delivery);
  }
}

export function describeTransportConformance(target: ConformanceTarget): void {
  describe.skipIf(Boolean(target.skip))(`transport conformance: ${target.name}`, () => {
    let transport: Transport | undefined;
    const subs: Subscription[] = [];

    const open = async () => {
      transport = await target.create();
      return transport;
    };
    const queueName = (label: string) => `conf-${label}-${randomUUID().slice(0, 8)}`;
    const consume = async (t: Transport, queue: string, inbox: Inbox, prefetch = 10) => {
      const sub = await t.consume(queue, inbox.listener, { prefetch, leaseMs: 30_000 });
      subs.push(sub);
      return sub;
    };

    afterEach(async () => {
      for (const sub of subs.splice(0)) await sub.close().catch(() => undefined);
      await transport?.close();
      transport = undefined;
    });

    it('delivers a sent message with its id, body and headers, once', async () => {
      const t = await open();
      const queue = queueName('send');
      await t.send(queue, { id: 'm-1', body: text('hello'), headers: { 'x-app': 'a', 'redeliver-test': '1' } });
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const [d] = await inbox.waitFor(1);
      expect(d!.id).toBe('m-1');
      expect(d!.queue).toBe(queue);
      expect(decode(d!.body)).toBe('hello');
      expect(d!.headers['x-app']).toBe('a');
      expect(d!.headers['redeliver-test']).toBe('1');
      expect(d!.deliveryCount).toBe(1);
      await d!.ack();
      await sleep(400);
      expect(inbox.items).toHaveLength(1);
    });

    it('keeps binary bodies byte for byte', async () => {
      const t = await open();
      const queue = queueName('binary');
      const body = new Uint8Array(256).map((_, i) => i);
      await t.send(queue, { id: 'bin', body, headers: {} });
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const [d] = await inbox.waitFor(1);
      expect(Array.from(d!.body)).toEqual(Array.from(body));
      await d!.ack();
    });

    it('retryLater brings back a copy with the new headers, never before its delay', async () => {
      const t = await open();
      const queue = queueName('later');
      await t.send(queue, { id: 'm-2', body: text('again'), headers: { 'redeliver-delayed-attempts': '0', keep: 'x' } });
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const [first] = await inbox.waitFor(1);
      const scheduledAt = Date.now();
      await first!.retryLater(400, { 'redeliver-delayed-attempts': '1' });
      const [, second] = await inbox.waitFor(2);
      const arrived = inbox.items[1]!.at;
      expect(arrived - scheduledAt).toBeGreaterThanOrEqual(399);
      expect(arrived - scheduledAt).toBeLessThan(3_000);
      expect(second!.id).toBe('m-2');
      expect(decode(second!.body)).toBe('again');
      expect(second!.headers['redeliver-delayed-attempts']).toBe('1');
      expect(second!.headers['keep']).toBeUndefined();
      await second!.ack();
      await sleep(300);
      expect(inbox.items).toHaveLength(2);
    });

    it('a short delay scheduled after a long one is not held behind it', async () => {
      const t = await open();
      const queue = queueName('order');
      await t.send(queue, { id: 'long', body: text('l'), headers: {} });
      await t.send(queue, { id: 'short', body: text('s'), headers: {} });
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const firstTwo = await inbox.waitFor(2);
      const byId = new Map(firstTwo.map((d) => [d.id, d]));
      const start = Date.now();
      await byId.get('long')!.retryLater(60_000, {});
      await byId.get('short')!.retryLater(300, {});
      const all = await inbox.waitFor(3);
      expect(all[2]!.id).toBe('short');
      expect(inbox.items[2]!.at - start).toBeLessThan(2_500);
      await all[2]!.ack();
    });

    it('delayed send: held at least its delay, and an undelayed message sent after it arrives first', async () => {
      const t = await open();
      const queue = queueName('delayed');
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const delayMs = 700;
      const sentAt = Date.now();
      await t.send(queue, { id: 'later', body: text('later'), headers: { keep: 'k' }, delayMs });
      await t.send(queue, { id: 'now', body: text('now'), headers: {} });
      const [first] = await inbox.waitFor(1);
      expect(first!.id).toBe('now');
      await first!.ack();
      const [, second] = await inbox.waitFor(2);
      expect(second!.id).toBe('later');
      expect(decode(second!.body)).toBe('later');
      expect(second!.headers['keep']).toBe('k');
      expect(second!.deliveryCount).toBe(1);
      expect(inbox.items[1]!.at).toBeGreaterThanOrEqual(sentAt + delayMs - DELAY_TOLERANCE_MS);
      await second!.ack();
    });

    it('delayed send: a producer holds deliverAt, and sends one already past at once', async () => {
      const t = await open();
      const queue = queueName('deliver-at');
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const producer = new Producer<string>({ transport: t });
      const at = new Date(Date.now() + 500);
      await producer.send(queue, 'future', { id: 'future', deliverAt: at });
      await producer.send(queue, 'past', { id: 'past', deliverAt: new Date(Date.now() - 60_000) });
      const [first] = await inbox.waitFor(1);
      expect(first!.id).toBe('past');
      await first!.ack();
      const [, second] = await inbox.waitFor(2);
      expect(second!.id).toBe('future');
      expect(inbox.items[1]!.at).toBeGreaterThanOrEqual(at.getTime() - DELAY_TOLERANCE_MS);
      await second!.ack();
    });

    it('delayed send: a delay beyond the transport limit is refused and nothing arrives', async () => {
      const t = await open();
      const queue = queueName('too-far');
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const max = t.limits?.maxDelayMs;
      expect(max).toBeGreaterThan(0);
      await expect(t.send(queue, { id: 'too-far', body: text('x'), headers: {}, delayMs: max! + 1 })).rejects.toThrow(RangeError);
      const producer = new Producer<string>({ transport: t });
      await expect(producer.send(queue, 'x', { id: 'too-far-too', delayMs: max! + 1 })).rejects.toThrow(/delayMs is beyond/);
      await expect(producer.send(queue, 'x', { id: 'negative', delayMs: -1 })).rejects.toThrow(/delayMs/);
      // The marker, sent after, is the first and only message: the refused ones were never sent.
      await t.send(queue, { id: 'marker', body: text('m'), headers: {} });
      const [d] = await inbox.waitFor(1);
      expect(inbox.items.map((i) => i.delivery.id)).toEqual(['marker']);
      await d!.ack();
    });

    it('deadLetter moves the message to the error queue with its headers', async () => {
      const t = await open();
      const queue = queueName('dl');
      const errorQueue = queueName('error');
      await t.send(queue, { id: 'm-3', body: text('poison'), headers: { a: '1' } });
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const [d] = await inbox.waitFor(1);
      await d!.deadLetter(errorQueue, { 'redeliver-failure-reason': 'unrecoverable', a: '1' });
      const errors = new Inbox();
      await consume(t, errorQueue, errors);
      const [e] = await errors.waitFor(1);
      expect(e!.id).toBe('m-3');
      expect(decode(e!.body)).toBe('poison');
      expect(e!.headers['redeliver-failure-reason']).toBe('unrecoverable');
      await e!.ack();
      await sleep(300);
      expect(inbox.items).toHaveLength(1);
    });

    it('never hands out more unsettled deliveries than the prefetch', async () => {
      const t = await open();
      const queue = queueName('prefetch');
      for (let i = 0; i < 6; i++) await t.send(queue, { id: `p-${i}`, body: text(String(i)), headers: {} });
      const inbox = new Inbox();
      await consume(t, queue, inbox, 2);
      await inbox.waitFor(2);
      await sleep(300);
      expect(inbox.items).toHaveLength(2);
      for (let done = 0; done < 6; done++) {
        await inbox.waitFor(done + 1);
        await inbox.items[done]!.delivery.ack();
      }
      expect(new Set(inbox.items.map((i) => i.delivery.id)).size).toBe(6);
    });

    it('pause stops new deliveries and resume restarts them', async () => {
      const t = await open();
      const queue = queueName('pause');
      const inbox = new Inbox();
      const sub = await consume(t, queue, inbox);
      await sub.pause();
      await t.send(queue, { id: 'while-paused', body: text('x'), headers: {} });
      await sleep(400);
      expect(inbox.items).toHaveLength(0);
      await sub.resume();
      const [d] = await inbox.waitFor(1);
      expect(d!.id).toBe('while-paused');
      await d!.ack();
    });

    it('setPrefetch lowers and raises how many unsettled deliveries are handed out', async () => {
      const t = await open();
      const queue = queueName('setprefetch');
      for (let i = 0; i < 8; i++) await t.send(queue, { id: `s-${i}`, body: text(String(i)), headers: {} });
      const inbox = new Inbox();
      const sub = await consume(t, queue, inbox, 1);
      await inbox.waitFor(1);
      await sleep(200);
      expect(inbox.items).toHaveLength(1);
      await sub.setPrefetch(3);
      await inbox.waitFor(3);
      await sleep(200);
      expect(inbox.items).toHaveLength(3);
      await sub.setPrefetch(1);
      for (const item of inbox.items.slice(0, 3)) await item.delivery.ack();
      await inbox.waitFor(4);
      await sleep(200);
      expect(inbox.items).toHaveLength(4);
      await sub.setPrefetch(10);
      await inbox.waitFor(8);
      for (const item of inbox.items.slice(3)) await item.delivery.ack();
      expect(new Set(inbox.items.map((i) => i.delivery.id)).size).toBe(8);
    });

    it('release gives the message back at once with a higher delivery count', async () => {
      const t = await open();
      const queue = queueName('release');
      await t.send(queue, { id: 'r-1', body: text('x'), headers: { h: 'v' } });
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const [first] = await inbox.waitFor(1);
      await first!.release();
      const [, again] = await inbox.waitFor(2);
      expect(again!.id).toBe('r-1');
      expect(again!.headers['h']).toBe('v');
      expect(again!.deliveryCount).toBeGreaterThanOrEqual(2);
      await again!.ack();
    });

    it('a settled delivery cannot be settled again into a second copy', async () => {
      const t = await open();
      const queue = queueName('once');
      await t.send(queue, { id: 'o-1', body: text('x'), headers: {} });
      const inbox = new Inbox();
      await consume(t, queue, inbox);
      const [d] = await inbox.waitFor(1);
      await d!.ack();
      await d!.retryLater(50, {}).catch(() => undefined);
      await d!.deadLetter(queueName('err'), {}).catch(() => undefined);
      await sleep(500);
      expect(inbox.items).toHaveLength(1);
    });

    it('messages left on the queue by a closed subscription reach the next one', async () => {
      const t = await open();
      const queue = queueName('handover');
      for (let i = 0; i < 5; i++) await t.send(queue, { id: `h-${i}`, body: text(String(i)), headers: {} });
      const first = new Inbox();
      const sub = await consume(t, queue, first, 1);
      const [d] = await first.waitFor(1);
      await d!.ack();
      await sub.close();
      const second = new Inbox();
      await consume(t, queue, second, 10);
      const settledIds = new Set([d!.id]);
      const seen = first.items.map((i) => i.delivery).filter((x) => x !== d);
      for (const x of seen) await x.release().catch(() => undefined);
      const rest = await second.waitFor(4);
      for (const x of rest) {
        settledIds.add(x.id);
        await x.ack();
      }
      expect(settledIds).toEqual(new Set(['h-0', 'h-1', 'h-2', 'h-3', 'h-4']));
    });
  });
  describeDeadlineConformance(target);
  describeHostileFailureConformance(target);
  describeOneHolderConformance(target);
  describeCopySizeConformance(target);
}
