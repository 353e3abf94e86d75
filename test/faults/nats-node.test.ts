/**
 * The fault suite's own NATS servers: acknowledged stream data survives
 * kill -9 and a graceful restart, a stalled server answers nothing until it
 * resumes, the account storage limit refuses writes until it is lifted, the
 * proxy's cut closes only the connections through it, and a three-node
 * cluster elects leaders that move on step-down and after a leader's kill.
 */
import { existsSync } from 'node:fs';
import { jetstream, type JetStreamClient } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NatsCluster, natsNodeSkipReason } from '../support/nats-node.js';
import { portOpen } from '../support/rabbit-node.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const skip = Boolean(natsNodeSkipReason());

/** Publishes `count` messages to `subject`, each awaited (acknowledged by the stream). */
async function publishAcked(js: JetStreamClient, subject: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) await js.publish(subject, `m-${i}`, { msgID: `m-${i}` });
}

describe.skipIf(skip)('NatsCluster, one server', () => {
  let node: NatsCluster;
  const connections: NatsConnection[] = [];

  const open = async (port = node.port()) => {
    const nc = await connect({ servers: `nats://127.0.0.1:${port}`, reconnectTimeWait: 100, maxReconnectAttempts: -1, ignoreClusterUpdates: true });
    connections.push(nc);
    return nc;
  };

  const messagesIn = (stream: string) => node.withManager(async (jsm) => (await jsm.streams.info(stream)).state.messages);

  beforeAll(async () => {
    node = await NatsCluster.start();
  }, 30_000);

  afterAll(async () => {
    for (const nc of connections) await nc.close().catch(() => undefined);
    await node?.stop();
  }, 30_000);

  it('listens on ports of its own and is ready with JetStream', async () => {
    expect(node.port()).not.toBe(4222);
    expect(await portOpen(node.port())).toBe(true);
    expect(await node.withManager(async (jsm) => (await jsm.getAccountInfo()).limits.max_storage)).toBe(-1);
  });

  it('keeps every acknowledged message across kill -9, a new boot on the same store, and a graceful restart', async () => {
    await node.withManager((jsm) => jsm.streams.add({ name: 'KEEP', subjects: ['keep'] }));
    await publishAcked(jetstream(await open()), 'keep', 500);
    await node.kill(1);
    expect(await portOpen(node.port())).toBe(false);
    await node.boot(1);
    expect(await messagesIn('KEEP')).toBe(500);
    await jetstream(await open()).publish('keep', 'one more');
    await node.restart(1);
    expect(await messagesIn('KEEP')).toBe(501);
  }, 60_000);

  it('answers nothing while stalled and everything once resumed', async () => {
    const nc = await open();
    node.stall(1);
    try {
      await expect(nc.request('nobody.listens', undefined, { timeout: 500 })).rejects.toThrow();
      expect(await portOpen(node.port())).toBe(true);
    } finally {
      node.resume(1);
    }
    await expect(nc.flush()).resolves.toBeUndefined();
    await expect(jetstream(nc).publish('keep', 'after the stall')).resolves.toMatchObject({ stream: 'KEEP' });
  }, 30_000);

  it('refuses stream writes under a storage limit of 1 byte and takes them again once it is lifted', async () => {
    const js = jetstream(await open());
    const before = await messagesIn('KEEP');
    await node.limitStorage(1);
    try {
      await expect(js.publish('keep', 'refused')).rejects.toThrow(/resource limits exceeded/);
    } finally {
      await node.limitStorage(undefined);
    }
    expect(await messagesIn('KEEP')).toBe(before);
    await js.publish('keep', 'stored');
    expect(await messagesIn('KEEP')).toBe(before + 1);
  }, 30_000);

  it('cuts the connections through the proxy and only those; they reconnect through it', async () => {
    const proxy = await TcpProxy.start(node.port());
    try {
      const through = await open(proxy.port);
      const direct = await open();
      const events: string[] = [];
      const directEvents: string[] = [];
      void (async () => {
        for await (const status of direct.status()) directEvents.push(status.type);
      })();
      const reconnected = (async () => {
        for await (const status of through.status()) {
          events.push(status.type);
          if (status.type === 'reconnect') return;
        }
      })();
      expect(proxy.connections).toBe(1);
      expect(proxy.cut()).toBe(1);
      await reconnected;
      expect(events).toContain('disconnect');
      await expect(direct.flush()).resolves.toBeUndefined();
      expect(directEvents.filter((type) => type === 'disconnect' || type === 'reconnect')).toEqual([]);
      await expect(through.flush()).resolves.toBeUndefined();
      expect(proxy.connections).toBe(1);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it('removes its directory when stopped', async () => {
    const other = await NatsCluster.start();
    expect(existsSync(other.baseDir)).toBe(true);
    await other.stop();
    expect(existsSync(other.baseDir)).toBe(false);
    await other.stop();
  }, 30_000);
});

describe.skipIf(skip)('NatsCluster, three nodes', () => {
  let cluster: NatsCluster;
  let nc: NatsConnection;

  beforeAll(async () => {
    cluster = await NatsCluster.start({ nodes: 3 });
  }, 60_000);

  afterAll(async () => {
    await nc?.close().catch(() => undefined);
    await cluster?.stop();
  }, 30_000);

  it('is up with a metadata leader and moves stream and consumer leaders on step-down', async () => {
    expect(cluster.nodes).toEqual([1, 2, 3]);
    expect(cluster.nodes).toContain(await cluster.metaLeader());
    await cluster.withManager(async (jsm) => {
      await jsm.streams.add({ name: 'R3', subjects: ['r3'], num_replicas: 3 });
      await jsm.consumers.add('R3', { durable_name: 'c', ack_policy: 'explicit' as never });
    });
    const stream = await cluster.streamLeader('R3');
    expect(await cluster.stepDownStream('R3')).not.toBe(stream);
    const consumer = await cluster.consumerLeader('R3', 'c');
    expect(await cluster.stepDownConsumer('R3', 'c')).not.toBe(consumer);
  }, 60_000);

  it('elects a new stream leader when the leader is killed -9, keeps the acknowledged data, and takes the node back', async () => {
    const leader = await cluster.streamLeader('R3');
    const survivor = cluster.nodes.find((n) => n !== leader)!;
    nc = await connect({ servers: cluster.url(survivor), ignoreClusterUpdates: true });
    await publishAcked(jetstream(nc), 'r3', 200);
    await cluster.kill(leader);
    const next = await cluster.streamLeader('R3', 60_000);
    expect(next).not.toBe(leader);
    expect(await cluster.withManager(async (jsm) => (await jsm.streams.info('R3')).state.messages)).toBe(200);
    await cluster.boot(leader);
    expect(cluster.nodes).toContain(await cluster.metaLeader());
  }, 120_000);
});
