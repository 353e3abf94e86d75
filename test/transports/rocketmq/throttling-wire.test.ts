/**
 * Seed 002's send retry against a real RocketMQ 5.3.3 broker, read off the
 * wire. A name server, a broker and a gRPC proxy of the test's own (the
 * proxy in a JVM of its own, `-pm cluster`: it reaches the broker over the
 * remoting protocol, whose `SYSTEM_BUSY` answer it turns into
 * `TOO_MANY_REQUESTS`; a proxy in the broker's JVM turns it into
 * `INTERNAL_SERVER_ERROR`), and a forwarding HTTP/2 proxy of the test's own
 * in front of it that timestamps every `SendMessage` call and its answer.
 *
 * - Throttling: the broker is made to refuse every send as busy (its
 *   transient store pool reported exhausted, `transientStorePoolEnable`
 *   switched on at run time with no pool allocated: the broker answers
 *   `[REJECTREQUEST]system busy, start flow control for a while`). The
 *   waits between a message's attempts on the wire follow 1 s, 1.6 s,
 *   2.56 s, 4.1 s ± 20 %; the throttle is lifted after the fourth refusal,
 *   and the message is stored exactly once.
 * - Other codes: a timed message while the broker's timer wheel is off is
 *   answered `INTERNAL_SERVER_ERROR`, which is retried at once.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendFailedError } from '../../../src/producer/errors.js';
import { Producer } from '../../../src/producer/producer.js';
import { RocketMqAdmin } from '../../../src/transports/rocketmq/admin.js';
import { ID_PROPERTY } from '../../../src/transports/rocketmq/codec.js';
import { RocketMqTransport } from '../../../src/transports/rocketmq/index.js';
import { TopicReader } from '../../../src/transports/rocketmq/reader.js';
import { request } from '../../../src/transports/rocketmq/remoting.js';
import { RocketMqNodes, rocketMqNodesSkipReason, type RocketMqPorts } from '../../faults/rocketmq-nodes.js';
import { GrpcWire, type WireSend } from './grpc-wire.js';

/** Ports of this test's own nodes, apart from the shared broker's and the fault suite's. */
const PORTS: RocketMqPorts = { nameServer: 12000, brokerA: 12012, brokerB: 12022, grpcProxy: 12031, remotingProxy: 12030 };
const BROKER = `127.0.0.1:${PORTS.brokerA}`;
/** RocketMQ's `UPDATE_BROKER_CONFIG` request: changes broker settings while it runs. */
const UPDATE_BROKER_CONFIG = 25;

