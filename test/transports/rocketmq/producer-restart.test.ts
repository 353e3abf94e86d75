/**
 * Seed 002's "the connection is closed because the broker node is shut down
 * or being restarted", on a RocketMQ 5.3.3 broker of the test's own (the
 * broker with its gRPC proxy in one JVM, as `npm run brokers` runs it): a
 * `Producer` sends a steady stream of messages while the JVM is stopped
 * (SIGTERM: its shutdown hook runs), or killed -9, and started again on its
 * store. A send
 * that finds the broker unreachable waits for it with the connection
 * backoff (1 s × 1.6 ± 20 %, at most 120 s) up to its timeout instead of
 * failing after three attempts at once. Every send settles; every
 * confirmed one is on the topic (read back whole, every stored copy); every
 * duplicate copy is marked `redeliver-possible-duplicate`.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../../src/headers/names.js';
import { Producer } from '../../../src/producer/producer.js';
import type { SendErrorKind } from '../../../src/transport/send-errors.js';
import { RocketMqAdmin } from '../../../src/transports/rocketmq/admin.js';
import { decodeProperties } from '../../../src/transports/rocketmq/codec.js';
import { RocketMqTransport } from '../../../src/transports/rocketmq/index.js';
import { TopicReader } from '../../../src/transports/rocketmq/reader.js';
import { RocketMqNodes, rocketMqNodesSkipReason, type RocketMqPorts } from '../../faults/rocketmq-nodes.js';

/** Ports of this test's own nodes, apart from the shared broker's and the fault suite's. */
const PORTS: RocketMqPorts = { nameServer: 12000, brokerA: 12012, brokerB: 12022, grpcProxy: 12031, remotingProxy: 12030 };
/** One new send every this many ms, whatever the others are doing. */
const SEND_EVERY_MS = 20;
/** Long enough for a send made as the broker goes down to see it back (a restart takes 20-60 s here). */
const SEND_TIMEOUT_MS = 180_000;

