/**
 * The JetStream error-queue operations and queue inspection against the
 * real server, on queue streams made and filled directly in the layout and
 * format the transport uses, each test under a prefix of its own.
 */
import { randomUUID } from 'node:crypto';
import { AckPolicy, DiscardPolicy, jetstream, jetstreamManager, RetentionPolicy, StorageType, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { connect, headers as natsHeaders, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { SendBackRefusedError } from '../../src/operations/send-back-destination.js';
import type { EntryResult, ErrorEntry } from '../../src/transport/error-queue.js';
import { decodeNatsHeaders, encodeNatsHeaders } from '../../src/transports/jetstream/codec.js';
import { JetStreamNames, QUEUE_CONSUMER, QUEUE_DESCRIPTION, type JetStreamQueueKind } from '../../src/transports/jetstream/names.js';
import { JetStreamOperations, SEND_BACK_CONCURRENCY } from '../../src/transports/jetstream/operations.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';

const skip = await natsSkipReason();

const text = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);

// Every case runs on error streams read with STREAM.MSG.GET (as streams made before they allowed direct gets) and with direct gets (as the transport makes them).
describe.skipIf(Boolean(skip)).each([{ reads: 'msg-get', direct: false }, { reads: 'direct', direct: true }])('JetStream error-queue operations and inspection (reads: $reads)', ({ direct }) => {
  let nc: NatsConnection;
  let js: JetStreamClient;
  let jsm: JetStreamManager;
  let prefix: string;
  let names: JetStreamNames;
  let ops: JetStreamOperations;
  const clock = new FakeClock(Date.parse('2030-01-02T03:04:05.000Z'));

  beforeAll(async () => {
    nc = await connect({ servers: NATS_URL, name: 'redeliver-test-jetstream-operations' });
    js = jetstream(nc);
    jsm = await jetstreamManager(nc);
  });

  afterAll(async () => {
    await nc?.close();
  });

  const open = () => {
    prefix = jetStreamPrefix('ops');
    names = new JetStreamNames(prefix);
    ops = new JetStreamOperations(async () => ({ js, jsm }), names, clock);
  };

  afterEach(async () => {
    expect(await deleteJetStreamPrefix(prefix)).toBeGreaterThanOrEqual(0);
  });

  /** Makes `queue`'s stream as the transport does. */
  async function makeQueue(queue: string, kind: JetStreamQueueKind): Promise<void> {
    const n = names.of(queue);
    await jsm.streams.add({
      name: n.stream,
      subjects: [n.subject],
      retention: RetentionPolicy.Workqueue,
      discard: DiscardPolicy.New,
      storage: StorageType.File,
      duplicate_window: 120_000_000_000,
      description: QUEUE_DESCRIPTION[kind],
      allow_direct: direct && kind === 'error',
    });
  }

  /** Publishes a dead-letter of `queue` to `errorQueue`'s stream in the transport's format; resolves its sequence. */
  async function deadLetter(errorQueue: string, id: string, headers: Record<string, string>, body = text(`body of ${id}`)): Promise<number> {
    const ack = await js.publish(names.of(errorQueue).subject, body, { headers: encodeNatsHeaders(id, headers), msgID: `${id}|e|${randomUUID()}` });
    return ack.seq;
  }

  /** A work queue and an error queue holding `count` dead-letters of it. */
  async function fill(count: number, options: { failureQueue?: string; makeWork?: boolean } = {}) {
    const queue = `work-${randomUUID().slice(0, 6)}`;
    const errorQueue = `error-${randomUUID().slice(0, 6)}`;
    if (options.makeWork ?? true) await makeQueue(queue, 'work');
    await makeQueue(errorQueue, 'error');
    const seqs: number[] = [];
    for (let i = 0; i < count; i++) {
      seqs.push(
        await deadLetter(errorQueue, `m-${i}`, {
          'x-n': String(i),
          [HEADER.attempts]: '3',
          [HEADER.failureQueue]: options.failureQueue ?? queue,
          [HEADER.failureReason]: 'retries-exhausted',
          [HEADER.failureMessage]: `boom ${i}`,
        }),
      );
    }
    return { queue, errorQueue, seqs };
  }

  /** Every message of `queue`'s stream, oldest first, read without taking it. */
  async function messagesOf(queue: string): Promise<({ seq: number; data: string } & ReturnType<typeof decodeNatsHeaders>)[]> {
    const n = names.of(queue);
    const info = await jsm.streams.info(n.stream);
    const out: Awaited<ReturnType<typeof messagesOf>> = [];
    if (info.state.messages === 0) return out;
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const m = await jsm.streams.getMessage(n.stream, { seq });
      if (m) out.push({ seq, data: decode(m.data), ...decodeNatsHeaders(m.header) });
    }
    return out;
  }

  async function scanAll(errorQueue: string, pageSize?: number): Promise<ErrorEntry[][]> {
    const pages: ErrorEntry[][] = [];
    for await (const page of ops.scan(errorQueue, pageSize === undefined ? {} : { pageSize })) pages.push(page);
    return pages;
  }

  async function streamsOfPrefix(): Promise<string[]> {
    const out: string[] = [];
    for await (const name of jsm.streams.names()) if (name.startsWith(`${prefix}_`)) out.push(name);
    return out.sort();
  }

  it('counts, pages oldest first from any offset (with and without gaps), and gets one entry by its sequence', async () => {
    open();
    const { errorQueue, seqs } = await fill(8);
    expect(await ops.count(errorQueue)).toBe(8);
    expect((await ops.browse(errorQueue, { offset: 0, limit: 3 })).map((e) => e.messageId)).toEqual(['m-0', 'm-1', 'm-2']);
    expect((await ops.browse(errorQueue, { offset: 6 })).map((e) => e.messageId)).toEqual(['m-6', 'm-7']);
    expect(await ops.browse(errorQueue, { offset: 8 })).toEqual([]);
    // A gap in the middle: offsets count entries, not sequences.
    expect(await ops.delete(errorQueue, String(seqs[2]))).toBe(true);
    expect((await jsm.streams.info(names.of(errorQueue).stream)).state.num_deleted).toBe(1);
    expect((await ops.browse(errorQueue, { offset: 2, limit: 2 })).map((e) => e.messageId)).toEqual(['m-3', 'm-4']);
    expect((await ops.browse(errorQueue, { offset: 6, limit: 5 })).map((e) => e.messageId)).toEqual(['m-7']);

    const one = await ops.get(errorQueue, String(seqs[5]));
    expect(one).toMatchObject({ key: String(seqs[5]), messageId: 'm-5', errorQueue });
    expect(decode(one!.body)).toBe('body of m-5');
    expect(one!.headers).toMatchObject({ 'x-n': '5', [HEADER.failureMessage]: 'boom 5' });
    for (const key of ['0', '-1', '1.5', 'abc', '99999999999999999', String(seqs[2]), '10000']) expect(await ops.get(errorQueue, key)).toBeUndefined();
    expect(await ops.count('no-such-queue')).toBe(0);
    expect(await ops.browse('no-such-queue')).toEqual([]);
    expect(await ops.get('no-such-queue', '1')).toBeUndefined();
  });

  it('reads a sparse stream completely and in order, whatever the page size', async () => {
    open();
    const { errorQueue, seqs } = await fill(300);
    const kept = seqs.filter((_, i) => i % 37 === 0 || (i >= 100 && i < 140));
    for (const seq of seqs) if (!kept.includes(seq)) await jsm.streams.deleteMessage(names.of(errorQueue).stream, seq, false);
    for (const pageSize of [1, 3, 64, 500]) {
      const pages = await scanAll(errorQueue, pageSize);
      expect(pages.flat().map((e) => Number(e.key))).toEqual(kept);
      expect(pages.every((p, i) => p.length === pageSize || i === pages.length - 1)).toBe(true);
    }
    expect((await ops.browse(errorQueue, { offset: 5, limit: 3 })).map((e) => Number(e.key))).toEqual(kept.slice(5, 8));
  });

  it('sends a message back once: the copy (fresh retry state, same id, escaped headers intact) is stored before the entry goes', async () => {
    open();
    const { queue, errorQueue } = await fill(0);
    const stack = 'Error: boom\n    at handler (orders.ts:1:1)\n    at ünïcode';
    const seq = await deadLetter(errorQueue, 'id with spaces', { [HEADER.failureQueue]: queue, [HEADER.failureStack]: stack, [HEADER.attempts]: '4', 'x-user': 'kept' });
    expect(await ops.sendBack(errorQueue, String(seq))).toBe(queue);
    expect(await ops.sendBack(errorQueue, String(seq))).toBeUndefined();
    expect(await ops.count(errorQueue)).toBe(0);
    const [copy, ...more] = await messagesOf(queue);
    expect(more).toEqual([]);
    expect(copy).toMatchObject({ id: 'id with spaces', natsMsgId: `sendback|${names.of(errorQueue).stream}|${seq}` });
    expect(copy!.data).toBe('body of id with spaces');
    expect(copy!.headers).toEqual({ 'x-user': 'kept', [HEADER.replayCount]: '1', [HEADER.replayedAt]: '2030-01-02T03:04:05.000Z' });
  });

  it('a send-back asked again after its copy was stored (the entry still there) sends no second copy', async () => {
    open();
    const { queue, errorQueue, seqs } = await fill(1);
    // As if an earlier send-back stored its copy and stopped before deleting the entry.
    await js.publish(names.of(queue).subject, text('first copy'), { msgID: `sendback|${names.of(errorQueue).stream}|${seqs[0]}` });
    expect(await ops.sendBack(errorQueue, String(seqs[0]))).toBe(queue);
    expect((await messagesOf(queue)).map((m) => m.data)).toEqual(['first copy']);
    expect(await ops.count(errorQueue)).toBe(0);
  });

  it('a bulk send-back of entries bound for several queues looks each queue up once per page and reports every entry in order', async () => {
    open();
    const { queue, errorQueue } = await fill(0);
    const other = `other-${randomUUID().slice(0, 6)}`;
    const otherErrors = `errors-${randomUUID().slice(0, 6)}`;
    await makeQueue(other, 'work');
    await makeQueue(otherErrors, 'error');
    const destinations = [queue, other, otherErrors, `unknown-${randomUUID().slice(0, 6)}`];
    const count = SEND_BACK_CONCURRENCY + 32;
    for (let i = 0; i < count; i++) await deadLetter(errorQueue, `m-${i}`, { [HEADER.failureQueue]: destinations[i % 4]! });
    const looked: string[] = [];
    const streams = Object.create(jsm.streams) as JetStreamManager['streams'];
    streams.info = (name, options) => {
      looked.push(name);
      return jsm.streams.info(name, options);
    };
    const counting = new JetStreamOperations(async () => ({ js, jsm: Object.assign(Object.create(jsm) as JetStreamManager, { streams }) }), names, clock);
    const results: EntryResult[] = [];
    const summary = await counting.sendBackEach(errorQueue, { select: () => true, onResult: (r) => results.push(r) });
    expect(results.map((r) => (r.outcome === 'refused' ? `refused ${r.reason}` : r.outcome))).toEqual(
      Array.from({ length: count }, (_, i) => ['sent', 'sent', 'refused error-queue', 'refused missing'][i % 4]),
    );
    expect(results.map((r) => r.entry.messageId)).toEqual(Array.from({ length: count }, (_, i) => `m-${i}`));
    expect(summary).toMatchObject({ read: count, selected: count, done: count / 2, refused: count / 2, failed: 0, gone: 0 });
    // The scan's one look at the error queue, then one per destination for the single page.
    expect(looked.filter((name) => name !== names.of(errorQueue).stream).sort()).toEqual(destinations.map((d) => names.of(d).stream).sort());
    expect((await messagesOf(queue)).map((m) => m.id)).toEqual(Array.from({ length: count / 4 }, (_, i) => `m-${4 * i}`));
    expect((await messagesOf(other)).map((m) => m.id)).toEqual(Array.from({ length: count / 4 }, (_, i) => `m-${4 * i + 1}`));
    expect(await ops.count(errorQueue)).toBe(count / 2);
  });

  it('reads the error stream with direct gets only when it allows them', async () => {
    open();
    const { errorQueue } = await fill(3);
    const used: string[] = [];
    const spy = Object.create(jsm) as JetStreamManager;
    const streams = Object.assign(Object.create(jsm.streams) as JetStreamManager['streams'], {
      getMessage: (stream: string, query: Parameters<JetStreamManager['streams']['getMessage']>[1]) => {
        used.push('msg-get');
        return jsm.streams.getMessage(stream, query);
      },
    });
    const directs = Object.assign(Object.create(jsm.direct) as JetStreamManager['direct'], {
      getMessage: (stream: string, query: Parameters<JetStreamManager['direct']['getMessage']>[1]) => {
        used.push('direct');
        return jsm.direct.getMessage(stream, query);
      },
    });
    Object.assign(spy, { streams, direct: directs });
    const spied = new JetStreamOperations(async () => ({ js, jsm: spy }), names, clock);
    const read: string[] = [];
    for await (const page of spied.scan(errorQueue)) read.push(...page.map((e) => e.messageId));
    expect(read).toEqual(['m-0', 'm-1', 'm-2']);
    expect(new Set(used)).toEqual(new Set([direct ? 'direct' : 'msg-get']));
  });

  it('a bulk send-back does not send back an entry deleted after its page was read', async () => {
    open();
    const { queue, errorQueue, seqs } = await fill(12);
    const stream = names.of(errorQueue).stream;
    const victims = new Set(seqs.filter((_, i) => i % 3 === 1));
    // Each victim is deleted by someone else once the pass has read its page, just before the pass reads it again.
    const reread = (query: { seq?: number; next_by_subj?: string }) => query.next_by_subj === undefined && query.seq !== undefined && victims.has(query.seq);
    const deleting = Object.create(jsm) as JetStreamManager;
    const streams = Object.assign(Object.create(jsm.streams) as JetStreamManager['streams'], {
      getMessage: async (name: string, query: Parameters<JetStreamManager['streams']['getMessage']>[1]) => {
        if (reread(query as { seq?: number })) await jsm.streams.deleteMessage(stream, (query as { seq: number }).seq, false);
        return jsm.streams.getMessage(name, query);
      },
    });
    const directs = Object.assign(Object.create(jsm.direct) as JetStreamManager['direct'], {
      getMessage: async (name: string, query: Parameters<JetStreamManager['direct']['getMessage']>[1]) => {
        if (reread(query as { seq?: number })) await jsm.streams.deleteMessage(stream, (query as { seq: number }).seq, false);
        return jsm.direct.getMessage(name, query);
      },
    });
    Object.assign(deleting, { streams, direct: directs });
    const racing = new JetStreamOperations(async () => ({ js, jsm: deleting }), names, clock);
    const results: EntryResult[] = [];
    const summary = await racing.sendBackEach(errorQueue, { select: () => true, onResult: (r) => results.push(r) });
    expect(summary).toMatchObject({ read: 12, selected: 12, done: 8, gone: 4, failed: 0 });
    expect(results.filter((r) => r.outcome === 'gone').map((r) => Number(r.entry.key))).toEqual([...victims]);
    expect((await messagesOf(queue)).map((m) => m.id)).toEqual(seqs.flatMap((seq, i) => (victims.has(seq) ? [] : [`m-${i}`])));
    expect(await ops.count(errorQueue)).toBe(0);
  });

  it('two send-backs racing for each entry send exactly one copy of it, and only the one whose deletion took the entry reports it sent', async () => {
    open();
    const { queue, errorQueue, seqs } = await fill(20);
    const results = await Promise.all(seqs.flatMap((seq) => [ops.sendBack(errorQueue, String(seq)), ops.sendBack(errorQueue, String(seq))]));
    expect(results.filter((r) => r === queue).length).toBe(20);
    expect(results.every((r) => r === queue || r === undefined)).toBe(true);
    expect((await messagesOf(queue)).map((m) => m.id).sort()).toEqual(seqs.map((_, i) => `m-${i}`).sort());
    expect(await ops.count(errorQueue)).toBe(0);
  });

  it('two bulk send-backs running at once over the same entries report each entry sent by one of them only', async () => {
    open();
    const { queue, errorQueue, seqs } = await fill(30);
    const [a, b] = await Promise.all([ops.sendBackEach(errorQueue, { select: () => true }), ops.sendBackEach(errorQueue, { select: () => true })]);
    expect(a!.done + b!.done).toBe(30);
    expect(a!.done + a!.gone + b!.done + b!.gone).toBe(a!.selected + b!.selected);
    expect(a!.failed + b!.failed).toBe(0);
    expect((await messagesOf(queue)).map((m) => m.id).sort()).toEqual(seqs.map((_, i) => `m-${i}`).sort());
    expect(await ops.count(errorQueue)).toBe(0);
  });

  it('refuses a missing destination (named by the entry or the operator), an error queue, a stream that is not a queue, and one off the list; creates nothing', async () => {
    open();
    const { queue, errorQueue, seqs } = await fill(1, { makeWork: false });
    const key = String(seqs[0]);
    const before = await streamsOfPrefix();
    const refusal = await ops.sendBack(errorQueue, key).catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(SendBackRefusedError);
    expect(refusal).toMatchObject({ queue, reason: 'missing' });
    await expect(ops.sendBack(errorQueue, key, { queue: 'elsewhere' })).rejects.toMatchObject({ queue: 'elsewhere', reason: 'missing' });
    await expect(ops.sendBack(errorQueue, key, { queue: 'x'.repeat(300) })).rejects.toMatchObject({ reason: 'missing' });
    await expect(ops.sendBack(errorQueue, key, { queue: errorQueue })).rejects.toMatchObject({ reason: 'error-queue' });
    const otherErrors = `error-${randomUUID().slice(0, 6)}`;
    await makeQueue(otherErrors, 'error');
    await expect(ops.sendBack(errorQueue, key, { queue: otherErrors })).rejects.toMatchObject({ reason: 'error-queue' });
    // A stream under the queue's name that another tool made is no queue of redeliver's.
    const foreign = names.of('foreign');
    await jsm.streams.add({ name: foreign.stream, subjects: [foreign.subject], retention: RetentionPolicy.Workqueue, storage: StorageType.Memory });
    await expect(ops.sendBack(errorQueue, key, { queue: 'foreign' })).rejects.toMatchObject({ reason: 'missing' });
    await makeQueue(queue, 'work');
    await expect(ops.sendBack(errorQueue, key, { allowedQueues: ['somewhere-else'] })).rejects.toMatchObject({ queue, reason: 'not-allowed' });
    expect(await streamsOfPrefix()).toEqual([...before, names.of(otherErrors).stream, foreign.stream, names.of(queue).stream].sort());
    expect(await messagesOf(queue)).toEqual([]);
    expect(await ops.count(errorQueue)).toBe(1);
    expect(await ops.sendBack(errorQueue, key, { allowedQueues: ['somewhere-else', queue] })).toBe(queue);
  });

  it('shows entries redeliver did not write under their Nats-Msg-Id or stream sequence, and sends one back to a queue the operator names', async () => {
    open();
    const { queue, errorQueue } = await fill(0);
    const withMsgId = natsHeaders();
    withMsgId.set('origin', 'hand');
    const a = await js.publish(names.of(errorQueue).subject, text('by hand'), { headers: withMsgId, msgID: 'hand-1' });
    const b = await js.publish(names.of(errorQueue).subject, text('bare'));
    const entries = await ops.browse(errorQueue);
    expect(entries.map((e) => [e.key, e.messageId, e.headers])).toEqual([
      [String(a.seq), 'hand-1', { origin: 'hand' }],
      [String(b.seq), `${names.of(errorQueue).stream}:${b.seq}`, {}],
    ]);
    await expect(ops.sendBack(errorQueue, String(b.seq))).rejects.toThrow('does not say which queue it failed on');
    expect(await ops.sendBack(errorQueue, String(b.seq), { queue })).toBe(queue);
    expect(await messagesOf(queue)).toMatchObject([{ id: `${names.of(errorQueue).stream}:${b.seq}`, data: 'bare', headers: { [HEADER.replayCount]: '1' } }]);
    expect(await ops.delete(errorQueue, String(a.seq))).toBe(true);
  });

  it('deletes one entry, and purges only what the stream held when the purge began', async () => {
    open();
    const { errorQueue, seqs } = await fill(5);
    expect(await ops.delete(errorQueue, String(seqs[1]))).toBe(true);
    expect(await ops.delete(errorQueue, String(seqs[1]))).toBe(false);
    expect(await ops.delete(errorQueue, '999999')).toBe(false);
    expect(await ops.delete(errorQueue, 'nope')).toBe(false);
    expect(await ops.delete('no-such-queue', '1')).toBe(false);
    expect(await ops.purge(errorQueue)).toBe(4);
    expect(await ops.purge(errorQueue)).toBe(0);
    expect(await ops.purge('no-such-queue')).toBe(0);
    const late = await deadLetter(errorQueue, 'late', {});
    expect((await ops.browse(errorQueue)).map((e) => e.key)).toEqual([String(late)]);
  });

  it('a scan reads only up to the last entry when it began and stopping early leaves the stream as it was', async () => {
    open();
    const { errorQueue } = await fill(4);
    const seen: string[] = [];
    for await (const page of ops.scan(errorQueue, { pageSize: 1 })) {
      seen.push(...page.map((e) => e.messageId));
      if (seen.length === 1) await deadLetter(errorQueue, 'late', {});
    }
    expect(seen).toEqual(['m-0', 'm-1', 'm-2', 'm-3']);
    for await (const page of ops.scan(errorQueue, { pageSize: 2 })) {
      expect(page).toHaveLength(2);
      break;
    }
    expect(await ops.count(errorQueue)).toBe(5);
    expect(await scanAll('no-such-queue')).toEqual([]);
  });

  it('sends back and deletes the selected entries in one pass, reporting each', async () => {
    open();
    const { queue, errorQueue } = await fill(6);
    const results: EntryResult[] = [];
    const sent = await ops.sendBackEach(errorQueue, { select: (e) => Number(e.headers['x-n']) % 2 === 0, onResult: (r) => results.push(r) });
    expect(sent).toMatchObject({ read: 6, selected: 3, done: 3, refused: 0, failed: 0, gone: 0, unseen: 0, interrupted: false });
    expect(results.map((r) => `${r.outcome} ${r.entry.messageId}`)).toEqual(['sent m-0', 'sent m-2', 'sent m-4']);
    expect((await messagesOf(queue)).map((m) => m.id)).toEqual(['m-0', 'm-2', 'm-4']);
    const deleted = await ops.deleteEach(errorQueue, { select: (e) => e.messageId !== 'm-5' });
    expect(deleted).toMatchObject({ read: 3, selected: 2, done: 2 });
    expect((await ops.browse(errorQueue)).map((e) => e.messageId)).toEqual(['m-5']);
  });

  it('drains the oldest entries to a store, deleting exactly those only once the store resolved', async () => {
    open();
    const { errorQueue } = await fill(7);
    await expect(ops.drain(errorQueue, 3, async () => Promise.reject(new Error('store is down')))).rejects.toThrow('store is down');
    expect(await ops.count(errorQueue)).toBe(7);
    const stored: string[] = [];
    const moved = await ops.drain(errorQueue, 3, async (entries) => {
      stored.push(...entries.map((e) => e.messageId));
      await deadLetter(errorQueue, 'arrived-meanwhile', {});
    });
    expect(moved).toBe(3);
    expect(stored).toEqual(['m-0', 'm-1', 'm-2']);
    expect((await ops.browse(errorQueue)).map((e) => e.messageId)).toEqual(['m-3', 'm-4', 'm-5', 'm-6', 'arrived-meanwhile']);
    expect(await ops.drain(errorQueue, 100, async () => undefined)).toBe(5);
    expect(await ops.drain(errorQueue, 100, async () => undefined)).toBe(0);
    expect(await ops.drain('no-such-queue', 100, async () => undefined)).toBe(0);
    await expect(ops.drain(errorQueue, 0, async () => undefined)).rejects.toThrow(RangeError);
  });

  it('drains a stream with gaps without handing over an entry deleted before (the message after a batch among them)', async () => {
    open();
    const { errorQueue, seqs } = await fill(12);
    // Sent back or deleted already: one inside the first batch, the one right after it, and one later.
    for (const i of [3, 5, 9]) expect(await ops.delete(errorQueue, String(seqs[i]))).toBe(true);
    const batches: string[][] = [];
    const store = async (entries: ErrorEntry[]) => void batches.push(entries.map((e) => e.messageId));
    expect(await ops.drain(errorQueue, 4, store)).toBe(4);
    expect(await ops.count(errorQueue)).toBe(5);
    expect(await ops.drain(errorQueue, 100, store)).toBe(5);
    expect(await ops.drain(errorQueue, 100, store)).toBe(0);
    expect(batches).toEqual([
      ['m-0', 'm-1', 'm-2', 'm-4'],
      ['m-6', 'm-7', 'm-8', 'm-10', 'm-11'],
    ]);
    expect(await scanAll(errorQueue)).toEqual([]);
  });

  it('reads depths of every queue of the prefix, or of the queues named, and their kinds', async () => {
    open();
    const { queue, errorQueue } = await fill(2);
    const n = names.of(queue);
    for (let i = 0; i < 5; i++) await js.publish(n.subject, text(`work ${i}`));
    // Two deliveries held by a consumer, three still to deliver.
    await jsm.consumers.add(n.stream, { durable_name: QUEUE_CONSUMER, ack_policy: AckPolicy.Explicit, ack_wait: 60_000_000_000 });
    const held = await (await js.consumers.get(n.stream, QUEUE_CONSUMER)).fetch({ max_messages: 2, expires: 1_000 });
    let got = 0;
    for await (const _m of held) got++;
    expect(got).toBe(2);
    // Three delayed retries of the work queue in the delay stream, one of another queue.
    await jsm.streams.add({ name: names.delayStream, subjects: [names.delaySubjects], retention: RetentionPolicy.Workqueue, storage: StorageType.File });
    for (let i = 0; i < 3; i++) await js.publish(n.delaySubject, text(`retry ${i}`));
    await js.publish(names.of('other').delaySubject, text('retry'));
    // Streams of another prefix and streams that are not queues are left out.
    const otherPrefix = new JetStreamNames(`${prefix}-x`);
    await jsm.streams.add({ name: otherPrefix.of(queue).stream, subjects: [otherPrefix.of(queue).subject], storage: StorageType.Memory });
    try {
      const depths = await ops.queueDepths();
      expect(depths).toEqual(
        [
          { queue, kind: 'work', ready: 3, inFlight: 2, delayed: 3 },
          { queue: errorQueue, kind: 'error', ready: 2, inFlight: 0, delayed: 0 },
        ].sort((a, b) => a.queue.localeCompare(b.queue)),
      );
      expect(await ops.queueDepths([errorQueue, 'other', 'nothing'])).toEqual([
        { queue: errorQueue, kind: 'error', ready: 2, inFlight: 0, delayed: 0 },
        { queue: 'other', kind: 'work', ready: 0, inFlight: 0, delayed: 1 },
        { queue: 'nothing', kind: 'work', ready: 0, inFlight: 0, delayed: 0 },
      ]);
      expect(await ops.queueKinds([queue, errorQueue, 'nothing', 'y'.repeat(300)])).toEqual(
        new Map([
          [queue, 'work'],
          [errorQueue, 'error'],
          ['nothing', 'missing'],
          ['y'.repeat(300), 'missing'],
        ]),
      );
      expect(await streamsOfPrefix()).toEqual([names.delayStream, n.stream, names.of(errorQueue).stream].sort());
    } finally {
      await deleteJetStreamPrefix(`${prefix}-x`);
    }
  });
});