const skip = rocketMqNodesSkipReason();
let nodes: RocketMqNodes | undefined;
let wire: GrpcWire | undefined;
let transport: RocketMqTransport | undefined;
const group = `redeliver-seed-${randomUUID().slice(0, 8)}`;
const topic = `redeliver-seed-throttle-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  if (skip) return;
  // The proxy routes clients to the port they asked on (the forwarding proxy's), not to its own.
  nodes = await RocketMqNodes.start({ layout: 'cluster', ports: PORTS, proxyConfig: { useEndpointPortFromRequest: true } });
  wire = await GrpcWire.start(PORTS.grpcProxy);
  transport = new RocketMqTransport({ endpoints: `127.0.0.1:${wire.port}`, nameServer: nodes.nameServer, consumerGroup: group });
}, 300_000);

afterAll(async () => {
  await transport?.close();
  // The client drops its listeners from a telemetry stream it released: a stream cut under it after that would throw uncaught. Let them end first.
  if (wire) await until(() => wire!.openStreams === 0, 'the client streams to end', 10_000).catch(() => undefined);
  await wire?.close();
  await nodes?.stop();
}, 120_000);

async function setBroker(name: string, value: string): Promise<void> {
  const reply = await request(BROKER, UPDATE_BROKER_CONFIG, {}, 5_000, Buffer.from(`${name}=${value}\n`));
  if (reply.code !== 0) throw new Error(`updateBrokerConfig ${name}=${value}: ${reply.code} ${reply.remark ?? ''}`);
}

async function until(condition: () => boolean, what: string, timeoutMs: number): Promise<void> {
  for (const start = Date.now(); !condition(); await new Promise((r) => setTimeout(r, 20))) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
  }
}

/** How many copies of message `id` the topic stores (every stored copy, read without consuming). */
async function storedCopies(id: string): Promise<number> {
  const reader = new TopicReader(new RocketMqAdmin(nodes!.nameServer, 'DefaultCluster', 1, 5_000), `${group}-reader`);
  const all = await reader.readAll(topic);
  return all.filter((m) => m.properties.get(ID_PROPERTY) === id).length;
}

/** The gaps between consecutive requests on the wire, in ms. */
function gaps(sends: readonly WireSend[]): number[] {
  return sends.slice(1).map((s, i) => s.requestAt - sends[i]!.requestAt);
}

describe.skipIf(Boolean(skip))('rocketmq: seed 002 on a real broker, read off the wire', () => {
  it('a throttled send waits 1 s, 1.6 s, 2.56 s, 4.1 s (± 20 %) between attempts on the wire, and is stored once after the throttling lifts', async () => {
    const producer = new Producer<string>({ transport: transport!, retry: { timeoutMs: 60_000 } });
    await producer.send(topic, 'warm-up', { id: 'warm-up' });
    expect(wire!.sendsOf('warm-up').map((s) => s.code)).toEqual([20000]);

    await setBroker('transientStorePoolEnable', 'true');
    let sending: Promise<string> | undefined;
    try {
      sending = producer.send(topic, 'throttled', { id: 'throttled-1' });
      sending.catch(() => undefined);
      await until(() => wire!.sendsOf('throttled-1').filter((s) => s.code === 42900).length >= 4, 'four throttled answers', 30_000);
    } finally {
      await setBroker('transientStorePoolEnable', 'false');
    }
    await sending;

    const attempts = wire!.sendsOf('throttled-1');
    expect(attempts.map((a) => a.code)).toEqual([42900, 42900, 42900, 42900, 20000]);
    for (const refused of attempts.slice(0, 4)) expect(refused.statusMessage).toContain('[REJECTREQUEST]system busy');
    const waits = gaps(attempts);
    console.log(`throttled attempts on the wire, waits between them: ${waits.map((w) => `${Math.round(w)} ms`).join(', ')}`);
    waits.forEach((wait, i) => {
      const nominal = 1_000 * 1.6 ** i;
      // ± 20 % jitter, and a little for the machine's scheduling (the first wait is the initial backoff, unjittered).
      expect(wait).toBeGreaterThanOrEqual(nominal * 0.8 - 50);
      expect(wait).toBeLessThanOrEqual(nominal * 1.2 + 250);
    });
    expect(producer.stats).toMatchObject({ sent: 2, throttled: 4, failed: 0 });
    expect(await storedCopies('throttled-1')).toBe(1);
  }, 120_000);

  it('an INTERNAL_SERVER_ERROR answer (a timed message while the broker timer is off) is retried at once, three attempts in all', async () => {
    const producer = new Producer<string>({ transport: transport!, retry: { timeoutMs: 60_000 } });
    await setBroker('timerWheelEnable', 'false');
    let failure: unknown;
    try {
      failure = await producer.send(topic, 'timed', { id: 'timed-1', delayMs: 5_000 }).catch((e: unknown) => e);
    } finally {
      await setBroker('timerWheelEnable', 'true');
    }
    expect(failure).toBeInstanceOf(SendFailedError);
    expect((failure as SendFailedError).reason).toBe('attempts-exhausted');
    const attempts = wire!.sendsOf('timed-1');
    expect(attempts.map((a) => a.code)).toEqual([50001, 50001, 50001]);
    expect(attempts[0]!.statusMessage).toContain('timerWheelEnable is false');
    const waits = gaps(attempts);
    console.log(`transient attempts on the wire, gaps between them: ${waits.map((w) => `${Math.round(w)} ms`).join(', ')}`);
    // At once: each next request follows its answer, not a backoff.
    attempts.slice(1).forEach((a, i) => expect(a.requestAt - attempts[i]!.answeredAt!).toBeLessThan(200));
    expect(await storedCopies('timed-1')).toBe(0);
  }, 60_000);
});
