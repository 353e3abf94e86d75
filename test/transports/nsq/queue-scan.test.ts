/**
 * nsqd v1.3.0 hands out deferred messages from a queue scan over a list of
 * channels it refreshes every 5 s: a channel made since the last refresh is
 * not scanned yet. A retry that would come due in that window is held by
 * the consumer and published undelayed; a delayed send is not (it may be
 * late by up to the window, docs/nsq.md). On the shared nsqd.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { NsqTransport } from '../../../src/transports/nsq/index.js';
import { QUEUE_SCAN_START_MS } from '../../../src/transports/nsq/nodes.js';
import type { Delivery } from '../../../src/transport/types.js';
import { deleteNsqTopics, nsqdHttp, nsqSkipReason, NSQD_TCP, topicName, until } from './support.js';

const skip = await nsqSkipReason();
const made: string[] = [];
afterAll(async () => {
  if (!skip) await deleteNsqTopics(nsqdHttp(), (name) => made.includes(name));
});

function queue(label: string): string {
  const name = topicName(label);
  made.push(name);
  return name;
}

describe.skipIf(Boolean(skip))('nsq: deferred messages in a channel nsqd does not scan yet', () => {
  it('a channel the transport made is new until nsqd can scan it; one that was there before is not', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP] });
    const fresh = queue('scan-new');
    const older = queue('scan-old');
    await nsqdHttp().createChannel(older, 'redeliver');
    await transport.topology.createQueue(fresh);
    await transport.topology.createQueue(older);
    const node = transport.nodes.node(NSQD_TCP);
    expect(node.scanStartsIn(fresh, 'redeliver')).toBeGreaterThan(QUEUE_SCAN_START_MS - 1_000);
    expect(node.scanStartsIn(fresh, 'redeliver')).toBeLessThanOrEqual(QUEUE_SCAN_START_MS);
    expect(node.scanStartsIn(older, 'redeliver')).toBe(0);
    await transport.close();
  });

  it('a short retry on a channel made a moment ago arrives after its delay, not after nsqd next refreshes its scan', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionBackoff: () => 100 });
    const q = queue('scan-retry');
    const got: { d: Delivery; at: number }[] = [];
    await transport.consume(q, (d) => got.push({ d, at: Date.now() }), { prefetch: 5 });
    await transport.send(q, { id: 'r', body: new Uint8Array(1), headers: {} });
    await until('the first delivery', () => got.length === 1);
    expect(transport.nodes.node(NSQD_TCP).scanStartsIn(q, 'redeliver')).toBeGreaterThan(1_000);
    const start = Date.now();
    await got[0]!.d.retryLater(300, { n: '1' });
    await until('the retry', () => got.length === 2);
    expect(got[1]!.at - start).toBeGreaterThanOrEqual(300 - 5);
    expect(got[1]!.at - start).toBeLessThan(1_000);
    expect(got[1]!.d.headers).toEqual({ n: '1' });
    await got[1]!.d.ack();
    await transport.close();
  });

  it('a retry due after nsqd scans the channel goes out at once with DPUB: the settlement does not wait for it', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionBackoff: () => 100 });
    const q = queue('scan-long');
    const got: Delivery[] = [];
    await transport.consume(q, (d) => got.push(d), { prefetch: 5 });
    await transport.send(q, { id: 'l', body: new Uint8Array(1), headers: {} });
    await until('the first delivery', () => got.length === 1);
    const start = Date.now();
    await got[0]!.retryLater(QUEUE_SCAN_START_MS + 10_000, {});
    expect(Date.now() - start).toBeLessThan(500);
    expect((await nsqdHttp().channelStats(q, 'redeliver'))?.deferred_count).toBe(1);
    await transport.close();
  });
});
