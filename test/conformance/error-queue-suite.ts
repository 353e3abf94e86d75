/**
 * The error-queue operations every transport that offers them passes:
 * browse, get, send back (safely, once), delete, purge.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import { SendBackRefusedError } from '../../src/operations/send-back-destination.js';
import type { EntryResult, ErrorEntry } from '../../src/transport/error-queue.js';
import type { Delivery, Subscription, Transport } from '../../src/transport/types.js';
import type { ConformanceTarget } from './suite.js';

const text = (s: string) => new TextEncoder().encode(s);
const decode = (b: Uint8Array) => new TextDecoder().decode(b);

export function describeErrorQueueConformance(target: ConformanceTarget): void {
  describe.skipIf(Boolean(target.skip))(`error-queue operations: ${target.name}`, () => {
    let transport: Transport | undefined;
    const subs: Subscription[] = [];

    afterEach(async () => {
      for (const sub of subs.splice(0)) await sub.close().catch(() => undefined);
      await transport?.close();
      transport = undefined;
    });

    /**
     * Dead-letters `count` messages from a fresh work queue into a fresh
     * error queue; `failureQueue` overrides the queue the entries name.
     */
    async function fill(count: number, failureQueue?: string) {
      const t = (transport = await target.create());
      const ops = t.errorQueue;
      if (!ops) throw new Error(`${target.name} has no errorQueue operations`);
      const queue = `eq-work-${randomUUID().slice(0, 8)}`;
      const errorQueue = `eq-error-${randomUUID().slice(0, 8)}`;
      for (let i = 0; i < count; i++) await t.send(queue, { id: `m-${i}`, body: text(`body ${i}`), headers: { 'x-n': String(i), [HEADER.attempts]: '3' } });
      const got: Delivery[] = [];
      const sub = await t.consume(queue, (d) => void got.push(d), { prefetch: 1 });
      for (let i = 0; i < count; i++) {
        while (got.length <= i) await new Promise((r) => setTimeout(r, 10));
        await got[i]!.deadLetter(errorQueue, {
          ...got[i]!.headers,
          [HEADER.failureQueue]: failureQueue ?? queue,
          [HEADER.failureReason]: 'retries-exhausted',
          [HEADER.failureMessage]: `boom ${i}`,
        });
      }
      await sub.close();
      for (let waited = 0; (await ops.count(errorQueue)) < count && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
      return { t, ops, queue, errorQueue };
    }

    async function receive(t: Transport, queue: string, n: number, waitMs = 5_000): Promise<Delivery[]> {
      const got: Delivery[] = [];
      const sub = await t.consume(queue, (d) => {
        got.push(d);
        void d.ack();
      }, { prefetch: 50 });
      subs.push(sub);
      for (let waited = 0; got.length < n && waited < waitMs; waited += 20) await new Promise((r) => setTimeout(r, 20));
      return got;
    }

    async function until(condition: () => Promise<boolean>, waitMs = 5_000): Promise<void> {
      for (let waited = 0; !(await condition()); waited += 20) {
        if (waited >= waitMs) throw new Error(`condition not met within ${waitMs} ms`);
        await new Promise((r) => setTimeout(r, 20));
      }
    }

    it('counts, pages oldest first, and gets one entry by key', async () => {
      const { ops, errorQueue } = await fill(5);
      expect(await ops.count(errorQueue)).toBe(5);
      const first = await ops.browse(errorQueue, { offset: 0, limit: 2 });
      const rest = await ops.browse(errorQueue, { offset: 2, limit: 10 });
      expect(first.map((e) => e.messageId)).toEqual(['m-0', 'm-1']);
      expect(rest.map((e) => e.messageId)).toEqual(['m-2', 'm-3', 'm-4']);
      const one = await ops.get(errorQueue, rest[1]!.key);
      expect(one?.messageId).toBe('m-3');
      expect(decode(one!.body)).toBe('body 3');
      expect(one!.headers[HEADER.failureMessage]).toBe('boom 3');
      expect(await ops.get(errorQueue, 'no-such-key')).toBeUndefined();
      expect(await ops.count(errorQueue)).toBe(5);
    });

    it('sends a message back to the queue it failed on, with a fresh retry state, exactly once', async () => {
      const { t, ops, queue, errorQueue } = await fill(2);
      const [entry] = await ops.browse(errorQueue, { limit: 1 });
      expect(await ops.sendBack(errorQueue, entry!.key)).toBe(queue);
      expect(await ops.sendBack(errorQueue, entry!.key)).toBeUndefined();
      expect(await ops.count(errorQueue)).toBe(1);
      const got = await receive(t, queue, 2, 1_500);
      expect(got.map((d) => d.id)).toEqual(['m-0']);
      const headers = got[0]!.headers;
      expect(decode(got[0]!.body)).toBe('body 0');
      expect(headers['x-n']).toBe('0');
      expect(headers[HEADER.replayCount]).toBe('1');
      expect(headers[HEADER.failureReason]).toBeUndefined();
      expect(headers[HEADER.attempts]).toBeUndefined();
    });

    it('sends a message back to another existing queue when asked', async () => {
      const { t, ops, errorQueue } = await fill(1);
      const [entry] = await ops.browse(errorQueue);
      const other = `eq-other-${randomUUID().slice(0, 8)}`;
      const got = receive(t, other, 1); // consuming it makes the queue exist
      await until(async () => (await t.inspection!.queueDepths()).some((d) => d.queue === other));
      expect(await ops.sendBack(errorQueue, entry!.key, { queue: other })).toBe(other);
      expect((await got).map((d) => d.id)).toEqual(['m-0']);
    });

    it('refuses to send back to a queue that does not exist, named by the entry or by the operator, and creates none', async () => {
      const forged = `eq-forged-${randomUUID().slice(0, 8)}`;
      const { t, ops, errorQueue } = await fill(1, forged);
      const [entry] = await ops.browse(errorQueue);
      const refusal = await ops.sendBack(errorQueue, entry!.key).catch((e: unknown) => e);
      expect(refusal).toBeInstanceOf(SendBackRefusedError);
      expect(refusal).toMatchObject({ queue: forged, reason: 'missing' });
      const named = `eq-missing-${randomUUID().slice(0, 8)}`;
      await expect(ops.sendBack(errorQueue, entry!.key, { queue: named })).rejects.toMatchObject({ queue: named, reason: 'missing' });
      expect(await ops.count(errorQueue)).toBe(1);
      const known = (await t.inspection!.queueDepths()).map((d) => d.queue);
      expect(known).not.toContain(forged);
      expect(known).not.toContain(named);
    });

    it('sends back only to the allowed queues when given a list', async () => {
      const { t, ops, queue, errorQueue } = await fill(2);
      const [first, second] = await ops.browse(errorQueue);
      await expect(ops.sendBack(errorQueue, first!.key, { allowedQueues: ['somewhere-else'] })).rejects.toMatchObject({ queue, reason: 'not-allowed' });
      expect(await ops.count(errorQueue)).toBe(2);
      expect(await ops.sendBack(errorQueue, second!.key, { allowedQueues: ['somewhere-else', queue] })).toBe(queue);
      expect((await receive(t, queue, 1)).map((d) => d.id)).toEqual(['m-1']);
    });

    it('refuses to send back into an error queue', async () => {
      const { ops, errorQueue } = await fill(1);
      const [entry] = await ops.browse(errorQueue);
      await expect(ops.sendBack(errorQueue, entry!.key, { queue: errorQueue })).rejects.toMatchObject({ reason: 'error-queue' });
      expect(await ops.count(errorQueue)).toBe(1);
    });

    it('deletes one entry and purges the rest', async () => {
      const { ops, errorQueue } = await fill(4);
      const [entry] = await ops.browse(errorQueue, { limit: 1 });
      expect(await ops.delete(errorQueue, entry!.key)).toBe(true);
      expect(await ops.delete(errorQueue, entry!.key)).toBe(false);
      expect(await ops.count(errorQueue)).toBe(3);
      expect(await ops.purge(errorQueue)).toBe(3);
      expect(await ops.count(errorQueue)).toBe(0);
    });

    async function scanAll(ops: NonNullable<Transport['errorQueue']>, errorQueue: string, pageSize?: number): Promise<ErrorEntry[][]> {
      const pages: ErrorEntry[][] = [];
      for await (const page of ops.scan(errorQueue, pageSize === undefined ? {} : { pageSize })) pages.push(page);
      return pages;
    }

    it('scans every entry once, oldest first, in pages, and leaves the queue as it was', async () => {
      const { ops, errorQueue } = await fill(7);
      const pages = await scanAll(ops, errorQueue, 3);
      expect(pages.map((p) => p.length)).toEqual([3, 3, 1]);
      const all = pages.flat();
      expect(all.map((e) => e.messageId)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4', 'm-5', 'm-6']);
      expect(decode(all[4]!.body)).toBe('body 4');
      expect(all[4]!.headers[HEADER.failureMessage]).toBe('boom 4');
      expect(new Set(all.map((e) => e.key)).size).toBe(7);
      expect(await ops.count(errorQueue)).toBe(7);
      expect((await scanAll(ops, errorQueue)).flat().map((e) => e.key)).toEqual(all.map((e) => e.key));
      expect(await scanAll(ops, `eq-none-${randomUUID().slice(0, 8)}`)).toEqual([]);
    });

    it('a scan stopped early leaves every entry in place', async () => {
      const { ops, errorQueue } = await fill(5);
      for await (const page of ops.scan(errorQueue, { pageSize: 2 })) {
        expect(page).toHaveLength(2);
        break;
      }
      await expect(
        (async () => {
          for await (const _page of ops.scan(errorQueue, { pageSize: 1 })) throw new Error('consumer failed');
        })(),
      ).rejects.toThrow('consumer failed');
      expect(await ops.count(errorQueue)).toBe(5);
      expect((await scanAll(ops, errorQueue)).flat().map((e) => e.messageId)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4']);
    });

    it('a scan reads only the entries the queue held when it began', async () => {
      const { t, ops, queue, errorQueue } = await fill(3);
      const seen: string[] = [];
      let added = false;
      for await (const page of ops.scan(errorQueue, { pageSize: 1 })) {
        seen.push(...page.map((e) => e.messageId));
        if (!added) {
          added = true;
          // One more failure arrives while the scan runs.
          await t.send(queue, { id: 'late', body: text('late'), headers: {} });
          const got: Delivery[] = [];
          const sub = await t.consume(queue, (d) => void got.push(d), { prefetch: 1 });
          await until(async () => got.length > 0);
          await got[0]!.deadLetter(errorQueue, { [HEADER.failureQueue]: queue });
          await sub.close();
        }
      }
      expect(seen).toEqual(['m-0', 'm-1', 'm-2']);
      await until(async () => (await ops.count(errorQueue)) === 4);
    });

    it('sends back the selected entries in one pass, reporting each, and leaves the rest', async () => {
      const { t, ops, queue, errorQueue } = await fill(6);
      const keys = (await scanAll(ops, errorQueue)).flat().map((e) => e.key);
      const chosen = new Set([keys[1]!, keys[3]!, keys[4]!]);
      const results: EntryResult[] = [];
      const summary = await ops.sendBackEach(errorQueue, { select: (e) => chosen.has(e.key), onResult: (r) => results.push(r) });
      expect(summary).toMatchObject({ read: 6, selected: 3, done: 3, refused: 0, failed: 0, gone: 0, unseen: 0, interrupted: false });
      expect(results.map((r) => [r.outcome, r.entry.messageId, r.outcome === 'sent' ? r.queue : ''])).toEqual([
        ['sent', 'm-1', queue],
        ['sent', 'm-3', queue],
        ['sent', 'm-4', queue],
      ]);
      const left = (await scanAll(ops, errorQueue)).flat().map((e) => e.messageId);
      expect(left).toEqual(['m-0', 'm-2', 'm-5']);
      const got = await receive(t, queue, 3);
      expect(got.map((d) => d.id).sort()).toEqual(['m-1', 'm-3', 'm-4']);
      expect(got.every((d) => d.headers[HEADER.replayCount] === '1')).toBe(true);
      const again = await ops.sendBackEach(errorQueue, { select: (e) => chosen.has(e.key) });
      expect(again).toMatchObject({ read: 3, selected: 0, done: 0 });
    });

    it('reports refused destinations per entry and keeps those entries', async () => {
      const { ops, queue, errorQueue } = await fill(3);
      const results: EntryResult[] = [];
      const summary = await ops.sendBackEach(errorQueue, { select: () => true, allowedQueues: ['somewhere-else'], onResult: (r) => results.push(r) });
      expect(summary).toMatchObject({ read: 3, selected: 3, done: 0, refused: 3 });
      expect(results.map((r) => (r.outcome === 'refused' ? r.reason : r.outcome))).toEqual(['not-allowed', 'not-allowed', 'not-allowed']);
      expect(results.every((r) => r.outcome === 'refused' && r.error.message.includes(queue))).toBe(true);
      const missing = await ops.sendBackEach(errorQueue, { select: () => true, queue: `eq-missing-${randomUUID().slice(0, 8)}` });
      expect(missing).toMatchObject({ selected: 3, refused: 3 });
      expect(await ops.count(errorQueue)).toBe(3);
    });

    it('deletes the selected entries in one pass and stops when its signal aborts', async () => {
      const { ops, errorQueue } = await fill(6);
      const results: EntryResult[] = [];
      const summary = await ops.deleteEach(errorQueue, { select: (e) => Number(e.headers['x-n']) % 2 === 0, onResult: (r) => results.push(r) });
      expect(summary).toMatchObject({ read: 6, selected: 3, done: 3, interrupted: false });
      expect(results.map((r) => `${r.outcome} ${r.entry.messageId}`)).toEqual(['deleted m-0', 'deleted m-2', 'deleted m-4']);
      expect((await scanAll(ops, errorQueue)).flat().map((e) => e.messageId)).toEqual(['m-1', 'm-3', 'm-5']);
      const stop = new AbortController();
      const stopped = await ops.deleteEach(errorQueue, {
        select: () => true,
        signal: stop.signal,
        onResult: () => stop.abort(),
      });
      expect(stopped).toMatchObject({ read: 1, selected: 1, done: 1, interrupted: true });
      expect((await scanAll(ops, errorQueue)).flat().map((e) => e.messageId)).toEqual(['m-3', 'm-5']);
    });

    it('a result callback that throws stops the bulk operation and rejects with its error', async () => {
      const { ops, errorQueue } = await fill(3);
      await expect(
        ops.deleteEach(errorQueue, {
          select: () => true,
          onResult: () => {
            throw new Error('callback failed');
          },
        }),
      ).rejects.toThrow('callback failed');
      expect((await scanAll(ops, errorQueue)).flat().map((e) => e.messageId)).toEqual(['m-1', 'm-2']);
    });
  });
}