const skip = rocketMqNodesSkipReason();
let nodes: RocketMqNodes | undefined;
let sender: RocketMqTransport | undefined;
const group = `redeliver-restart-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  if (skip) return;
  nodes = await RocketMqNodes.start({ ports: PORTS });
  sender = new RocketMqTransport({ endpoints: nodes.endpoints, nameServer: nodes.nameServer, consumerGroup: group });
}, 300_000);

afterAll(async () => {
  await sender?.close();
  // The client drops its listeners from the telemetry stream it releases on close; the proxy ends that stream soon after. Killing the JVM first would cut it under no listener.
  await new Promise((r) => setTimeout(r, 2_000));
  await nodes?.stop();
}, 120_000);

async function until(condition: () => boolean, what: string, timeoutMs: number): Promise<void> {
  for (const start = Date.now(); !condition(); await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
  }
}

/** Streams sends through `stop` then a boot of the broker's JVM on its store; checks and prints the outcome. */
async function sendThrough(label: string, stop: () => Promise<void>): Promise<void> {
  const topic = `redeliver-restart-${label}-${randomUUID().slice(0, 8)}`;
  const producer = new Producer<number>({ transport: sender!, retry: { timeoutMs: SEND_TIMEOUT_MS } });
  const retries = new Map<string, SendErrorKind[]>();
  const errors = new Map<string, number>();
  producer.on('sendRetry', (e) => {
    retries.set(e.messageId, [...(retries.get(e.messageId) ?? []), e.kind]);
    const text = `${e.kind}: ${String((e.error as Error | null)?.message ?? e.error).slice(0, 90)}`;
    errors.set(text, (errors.get(text) ?? 0) + 1);
  });
  await producer.send(topic, -1, { id: 'warm-up' });

  const outcomes = new Map<string, 'sent' | 'failed'>();
  const pending: Promise<void>[] = [];
  let n = 0;
  const stream = setInterval(() => {
    const id = `s-${n++}`;
    pending.push(producer.send(topic, n, { id }).then(() => void outcomes.set(id, 'sent'), () => void outcomes.set(id, 'failed')));
  }, SEND_EVERY_MS);
  const confirmed = () => [...outcomes.values()].filter((o) => o === 'sent').length;
  let restart = { downMs: 0, stopMs: 0, bootMs: 0, sentBefore: 0, sentWhileDown: 0 };
  try {
    await until(() => confirmed() >= 200, '200 sends confirmed before the restart', 60_000);
    restart.sentBefore = n;
    const t0 = performance.now();
    await stop();
    const down = performance.now();
    await nodes!.boot('broker-a');
    const up = performance.now();
    restart = { ...restart, stopMs: down - t0, bootMs: up - down, downMs: up - t0, sentWhileDown: n - restart.sentBefore };
    // Keep sending a while after the broker is back.
    const after = n;
    await until(() => n >= after + 250, 'sends after the restart', 60_000);
  } finally {
    clearInterval(stream);
  }
  await Promise.all(pending);

  const ids = [...outcomes.keys()];
  const sent = ids.filter((id) => outcomes.get(id) === 'sent');
  const failed = ids.filter((id) => outcomes.get(id) === 'failed');
  const waited = ids.filter((id) => retries.get(id)?.includes('unavailable'));

  const reader = new TopicReader(new RocketMqAdmin(nodes!.nameServer, 'DefaultCluster', 1, 5_000), `${group}-reader`);
  const copies = new Map<string, { total: number; marked: number }>();
  for (const stored of await reader.readAll(topic)) {
    const { id, headers } = decodeProperties('', stored.properties);
    const c = copies.get(id) ?? { total: 0, marked: 0 };
    c.total++;
    if (headers[HEADER.possibleDuplicate] === 'true') c.marked++;
    copies.set(id, c);
  }
  const lost = sent.filter((id) => !copies.has(id));
  const duplicated = [...copies].filter(([, c]) => c.total > 1);
  const duplicateCopies = duplicated.reduce((sum, [, c]) => sum + c.total - 1, 0);
  const unmarkedDuplicates = duplicated.filter(([, c]) => c.marked < c.total - 1);
  const markedCopies = [...copies.values()].reduce((sum, c) => sum + c.marked, 0);
  console.info(
    `rocketmq ${label}: broker+proxy JVM down ${(restart.downMs / 1000).toFixed(1)} s (stop ${(restart.stopMs / 1000).toFixed(1)} s, boot ${(restart.bootMs / 1000).toFixed(1)} s); ` +
      `${ids.length} sends (${restart.sentWhileDown} made while it was down), ${sent.length} confirmed, ${failed.length} failed for good, ${lost.length} confirmed but lost; ` +
      `${waited.length} waited for the broker (unavailable), ${producer.stats.retries} retries; on the topic ${copies.size} ids, ${duplicated.length} duplicated (${duplicateCopies} extra copies), ${markedCopies} copies marked, ${unmarkedDuplicates.length} duplicates unmarked`,
  );
  console.info(`retry causes: ${[...errors].map(([e, c]) => `${c}× ${e}`).join(' | ')}`);

  expect(outcomes.size).toBe(n);
  expect(lost).toEqual([]);
  expect(failed).toEqual([]);
  expect(restart.sentWhileDown).toBeGreaterThan(100);
  // Sends made while it was down waited for it and got through: those refused at once by the
  // closed port were retried as 'unavailable' (how many depends on how long the port stayed
  // closed; the client queues the rest while the JVM boots), and none failed.
  expect(waited.length).toBeGreaterThan(0);
  expect(unmarkedDuplicates).toEqual([]);
  // Every copy on the topic is of a send made here.
  for (const id of copies.keys()) expect(id === 'warm-up' || outcomes.has(id)).toBe(true);
}

describe.skipIf(Boolean(skip))('rocketmq: a Producer sending through a broker restart', () => {
  it('stopped (SIGTERM) and started again: every send settles, none confirmed is lost, sends made while it is down wait for it, every duplicate is marked', async () => {
    await sendThrough('restart', () => nodes!.stopGracefully('broker-a'));
  }, 420_000);

  it('killed -9 mid-stream and started again: the same, with sends cut in flight', async () => {
    await sendThrough('kill', () => nodes!.kill('broker-a'));
  }, 420_000);
});
