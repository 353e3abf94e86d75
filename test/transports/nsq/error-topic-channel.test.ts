/**
 * An error topic on the shared nsqd gets the channel the error store and
 * the operations read it through, and no other: a channel nobody reads
 * would keep a copy of every entry for good.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../../src/transport/types.js';
import { NsqTransport } from '../../../src/transports/nsq/index.js';
import { deleteNsqTopics, nsqdHttp, nsqSkipReason, NSQD_TCP, topicName, until } from './support.js';

const skip = await nsqSkipReason();
const made: string[] = [];
afterAll(async () => {
  if (!skip) await deleteNsqTopics(nsqdHttp(), (name) => made.some((m) => name.startsWith(m)));
});

describe.skipIf(Boolean(skip))('nsq: the error topic', () => {
  it('a dead-lettered message makes the error channel only, which holds it', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP] });
    const queue = topicName('errch');
    const errorQueue = `${queue}.error`;
    made.push(queue);
    const settled: Promise<void>[] = [];
    const subscription = await transport.consume(queue, (d: Delivery) => void settled.push(d.deadLetter(errorQueue, { reason: 'test' })), { prefetch: 5 });
    await transport.send(queue, { id: 'dead', body: new TextEncoder().encode('b'), headers: {} });
    await until('the dead-letter', () => settled.length === 1);
    await settled[0];
    const stats = await nsqdHttp().topicStats(errorQueue);
    expect(stats?.channels.map((c) => c.channel_name)).toEqual([transport.errorQueue.errorChannel]);
    expect(stats?.channels[0]?.depth).toBe(1);
    await subscription.close();
    await transport.close();
  });
});
