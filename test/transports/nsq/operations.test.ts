/**
 * The NSQ error-queue operations and inspection against the real nsqd, on
 * error topics filled directly over HTTP in the envelope the transport
 * writes, each topic named with a run token and deleted afterwards.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { HEADER } from '../../../src/headers/names.js';
import { SendBackRefusedError } from '../../../src/operations/send-back-destination.js';
import type { EntryResult } from '../../../src/transport/error-queue.js';
import { FakeClock } from '../../../src/time/fake-clock.js';
import { envelopeOf, errorEntryOf } from '../../../src/transports/nsq/error-entry.js';
import { NsqdHttpApi } from '../../../src/transports/nsq/http-api.js';
import { DEFAULT_ERROR_CHANNEL, NsqOperations } from '../../../src/transports/nsq/operations.js';
import { deleteTopics, NSQD_HTTP, NSQD_TCP, nsqSkipReason, scratchTopic, untilDepth } from './operations-fixtures.js';

const skip = await nsqSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);

describe.skipIf(Boolean(skip))('NSQ error-queue operations', () => {
  const api = new NsqdHttpApi(NSQD_HTTP);
  const clock = new FakeClock(Date.parse('2030-01-02T03:04:05.000Z'));
  const ops = new NsqOperations({ nodes: [{ tcp: NSQD_TCP, http: api }], channel: 'redeliver', connectionName: 'redeliver-test-ops', clock });
  const made = new Set<string>();

  afterEach(async () => {
    await deleteTopics(api, made);
    made.clear();
  });

  /** A work topic with the consumer channel and an error topic with the error channel holding `count` entries. */
  async function fill(count: number, extra: (i: number) => Record<string, string> = () => ({})) {
    const queue = scratchTopic('work');
    const errorQueue = scratchTopic('err');
    made.add(queue).add(errorQueue);
    await api.createChannel(queue, 'redeliver');
    await api.createChannel(errorQueue, DEFAULT_ERROR_CHANNEL);
    for (let i = 0; i < count; i++) {
      const headers = { 'x-n': String(i), [HEADER.attempts]: '3', [HEADER.failureQueue]: queue, [HEADER.failureReason]: 'retries-exhausted', [HEADER.failureMessage]: `boom ${i}`, ...extra(i) };
      await api.publish(errorQueue, envelopeOf(`m-${i}`, headers, text(`body ${i}`)));
    }
    await untilDepth(api, errorQueue, DEFAULT_ERROR_CHANNEL, count);
    return { queue, errorQueue };
  }

  it('counts, browses oldest first pass after pass, and leaves every entry in place', async () => {
    const { errorQueue } = await fill(5);
    expect(await ops.count(errorQueue)).toBe(5);
    for (let round = 0; round < 3; round++) {
      const all = await ops.browse(errorQueue);
      expect(all.map((e) => e.messageId)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4']);
      expect((await ops.browse(errorQueue, { offset: 3, limit: 1 })).map((e) => e.messageId)).toEqual(['m-3']);
      const one = await ops.get(errorQueue, all[2]!.key);
      expect(one?.headers[HEADER.failureMessage]).toBe('boom 2');
      expect(decode(one!.body)).toBe('body 2');
      expect(one!.headers).not.toHaveProperty('redeliver-message-id');
    }
    const channel = await api.channelStats(errorQueue, DEFAULT_ERROR_CHANNEL);
    expect(channel).toMatchObject({ depth: 5, in_flight_count: 0, client_count: 0 });
    expect(await ops.get(errorQueue, 'no-such-key')).toBeUndefined();
  });

  it('sends back copy first with a fresh retry state, once, and deletes by key', async () => {
    const { queue, errorQueue } = await fill(3);
    const [first, second] = await ops.browse(errorQueue);
    expect(await ops.sendBack(errorQueue, first!.key)).toBe(queue);
    expect(await ops.sendBack(errorQueue, first!.key)).toBeUndefined();
    await untilDepth(api, queue, 'redeliver', 1);
    expect(await ops.delete(errorQueue, second!.key)).toBe(true);
    expect(await ops.delete(errorQueue, second!.key)).toBe(false);
    expect((await ops.browse(errorQueue)).map((e) => e.messageId)).toEqual(['m-2']);
    // The copy as a consumer would read it: through a pass on the work topic's channel.
    const reader = new NsqOperations({ nodes: [{ tcp: NSQD_TCP, http: api }], channel: 'x', errorChannel: 'redeliver', connectionName: 'redeliver-test-ops', clock });
    const [copy] = await reader.browse(queue);
    expect(copy?.messageId).toBe('m-0');
    expect(copy?.headers[HEADER.replayCount]).toBe('1');
    expect(copy?.headers[HEADER.replayedAt]).toBe('2030-01-02T03:04:05.000Z');
    expect(copy?.headers).not.toHaveProperty(HEADER.failureMessage);
    expect(copy?.headers['x-n']).toBe('0');
  });

  it('refuses missing, error and not-allowed destinations and keeps the entry', async () => {
    const { queue, errorQueue } = await fill(1);
    const [entry] = await ops.browse(errorQueue);
    const missing = scratchTopic('missing');
    made.add(missing);
    await expect(ops.sendBack(errorQueue, entry!.key, { queue: missing })).rejects.toMatchObject({ reason: 'missing' });
    expect(await api.topicStats(missing)).toBeUndefined();
    await expect(ops.sendBack(errorQueue, entry!.key, { queue: errorQueue })).rejects.toBeInstanceOf(SendBackRefusedError);
    const other = await fill(0);
    await expect(ops.sendBack(errorQueue, entry!.key, { queue: other.errorQueue })).rejects.toMatchObject({ reason: 'error-queue' });
    await expect(ops.sendBack(errorQueue, entry!.key, { allowedQueues: ['elsewhere'] })).rejects.toMatchObject({ reason: 'not-allowed' });
    expect(await ops.count(errorQueue)).toBe(1);
    expect(await ops.queueKinds([queue, errorQueue, missing])).toEqual(new Map([[queue, 'work'], [errorQueue, 'error'], [missing, 'missing']]));
  });

  it('shows and deletes a plain NSQ message, and refuses to send it back without a destination', async () => {
    const { queue, errorQueue } = await fill(1);
    await api.publish(errorQueue, text('not an envelope'));
    const all = await ops.browse(errorQueue);
    expect(all).toHaveLength(2);
    const plain = all[1]!;
    expect(plain.headers).toEqual({});
    expect(decode(plain.body)).toBe('not an envelope');
    expect(plain.messageId).toMatch(/^[0-9a-f]{16}$/);
    expect(plain.key).toMatch(new RegExp(`^${plain.messageId}#[0-9a-f]{16}$`));
    await expect(ops.sendBack(errorQueue, plain.key)).rejects.toMatchObject({ reason: 'unknown' });
    expect(await ops.sendBack(errorQueue, plain.key, { queue })).toBe(queue);
    expect((await ops.browse(errorQueue)).map((e) => e.messageId)).toEqual(['m-0']);
  });

  it('bulk: sends back and deletes the selected entries in one pass, reports each, and stops on abort', async () => {
    const { queue, errorQueue } = await fill(6);
    const results: EntryResult[] = [];
    const sent = await ops.sendBackEach(errorQueue, { select: (e) => Number(e.headers['x-n']) % 2 === 0, onResult: (r) => results.push(r) });
    expect(sent).toMatchObject({ read: 6, selected: 3, done: 3, refused: 0, failed: 0, unseen: 0, interrupted: false });
    expect(results.map((r) => r.outcome)).toEqual(['sent', 'sent', 'sent']);
    await untilDepth(api, queue, 'redeliver', 3);
    const controller = new AbortController();
    const deleted = await ops.deleteEach(errorQueue, {
      select: () => true,
      onResult: () => controller.abort(),
      signal: controller.signal,
    });
    expect(deleted).toMatchObject({ read: 1, done: 1, interrupted: true });
    expect((await ops.browse(errorQueue)).map((e) => e.messageId)).toEqual(['m-3', 'm-5']);
  });

  it('a scan stopped early gives every entry back; purge empties the channel', async () => {
    const { errorQueue } = await fill(4);
    for await (const page of ops.scan(errorQueue, { pageSize: 2 })) {
      expect(page.map((e) => e.messageId)).toEqual(['m-0', 'm-1']);
      break;
    }
    expect(await ops.count(errorQueue)).toBe(4);
    expect((await api.channelStats(errorQueue, DEFAULT_ERROR_CHANNEL))?.in_flight_count).toBe(0);
    expect(await ops.purge(errorQueue)).toBe(4);
    expect(await ops.count(errorQueue)).toBe(0);
  });

  it('entries another reader holds are unseen, and come back afterwards', async () => {
    const { errorQueue } = await fill(3);
    const other = new NsqOperations({ nodes: [{ tcp: NSQD_TCP, http: api }], channel: 'redeliver', connectionName: 'redeliver-test-other', clock });
    let summary;
    for await (const page of other.scan(errorQueue)) {
      expect(page).toHaveLength(3);
      summary = await ops.deleteEach(errorQueue, { select: () => true });
    }
    expect(summary).toMatchObject({ read: 0, unseen: 3 });
    expect(await ops.count(errorQueue)).toBe(3);
  });

  it('drains the oldest entries to a store and removes them only when the store succeeds', async () => {
    const { errorQueue } = await fill(5);
    await expect(ops.drain(errorQueue, 2, async () => Promise.reject(new Error('store down')))).rejects.toThrow('store down');
    expect(await ops.count(errorQueue)).toBe(5);
    const stored: string[] = [];
    expect(await ops.drain(errorQueue, 2, async (entries) => void stored.push(...entries.map((e) => e.messageId)))).toBe(2);
    expect(stored).toHaveLength(2);
    expect(await ops.count(errorQueue)).toBe(3);
  });

  it('reads depths: ready, delayed and in flight, and the kind of each topic', async () => {
    const { queue, errorQueue } = await fill(2);
    await api.publish(queue, envelopeOf('w', {}, text('w')));
    await api.publish(queue, envelopeOf('d', {}, text('d')), { deferMs: 60_000 });
    const missing = scratchTopic('none');
    const depths = await ops.queueDepths([queue, errorQueue, missing]);
    expect(depths).toEqual([
      { queue, kind: 'work', ready: 1, delayed: 1, inFlight: 0 },
      { queue: errorQueue, kind: 'error', ready: 2, delayed: 0, inFlight: 0 },
      { queue: missing, kind: 'work', ready: 0, delayed: 0, inFlight: 0 },
    ]);
    const everything = await ops.queueDepths();
    expect(everything.find((d) => d.queue === errorQueue)).toMatchObject({ kind: 'error', ready: 2 });
  });

  it('decodes an entry from the envelope with the message id header removed', () => {
    const entry = errorEntryOf('q.error', { nsqId: '0123456789abcdef', timestamp: 1n, attempts: 1, body: envelopeOf('id-1', { [HEADER.entryId]: 'e-1' }, text('b')) });
    expect(entry).toMatchObject({ key: 'e-1', messageId: 'id-1', headers: { [HEADER.entryId]: 'e-1' }, plain: false });
  });
});
