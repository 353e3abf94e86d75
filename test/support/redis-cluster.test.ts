import { existsSync } from 'node:fs';
import { Cluster } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { portOpen } from './rabbit-node.js';
import { CLUSTER_SLOTS } from './redis-cluster.js';
import { redisClusterPerFile } from './redis-cluster-per-file.js';
import { redisNodeSkipReason } from './redis-node.js';

describe.skipIf(Boolean(redisNodeSkipReason()))('RedisCluster: a cluster of the test\'s own', () => {
  const cluster = redisClusterPerFile({ primaries: 3, replicasPerPrimary: 1, ports: [7100, 7199] }, 90_000);

  it('runs six nodes on ports of the range, three shards of a primary and a replica, every slot served once', async () => {
    expect(cluster().nodes).toHaveLength(6);
    for (const node of cluster().nodes) expect(node.port).toBeGreaterThanOrEqual(7100), expect(node.port).toBeLessThanOrEqual(7199);
    const shards = await cluster().shards();
    expect(shards).toHaveLength(3);
    const covered = new Array<number>(CLUSTER_SLOTS).fill(0);
    for (const shard of shards) {
      expect(shard.nodes.filter((n) => n.role === 'master')).toHaveLength(1);
      expect(shard.nodes.filter((n) => n.role === 'replica')).toHaveLength(1);
      for (const [from, to] of shard.slots) for (let slot = from; slot <= to; slot++) covered[slot]! += 1;
    }
    expect(covered.every((count) => count === 1)).toBe(true);
    for (const node of cluster().nodes) {
      expect(String(await cluster().command(node.port, 'CLUSTER', 'INFO'))).toMatch(/cluster_state:ok[\s\S]*cluster_slots_ok:16384/);
    }
  });

  it('names the primary of a key, and that primary is where an ioredis Cluster writes it', async () => {
    const key = `{rc-${Math.random().toString(36).slice(2)}}:probe`;
    const slot = await cluster().keySlot(key);
    expect(slot).toBeGreaterThanOrEqual(0);
    expect(slot).toBeLessThan(CLUSTER_SLOTS);
    const { primary, replicas } = await cluster().nodesOfSlot(slot);
    expect(replicas).toHaveLength(1);
    expect(await cluster().primaryOf(key)).toBe(primary);
    const client = new Cluster(cluster().seeds);
    try {
      await client.set(key, 'here');
      expect(await cluster().command(primary, 'GET', key)).toBe('here');
      for (const other of cluster().nodes.filter((n) => n.port !== primary && !replicas.includes(n.port))) {
        expect(await cluster().command(other.port, 'CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(0);
      }
      expect(await cluster().command(primary, 'CLUSTER', 'COUNTKEYSINSLOT', slot)).toBe(1);
      await client.del(key);
    } finally {
      client.disconnect();
    }
  });

  it('kill9 stops one node and closes its port; the cluster notices', async () => {
    const { replicas } = await cluster().nodesOfSlot(0);
    const victim = replicas[0]!;
    await cluster().kill9(victim);
    expect(await portOpen(victim)).toBe(false);
    const others = cluster().nodes.filter((n) => n.port !== victim);
    const seen = async () => String(await cluster().command(others[0]!.port, 'CLUSTER', 'NODES'));
    const deadline = Date.now() + 20_000;
    while (!/ fail /.test((await seen()).split('\n').find((l) => l.includes(`:${victim}@`)) ?? '') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect((await seen()).split('\n').find((l) => l.includes(`:${victim}@`))).toMatch(/slave,fail |fail /);
    await cluster().restart(victim);
    await cluster().waitHealthy();
  }, 60_000);

  it('stop kills every node and deletes the directories; a second stop does nothing', async () => {
    const ports = cluster().nodes.map((n) => n.port);
    await cluster().stop();
    for (const port of ports) expect(await portOpen(port)).toBe(false);
    expect(existsSync(cluster().dir)).toBe(false);
    await cluster().stop();
  }, 60_000);
});
