/**
 * RabbitMQ nodes placed in the fault suite's network namespaces: each node
 * listens on its member's address under a long name, the three form one
 * cluster, every node's Raft member names the same quorum queue leader, and
 * confirmed messages sent through one node are read through another.
 */
import amqp from 'amqplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { portOpen, RabbitCluster, rabbitNodeSkipReason } from '../support/rabbit-node.js';
import { networkUnavailableReason } from './network/ip.js';
import { FaultNetwork } from './network/network.js';

const unavailable = networkUnavailableReason();
if (unavailable && process.env['CI'] === 'true') throw new Error(`${unavailable}, and CI=true: the partition tests must run in CI`);
if (unavailable) console.warn(`\n!!! SKIPPING RabbitMQ nodes in namespaces: ${unavailable}. !!!\n`);
const skip = Boolean(unavailable) || Boolean(rabbitNodeSkipReason());

/** Publishes `count` persistent messages to `queue` through `url`, each confirmed by the broker. */
async function publishConfirmed(url: string, queue: string, from: number, count: number): Promise<void> {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createConfirmChannel();
    for (let i = from; i < from + count; i++) channel.sendToQueue(queue, Buffer.from(`m-${i}`), { persistent: true });
    await channel.waitForConfirms();
  } finally {
    await connection.close().catch(() => undefined);
  }
}

/** Reads every message of `queue` through `url`, removing them; resolves their bodies. */
async function drain(url: string, queue: string): Promise<string[]> {
  const connection = await amqp.connect(url);
  try {
    const channel = await connection.createChannel();
    const bodies: string[] = [];
    for (let m = await channel.get(queue, { noAck: true }); m; m = await channel.get(queue, { noAck: true })) bodies.push(m.content.toString());
    return bodies;
  } finally {
    await connection.close().catch(() => undefined);
  }
}

describe.skipIf(skip)('RabbitCluster placed in network namespaces', () => {
  let network: FaultNetwork;
  let cluster: RabbitCluster;

  beforeAll(async () => {
    network = FaultNetwork.create(['n1', 'n2', 'n3']);
    cluster = await RabbitCluster.start({
      nodes: 3,
      extraConfig: ['cluster_partition_handling = autoheal', 'net_ticktime = 5'],
      placement: (i) => ({ host: network.member(`n${i}`).address, command: (argv) => network.command(`n${i}`, argv) }),
    });
  }, 180_000);

  afterAll(async () => {
    await cluster?.stop();
    network?.destroy();
  }, 120_000);

  it('names each node after its address and clusters the three', async () => {
    for (const i of cluster.nodes) {
      const address = network.member(`n${i}`).address;
      expect(cluster.nodeName(i)).toBe(`rabbit@${address}`);
      expect(cluster.url(i)).toBe(`amqp://guest:guest@${address}:5672`);
      expect(await portOpen(5672, address)).toBe(true);
    }
    const status = await cluster.ctl(1, 'cluster_status', '--formatter', 'json');
    const running = (JSON.parse(status) as { running_nodes: string[] }).running_nodes;
    expect([...running].sort()).toEqual(cluster.nodes.map((i) => cluster.nodeName(i)).sort());
  });

  it('finds the quorum queue leader and carries confirmed messages between the namespaces', async () => {
    const queue = `netns-${process.pid}`;
    const connection = await amqp.connect(cluster.url(1));
    await (await connection.createChannel()).assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
    await connection.close();
    const leader = await cluster.leaderOf(queue);
    expect(cluster.nodes).toContain(leader);
    const [follower, other] = cluster.nodes.filter((i) => i !== leader);
    expect(await cluster.leaderOf(queue, follower)).toBe(leader);
    await publishConfirmed(cluster.url(follower!), queue, 0, 100);
    const bodies = await drain(cluster.url(other!), queue);
    expect(new Set(bodies).size).toBe(100);
  }, 60_000);
});
