/**
 * Seed 000's traces on a real nsqd: the consumer backoff, read off nsqd's
 * `/stats` (the RDY count of the consumer's connection), and the requeue
 * schedule (scaled: a base of 1 s instead of 90 s) with the delays nsqd
 * actually held.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { Endpoint } from '../../../src/endpoint/endpoint.js';
import { linear } from '../../../src/backoff/linear.js';
import { NsqTransport } from '../../../src/transports/nsq/index.js';
import { DEFAULT_ERROR_CHANNEL } from '../../../src/transports/nsq/operations.js';
import { sendJson } from '../../support/engine-harness.js';
import { channelClients, deleteNsqTopics, NSQD_TCP, nsqdHttp, nsqSkipReason, topicName, until } from './support.js';

const skip = await nsqSkipReason();
const api = nsqdHttp();
const topics: string[] = [];

afterAll(async () => {
  if (!skip) await deleteNsqTopics(api, (name) => topics.some((t) => name.startsWith(t)));
});

async function rdy(topic: string, name: string): Promise<number | undefined> {
  return (await channelClients(api, topic)).find((c) => c.client_id === name)?.ready_count;
}

describe.skipIf(Boolean(skip))('seed 000 on nsqd', () => {
  it('consumer backoff: outcomes F F S F S S S wait 2 s, 4 s, 4 s with RDY 0, probe with RDY 1, and return to full RDY', async () => {
    const queue = topicName('cb');
    topics.push(queue);
    const name = `redeliver-seed-cb-${queue.slice(-8)}`;
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionName: name, connectionBackoff: () => 100 });
    const outcomes = ['F', 'F', 'S', 'F', 'S', 'S', 'S'];
    const ran: number[] = [];
    const backoffs: { durationMs: number; rdy: number | undefined }[] = [];
    const endpoint = new Endpoint<{ i: number }>({
      name: queue,
      transport,
      concurrency: 4,
      flowControl: { consumerBackoff: { multiplierMs: 1_000, maxMs: 120_000 } },
      recoverability: { immediateRetries: 0, delayedRetries: 1, delayedBackoff: () => 3_600_000, errorQueue: `${queue}.error` },
      handler: (m) => {
        ran.push(m.i);
        if (outcomes[m.i] === 'F') throw new Error('dependency down');
      },
    });
    const pending: Promise<void>[] = [];
    endpoint.on('consumerBackoffStarted', (e) => {
      const entry = { durationMs: e.durationMs, rdy: undefined as number | undefined };
      backoffs.push(entry);
      // RDY as nsqd has it while the consumer backs off.
      pending.push(until('RDY 0 during the backoff', async () => (entry.rdy = await rdy(queue, name)) === 0, 1_500));
    });
    await endpoint.start();
    await until('full RDY at start', async () => (await rdy(queue, name)) === 4);
    for (let i = 0; i < outcomes.length; i++) {
      if (i > 0 && outcomes[i - 1] === 'F') {
        // After a failure, the consumer probes with RDY 1 once the backoff is over.
        await until(`RDY 1 probe before message ${i}`, async () => (await rdy(queue, name)) === 1, 6_000);
      }
      await sendJson(transport, queue, `m${i}`, { i });
      await until(`message ${i} handled`, () => ran.length === i + 1, 10_000);
    }
    await Promise.all(pending);
    expect(backoffs.map((b) => b.durationMs)).toEqual([2_000, 4_000, 4_000]);
    expect(backoffs.map((b) => b.rdy)).toEqual([0, 0, 0]);
    await until('full RDY after the counter reached 0', async () => (await rdy(queue, name)) === 4, 3_000);
    await endpoint.stop();
    await transport.close();
  }, 40_000);

  it('requeue: a message failing with the defaults comes back after 1, 2, 3, 4 s (90, 180, 270, 360 s scaled) and is then given up on', async () => {
    const queue = topicName('rq');
    topics.push(queue);
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionName: 'redeliver-seed-rq', connectionBackoff: () => 100 });
    const runs: number[] = [];
    const endpoint = new Endpoint<{ i: number }>({
      name: queue,
      transport,
      concurrency: 1,
      recoverability: { immediateRetries: 0, delayedRetries: 4, delayedBackoff: linear(1_000, 10_000), errorQueue: `${queue}.error` },
      handler: () => {
        runs.push(Date.now());
        throw new Error('always');
      },
    });
    await endpoint.start();
    await sendJson(transport, queue, 'rq-1', { i: 0 });
    await until('five attempts', () => runs.length === 5, 20_000);
    // An error topic holds its entries in the error channel (the consumer channel is not made there).
    const reader = new NsqTransport({ nsqd: [NSQD_TCP], channel: DEFAULT_ERROR_CHANNEL, connectionBackoff: () => 100 });
    const errors = await new Promise<string>((resolve) => {
      void reader.consume(`${queue}.error`, (d) => {
        resolve(d.id);
        void d.ack();
      }, { prefetch: 1 });
    });
    expect(errors).toBe('rq-1');
    const held = runs.slice(1).map((t, i) => t - runs[i]!);
    // nsqd scans its deferred messages every 100 ms, and a new channel only once it is 5 s old, so the first may come later.
    for (const [i, ms] of held.entries()) expect(ms, `requeue ${i + 1}`).toBeGreaterThanOrEqual((i + 1) * 1_000);
    for (const [i, ms] of held.slice(1).entries()) expect(ms, `requeue ${i + 2}`).toBeLessThan((i + 2) * 1_000 + 1_000);
    await endpoint.stop();
    await transport.close();
    await reader.close();
  }, 40_000);
});
