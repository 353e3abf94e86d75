/**
 * An error topic on the shared nsqd gets the channel the error store and
 * the operations read it through, and no other: a channel nobody reads
 * would keep a copy of every entry for good. A dead-letter does not wait
 * for nsqlookupd: one that does not answer (cut off from the consumer)
 * must not hold a dead-letter past its delivery's lease.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../../src/transport/types.js';
import { NsqTransport } from '../../../src/transports/nsq/index.js';
import { untilDepth } from './operations-fixtures.js';
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
    await untilDepth(nsqdHttp(), errorQueue, transport.errorQueue.errorChannel, 1);
    const stats = await nsqdHttp().topicStats(errorQueue);
    expect(stats?.channels.map((c) => c.channel_name)).toEqual([transport.errorQueue.errorChannel]);
    await subscription.close();
    await transport.close();
  });

  it('a dead-letter does not wait for an nsqlookupd that does not answer', async () => {
    // An "nsqlookupd" that takes connections and never answers, as one cut off by the network.
    const sockets: Socket[] = [];
    const silent: Server = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], lookupd: [`127.0.0.1:${port}`], publishTimeoutMs: 5_000 });
    const queue = topicName('errlookupd');
    const errorQueue = `${queue}.error`;
    made.push(queue);
    const settled: { started: number; done: Promise<void> }[] = [];
    const subscription = await transport.consume(
      queue,
      (d: Delivery) => {
        const done = d.deadLetter(errorQueue, { reason: 'test' });
        // Awaited below for the first delivery; a redelivery (the failure this test looks for) must not reject unhandled.
        done.catch(() => undefined);
        settled.push({ started: performance.now(), done });
      },
      { prefetch: 5, leaseMs: 2_000 },
    );
    try {
      await transport.send(queue, { id: 'dead', body: new TextEncoder().encode('b'), headers: {} });
      await until('the dead-letter', () => settled.length === 1);
      await settled[0]!.done;
      expect(performance.now() - settled[0]!.started).toBeLessThan(1_500);
      expect(transport.stats.duplicateWindow).toBe(0);
      await untilDepth(nsqdHttp(), errorQueue, transport.errorQueue.errorChannel, 1);
      const stats = await nsqdHttp().topicStats(errorQueue);
      expect(stats?.channels.map((c) => c.channel_name)).toEqual([transport.errorQueue.errorChannel]);
    } finally {
      await subscription.close();
      await transport.close();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  }, 30_000);
});
