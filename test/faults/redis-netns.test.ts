/**
 * The Redis set-ups the partition scenarios cut apart: a primary, two
 * replicas and three Sentinels, each data server in a network namespace of
 * its own with its Sentinel beside it; and a Redis Cluster of three
 * primaries with a replica each, two nodes in each namespace. A partition
 * scenario's figures mean something only if the leader it isolates is the
 * primary of the scope's keys, the isolation takes that node's Sentinel
 * with it (on the cluster: leaves its replica with the majority), a
 * replica is promoted, and the harness reads the new primary, not the old
 * one.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../support/own-servers.js';
import { RedisFaultAdapter, type FailoverSetup } from './adapters/redis.js';
import type { Scope } from './adapters/types.js';
import { networkUnavailableReason } from './network/ip.js';
import { openSpec } from './transport-spec.js';

const unavailable = networkUnavailableReason();

/** An adapter on `setup`, started before the enclosing describe's tests and stopped after them, and a directory of its own. */
function startedAdapter(setup: FailoverSetup, dirPrefix: string): { adapter: RedisFaultAdapter; dir: string } {
  const adapter = new RedisFaultAdapter({ failover: setup });
  const dir = mkdtempSync(join(tmpdir(), dirPrefix));
  beforeAll(async () => {
    await adapter.start();
  }, 90_000);
  afterAll(async () => {
    await adapter.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 30_000);
  return { adapter, dir };
}

/** Sends `m-1` through a producer of `scope`; resolves once the send is confirmed. */
async function sendOne(scope: Scope): Promise<void> {
  const producer = openSpec(scope.spec('producer'));
  try {
    await producer.send(scope.queue, { id: 'm-1', body: new Uint8Array([1]), headers: {} });
  } finally {
    await producer.close();
  }
}

describe.skipIf(unavailable)('RedisFaultAdapter on the sentinel set-up in namespaces', () => {
  const { adapter, dir } = startedAdapter({ setup: 'sentinel', network: true, waitReplicas: 1, basePort: 7220 }, 'redeliver-redis-netns-');

  it('names the primary as the leader; isolating it promotes a replica the harness then reads, and the old primary rejoins as a replica', async () => {
    expect(adapter.transport).toBe('redis-sentinel-netns-w1');
    expect(adapter.skipReason('partition-isolate-leader')).toBeUndefined();
    expect(adapter.skipReason('failover')).toBeDefined();
    const scope = await adapter.scope(`t${randomUUID().slice(0, 8)}`, dir);
    const { nemesis, roles } = adapter.partitions!;
    const before = await roles(scope);
    expect(before).toEqual({ leader: 'n1', followers: ['n2', 'n3'], clients: ['c1', 'c2'] });
    expect(scope.place!('worker-2', ['node'])).toEqual(nemesis.network.command('c2', ['node']));

    // Sent through the Sentinels with waitReplicas 1: on a replica before the send resolves.
    await sendOne(scope);

    nemesis.isolate(before.leader);
    try {
      let leader = before.leader;
      await until('the Sentinels of n2 and n3 to promote a replica', 60_000, async () => (leader = (await roles(scope)).leader) !== before.leader, 200);
      expect(before.followers).toContain(leader);
      // The new primary holds the confirmed send.
      expect(await scope.pendingIds()).toEqual(['m-1']);
    } finally {
      nemesis.heal();
    }
    // Back, the old primary is told to follow the new one.
    const old = new Redis({ host: nemesis.network.member('n1').address, port: 7220, maxRetriesPerRequest: 1 });
    old.on('error', () => undefined);
    try {
      await until('n1 to rejoin as a replica', 60_000, async () => ((await old.call('ROLE').catch(() => [])) as unknown[])[0] === 'slave', 500);
    } finally {
      old.disconnect();
    }
    await scope.cleanup();
  }, 180_000);
});

describe.skipIf(unavailable)('RedisFaultAdapter on the cluster set-up in namespaces', () => {
  const { adapter, dir } = startedAdapter({ setup: 'cluster', network: true, waitReplicas: 1, basePort: 7260 }, 'redeliver-redis-cluster-netns-');

  it("names the member of the scope's slot's primary as the leader; isolating it promotes its replica in the next member, which the harness then reads, and the old primary rejoins as a replica", async () => {
    expect(adapter.transport).toBe('redis-cluster-netns-w1');
    expect(adapter.skipReason('partition-isolate-leader')).toBeUndefined();
    expect(adapter.skipReason('failover')).toBeDefined();
    const scope = await adapter.scope(`t${randomUUID().slice(0, 8)}`, dir);
    const { nemesis, roles } = adapter.partitions!;
    const before = await roles(scope);
    const members = ['n1', 'n2', 'n3'];
    expect(members).toContain(before.leader);
    expect(before.followers).toEqual(members.filter((m) => m !== before.leader));
    expect(before.clients).toEqual(['c1', 'c2']);
    expect(scope.place!('worker-2', ['node'])).toEqual(nemesis.network.command('c2', ['node']));

    // Sent on the cluster url with waitReplicas 1: on the replica before the send resolves.
    await sendOne(scope);

    // Primary i is in member i, its replica in member i + 1.
    const next = members[(members.indexOf(before.leader) + 1) % 3];
    nemesis.isolate(before.leader);
    try {
      let leader = before.leader;
      await until('the majority to promote the replica', 60_000, async () => (leader = (await roles(scope)).leader) !== before.leader, 200);
      expect(leader).toBe(next);
      // The new primary holds the confirmed send.
      expect(await scope.pendingIds()).toEqual(['m-1']);
    } finally {
      nemesis.heal();
    }
    // Back, the old primary learns it was replaced and follows the new one.
    const old = new Redis({ host: nemesis.network.member(before.leader).address, port: 7260 + members.indexOf(before.leader), maxRetriesPerRequest: 1 });
    old.on('error', () => undefined);
    try {
      await until('the old primary to rejoin as a replica', 60_000, async () => ((await old.call('ROLE').catch(() => [])) as unknown[])[0] === 'slave', 500);
    } finally {
      old.disconnect();
    }
    await scope.cleanup();
  }, 180_000);
});
