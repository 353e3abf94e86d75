/**
 * The seed's "connection closed because the broker node is shut down or
 * being restarted" on the real broker: a `Producer` sends bursts through a
 * TCP proxy in front of the gRPC proxy, and every connection is cut in the
 * middle of one. A send caught in flight that fails (no proxy status, or
 * gRPC UNAVAILABLE, which waits for the connection with the backoff) is
 * retried and carries `redeliver-possible-duplicate`: no confirmed
 * send is lost, and every duplicate copy on the topic is marked (the
 * duplicate window, retried sends and duplicate copies, is counted and
 * printed).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../../src/headers/names.js';
import { Producer } from '../../../src/producer/producer.js';
import type { Delivery } from '../../../src/transport/types.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { ROCKETMQ_ENDPOINTS, RocketScratch, rocketSkipReason } from './scratch.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('cut');

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

async function until(condition: () => boolean, what: string, timeoutMs: number): Promise<void> {
  for (const start = Date.now(); !condition(); await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
  }
}

describe.skipIf(Boolean(skip))('rocketmq: sends through a cut connection', () => {
  it('loses no confirmed send; every duplicate copy is marked possible duplicate', async () => {
    const proxy = await TcpProxy.start(Number(ROCKETMQ_ENDPOINTS.split(':')[1]));
    const sender = scratch.transport({ endpoints: `127.0.0.1:${proxy.port}`, connectionName: 'redeliver-cut-sender' });
    const reader = scratch.transport({ connectionName: 'redeliver-cut-reader' });
    const topic = `redeliver-cut-${scratch.group.slice(-8)}`;
    try {
      const producer = new Producer<number>({ transport: sender, retry: { timeoutMs: 30_000 } });
      const retried = new Set<string>();
      producer.on('sendRetry', (e) => {
        if (e.kind === 'transient' || e.kind === 'unavailable') retried.add(e.messageId);
      });
      const outcomes = new Map<string, 'sent' | 'failed'>();
      await producer.send(topic, -1, { id: 'warm-up' });
      let inFlightAtCut = 0;
      for (let wave = 0; wave < 4; wave++) {
        let pending = 0;
        let cut = 0;
        const sends = Array.from({ length: 100 }, (_, i) => {
          const id = `w${wave}-${i}`;
          pending++;
          return producer.send(topic, i, { id }).then(
            () => {
              outcomes.set(id, 'sent');
              // Cut once the wave is on the wire: the tenth send confirmed, the rest written and awaiting their answers.
              if (wave === 1 && pending === 91) {
                inFlightAtCut = pending - 1;
                cut = proxy.cut();
              }
            },
            () => outcomes.set(id, 'failed'),
          ).finally(() => pending--);
        });
        await Promise.all(sends);
        if (wave === 1) expect(cut).toBeGreaterThan(0);
      }
      expect(inFlightAtCut).toBeGreaterThan(0);

      const copies = new Map<string, number>();
      const marked = new Set<string>();
      let markedCopies = 0;
      const sub = await reader.consume(topic, async (d: Delivery) => {
        copies.set(d.id, (copies.get(d.id) ?? 0) + 1);
        if (d.headers[HEADER.possibleDuplicate] === 'true') {
          marked.add(d.id);
          markedCopies++;
        }
        await d.ack();
      }, { prefetch: 64 });
      const sent = [...outcomes].filter(([, o]) => o === 'sent').map(([id]) => id);
      await until(() => sent.every((id) => copies.has(id)), 'every confirmed send on the topic', 60_000);
      await sub.close();

      const duplicates = [...copies.values()].reduce((n, c) => n + c - 1, 0);
      console.info(
        `rocketmq cut: ${outcomes.size} sends, ${inFlightAtCut} in flight at the cut, ${sent.length} confirmed, ${outcomes.size - sent.length} rejected; ` +
          `${retried.size} retried after a transient or unavailable failure; on the topic ${copies.size} ids, ${duplicates} duplicate copies, ${markedCopies} copies marked ${HEADER.possibleDuplicate}`,
      );
      // Nothing confirmed is lost, and nothing fails: the retries got through.
      expect(sent.filter((id) => !copies.has(id))).toEqual([]);
      expect(sent).toHaveLength(outcomes.size);
      // Every id with a duplicate copy was retried, and a retried send's copies after the first attempt carry the mark.
      for (const [id, n] of copies) if (n > 1) expect(marked.has(id) && retried.has(id)).toBe(true);
      for (const id of marked) expect(retried.has(id)).toBe(true);
    } finally {
      await sender.close();
      await reader.close();
      await proxy.close();
    }
  }, 120_000);
});
