/**
 * Where a consumer group new to a queue starts, on a broker of the test's
 * own that starts a new group at a queue's last message whatever the queue
 * holds (`initPopOffsetByCheckMsgInMem=false`; any broker does so once it
 * no longer counts a queue's first message as fresh, after a restart say).
 * A bare simple consumer of a new group skips what was sent before its
 * first receive; the transport's consumer gets all of it, and leaves a
 * group that has an offset where it is. Deleting a topic reaches the
 * broker even when the name server no longer routes it.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimpleConsumer } from 'rocketmq-client-nodejs';
import type { Delivery } from '../../../src/transport/types.js';
import { RocketMqAdmin } from '../../../src/transports/rocketmq/admin.js';
import { RocketMqTransport } from '../../../src/transports/rocketmq/index.js';
import { REQUEST, request } from '../../../src/transports/rocketmq/remoting.js';
import { RocketMqNodes, rocketMqNodesSkipReason, type RocketMqPorts } from '../../faults/rocketmq-nodes.js';

/** Ports of this test's own nodes, apart from the shared broker's and the fault suite's. */
const PORTS: RocketMqPorts = { nameServer: 12000, brokerA: 12012, brokerB: 12022, grpcProxy: 12031, remotingProxy: 12030 };
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

const skip = rocketMqNodesSkipReason();
let nodes: RocketMqNodes | undefined;
let admin: RocketMqAdmin;

beforeAll(async () => {
  if (skip) return;
  nodes = await RocketMqNodes.start({ ports: PORTS, brokerConfig: { initPopOffsetByCheckMsgInMem: false } });
  admin = new RocketMqAdmin(nodes.nameServer, 'DefaultCluster', 1, 5_000);
}, 300_000);

afterAll(async () => {
  // The proxy ends a released telemetry stream soon after the client's close; killing the JVM first would cut it under no listener.
  await new Promise((r) => setTimeout(r, 2_000));
  await nodes?.stop();
}, 120_000);

function transport(group: string): RocketMqTransport {
  return new RocketMqTransport({ endpoints: nodes!.endpoints, nameServer: nodes!.nameServer, consumerGroup: group });
}

/** Consumes `topic` with `t`, acknowledging each delivery, until `n` ids arrived (or 30 s passed); then 2 s more for any extra. */
async function receiveIds(t: RocketMqTransport, topic: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  const sub = await t.consume(topic, (d: Delivery) => {
    ids.push(d.id);
    void d.ack();
  }, { prefetch: 16 });
  try {
    for (const start = Date.now(); ids.length < n && Date.now() - start < 30_000; ) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 2_000));
  } finally {
    await sub.close();
  }
  return ids.sort();
}

describe.skipIf(Boolean(skip))('rocketmq: where a new consumer group starts', () => {
  it('a bare consumer of a new group skips what was sent before; the transport points its new group at the first message and gets all five', { timeout: 120_000 }, async () => {
    const topic = `new-group-${randomUUID().slice(0, 8)}`;
    const sender = transport(`sender-${randomUUID().slice(0, 8)}`);
    try {
      for (let i = 0; i < 5; i++) await sender.send(topic, { id: `m-${i}`, body: Buffer.from(String(i)), headers: {} });

      const bareGroup = `bare-${randomUUID().slice(0, 8)}`;
      const bare = new SimpleConsumer({ endpoints: nodes!.endpoints, namespace: '', consumerGroup: bareGroup, subscriptions: new Map([[topic, '*']]), awaitDuration: 3_000, requestTimeout: 10_000, logger: quiet });
      await bare.startup();
      const bareSeen: string[] = [];
      try {
        for (let i = 0; i < 4; i++) {
          for (const view of await bare.receive(16, 15_000).catch(() => [])) {
            bareSeen.push(Buffer.from(view.body).toString());
            await bare.ack(view);
          }
        }
      } finally {
        await bare.shutdown();
      }
      // The broker started the bare group at the last message: the first four are skipped.
      expect(bareSeen).toEqual(['4']);

      const group = `fresh-${randomUUID().slice(0, 8)}`;
      const consumer = transport(group);
      try {
        expect(await receiveIds(consumer, topic, 5)).toEqual(['m-0', 'm-1', 'm-2', 'm-3', 'm-4']);
      } finally {
        await consumer.close();
      }

      // The group has its offset now: it is left where it is, and only what comes next is received.
      expect(await admin.startAtFirstMessage(topic, group)).toBe(0);
      await sender.send(topic, { id: 'm-5', body: Buffer.from('5'), headers: {} });
      const again = transport(group);
      try {
        expect(await receiveIds(again, topic, 1)).toEqual(['m-5']);
      } finally {
        await again.close();
      }
      await admin.deleteGroup(group);
      await admin.deleteGroup(bareGroup);
    } finally {
      await sender.close();
      await admin.deleteTopic(topic);
    }
  });

  it('deleting a topic the name server no longer routes still removes its queue from the broker', { timeout: 60_000 }, async () => {
    const topic = `unrouted-${randomUUID().slice(0, 8)}`;
    const sender = transport(`sender-${randomUUID().slice(0, 8)}`);
    try {
      for (let i = 0; i < 3; i++) await sender.send(topic, { id: `m-${i}`, body: Buffer.from(String(i)), headers: {} });
    } finally {
      await sender.close();
    }
    const [broker] = await admin.masters();
    const maxOffset = async () => Number((await request(broker!, REQUEST.getMaxOffset, { topic, queueId: '0' })).extFields['offset'] ?? 0);
    expect(await maxOffset()).toBe(3);
    await request(nodes!.nameServer, REQUEST.deleteTopicInNamesrv, { topic });
    expect(await admin.route(topic)).toBeUndefined();

    expect(await admin.deleteTopic(topic)).toBe(false);
    expect(await maxOffset()).toBe(0);
  });
});
