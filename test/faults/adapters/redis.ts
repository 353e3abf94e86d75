/**
 * The fault suite on Redis: a server of the suite's own (its own port and
 * directory, `appendfsync always`), never the shared one on 6379; or, for
 * the `failover` scenario, a set-up of its own with replicas (`sentinel`:
 * one primary, two replicas, three Sentinels, the processes finding the
 * primary through the Sentinels; `cluster`: a Redis Cluster of three
 * primaries with one replica each, the processes on a cluster url), run
 * with a given `waitReplicas`. With `network`, the `sentinel` set-up runs
 * the partition scenarios instead: each data server in a network namespace
 * of its own (`n1` to `n3`, see network/network.ts) with its Sentinel
 * beside it, so a node's isolation isolates its Sentinel too, and the
 * producer and workers in client namespaces `c1` and `c2`, finding the
 * primary through the Sentinels. With `network`, the `cluster` set-up runs
 * them on a Redis Cluster in namespaces: two nodes in each of `n1` to
 * `n3`, a primary and the replica of the next member's primary, every node
 * on its member's address, and the processes in `c1` and `c2` on a cluster
 * url naming all six; each scenario starts with the primaries back in
 * their members (a manual failover undoes an earlier row's). Each
 * scenario gets its own key prefix, so the streams, delayed sets and hashes
 * it reads at the end hold only its own messages. Depths and pending ids are
 * read off the server over the node's admin connection, not through the
 * transport under test; error-queue ids are ingested into an error store,
 * as on every transport.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { REDIS_PREFIX_ENV } from '../../../src/cli/open-transport.js';
import { GROUP, RedisKeys, type QueueKeys } from '../../../src/transports/redis/keys.js';
import { RedisNode } from '../../support/redis-node.js';
import { MASTER_NAME, RedisReplicaSet, type ServerPlacement } from '../../support/redis-replica-set.js';
import { RedisCluster } from '../../support/redis-cluster.js';
import { until } from '../../support/own-servers.js';
import { CLIENT_MEMBERS, clientMemberOf } from '../network/client-members.js';
import { Nemesis } from '../network/nemesis.js';
import { FaultNetwork } from '../network/network.js';
import type { PartitionRoles } from '../network/partitions.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { ingestErrorIds } from './error-ids.js';
import { partitionable, type FaultAdapter, type Partitionable, type Scope } from './types.js';

/** Options of {@link RedisFaultAdapter}. */
export interface RedisFaultAdapterOptions {
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
  /** Run the `failover` scenario only, on this set-up of its own instead of one server. Default: one server, no failover. */
  readonly failover?: FailoverSetup;
}

/** A set-up with replicas for the `failover` scenario, and the `waitReplicas` its processes use. */
export interface FailoverSetup {
  readonly setup: 'sentinel' | 'cluster';
  readonly waitReplicas: number;
  /**
   * The first of its ports: on `sentinel` the primary's, replicas and
   * Sentinels taking the next five; on `cluster` the six nodes take free
   * ports from there to 7299 (bus ports 10000 higher).
   */
  readonly basePort: number;
  /**
   * The servers and the scenario's processes in network namespaces of the
   * suite's own, for the partition scenarios (and no other). Needs root.
   * On `cluster`, node `i` takes port `basePort + i`. Default false.
   */
  readonly network?: boolean;
  /** `sentinel` only: `min-replicas-to-write` and `min-replicas-max-lag` on every data server (see RedisReplicaSetOptions). Default none. */
  readonly minReplicasToWrite?: { readonly replicas: number; readonly maxLagSeconds: number };
}

/** The set-up's data servers' network members, in the order of its ports (the first primary at the start). */
const NODE_MEMBERS = ['n1', 'n2', 'n3'] as const;
/**
 * The member of cluster node `index` (primaries 0 to 2, then replica `r`
 * of primary `r`, see RedisCluster): primary `i` in member `i`, its replica
 * in the next member, so each member holds one primary and the replica of
 * another member's primary, and isolating a member leaves every primary or
 * its replica with the majority.
 */
const clusterMemberOf = (index: number): string => NODE_MEMBERS[index < 3 ? index : (index - 3 + 1) % 3]!;
/** How long the drain waits without progress on the namespaced set-up (see {@link RedisFaultAdapter.stallMs}). */
const NETWORK_STALL_MS = 20_000;

const SKIPS: Record<string, string> = {
  'error-queue-full':
    'a Redis stream has no bound that refuses a write (MAXLEN trims the oldest entries instead): an error stream cannot be full; maxLength bounds sends only',
  'cluster-leader-kill': 'a Redis primary with replicas fails over in the failover scenario, on set-ups of its own (redis-sentinel-w0/w1, redis-cluster-w0/w1)',
  failover: 'runs on set-ups with replicas of its own (redis-sentinel-w0/w1, redis-cluster-w0/w1)',
};

/** Deletes a stream only when it holds no entry (`XLEN` 0); 1 when it is gone (or never was), else 0. */
const DELETE_IF_EMPTY = `#!lua
if redis.call('XLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0`;

/** Entries read per `XRANGE` or `HSCAN` call. */
const PAGE = 1_000;

/** The Redis adapter, on a server of its own, or on a set-up with replicas for the failover scenario. */
export class RedisFaultAdapter implements FaultAdapter {
  readonly transport: string;
  /** The set-up and `waitReplicas` of a failover adapter, reported on each of its rows. */
  readonly failoverSetup?: { readonly setup: string; readonly waitReplicas: number };
  /**
   * On the namespaced set-up, 20 s: a partition that loses writes (with
   * `waitReplicas` 0) leaves them unhandled for good, and a lease reclaims
   * a cut-off worker's messages in seconds.
   */
  readonly stallMs?: number;
  #node?: RedisNode;
  #set?: RedisReplicaSet;
  #cluster?: RedisCluster;
  /** The set-up's primary, as the Sentinels last named it. */
  #primary = 0;
  readonly #failover?: FailoverSetup;
  readonly #log: (line: string) => void;
  /** The keys of every queue of a live scope, by queue name (queue names are unique: they carry the scope's label). */
  readonly #queues = new Map<string, QueueKeys>();
  #network?: FaultNetwork;
  #nemesis?: Nemesis;

  constructor(options: RedisFaultAdapterOptions = {}) {
    this.#log = options.log ?? (() => undefined);
    this.#failover = options.failover;
    const failover = options.failover;
    if (failover?.network && failover.minReplicasToWrite && failover.setup !== 'sentinel') throw new Error('RedisFaultAdapter: minReplicasToWrite needs the sentinel set-up');
    const variant = failover ? `${failover.network ? '-netns' : ''}${failover.minReplicasToWrite ? `-min${failover.minReplicasToWrite.replicas}` : ''}` : '';
    this.transport = failover ? `redis-${failover.setup}${variant}-w${failover.waitReplicas}` : 'redis';
    const setup = failover && `${failover.setup}${variant}`;
    if (failover) this.failoverSetup = { setup: setup!, waitReplicas: failover.waitReplicas };
    if (failover?.network) this.stallMs = NETWORK_STALL_MS;
  }

  skipReason(scenario: string): string | undefined {
    if (this.#failover?.network) return scenario.startsWith('partition-') ? undefined : 'the namespaced set-up runs the partition scenarios only';
    if (this.#failover) return scenario === 'failover' ? undefined : 'a set-up for the failover scenario only';
    return SKIPS[scenario];
  }

  get node(): RedisNode {
    if (!this.#node) throw new Error('RedisFaultAdapter: start() first');
    return this.#node;
  }

  async start(): Promise<void> {
    let network: FaultNetwork | undefined;
    if (this.#failover?.network) {
      network = this.#network = FaultNetwork.create([...NODE_MEMBERS, ...CLIENT_MEMBERS]);
      this.#nemesis = new Nemesis(network, this.#log);
      this.#log(`network ${network.tag}: ${network.members.map((m) => `${m.name} ${m.address}`).join(', ')}`);
    }
    const placed = (memberOf: (index: number) => string) =>
      network && ((index: number): ServerPlacement => ({ host: network.member(memberOf(index)).address, command: (argv) => network.command(memberOf(index), argv) }));
    if (this.#failover?.setup === 'cluster') {
      const placement = placed(clusterMemberOf);
      this.#cluster = await RedisCluster.start({ primaries: 3, replicasPerPrimary: 1, ports: [this.#failover.basePort, 7299], placement, log: this.#log });
    } else if (this.#failover) {
      const placement = placed((index) => NODE_MEMBERS[index]!);
      const { basePort, minReplicasToWrite } = this.#failover;
      this.#set = await RedisReplicaSet.start({ basePort, replicas: 2, sentinels: 3, placement, minReplicasToWrite, log: this.#log });
      this.#primary = await this.#set.primaryPort();
    } else {
      this.#node = await RedisNode.start({ log: this.#log });
    }
  }

  async stop(): Promise<void> {
    // The servers' processes are unref'd: a timer keeps the event loop alive while their exits are awaited.
    const alive = setInterval(() => undefined, 1_000);
    try {
      this.#nemesis?.heal();
      await this.#node?.stop();
      await this.#set?.stop();
      await this.#cluster?.stop();
      this.#network?.destroy();
    } finally {
      clearInterval(alive);
    }
  }

  get partitions(): Partitionable | undefined {
    return partitionable(this.#nemesis, (scope) => this.#roles(scope));
  }

  /**
   * The node of the primary the Sentinels name now (the leader), the other
   * data nodes, and the client members. On the cluster, the leader is the
   * member of the primary that serves the scope's keys' hash slot (as most
   * nodes see it), the followers the other two members.
   */
  async #roles(scope: Scope): Promise<PartitionRoles> {
    const cluster = this.#cluster;
    if (cluster) {
      const slot = await cluster.keySlot(`{${scope.label}}`);
      const primary = await cluster.agreedPrimaryOf(slot);
      const leader = clusterMemberOf(cluster.nodes.findIndex((node) => node.port === primary));
      this.#log(`primary ${primary} of slot ${slot} on ${leader}`);
      return { leader, followers: NODE_MEMBERS.filter((m) => m !== leader), clients: CLIENT_MEMBERS };
    }
    const set = this.#set!;
    this.#primary = await set.primaryPort();
    const nodeOf = (port: number) => NODE_MEMBERS[set.dataPorts.indexOf(port)]!;
    const leader = nodeOf(this.#primary);
    this.#log(`primary ${this.#primary} on ${leader}`);
    return { leader, followers: set.dataPorts.filter((port) => port !== this.#primary).map(nodeOf), clients: CLIENT_MEMBERS };
  }

  /**
   * Kills the primary holding the scope's keys with SIGKILL and waits until
   * a replica took over (promoted by the Sentinels, or by the cluster);
   * resolves what happened, for the report. Behind Sentinel the killed
   * primary stays down (a second replica remains); on a cluster, whose
   * primaries have one replica each, `bringBack` starts it again, to
   * follow the replica that took over.
   */
  async failover(scope: Scope): Promise<{ what: string; bringBack?: () => Promise<string> }> {
    const cluster = this.#cluster;
    if (cluster) {
      const slot = await cluster.keySlot(`{${scope.label}}`);
      const { primary: old } = await cluster.nodesOfSlot(slot);
      await cluster.kill9(old);
      const killedAt = Date.now();
      let next = old;
      await until(`a replica to take slot ${slot} over`, 60_000, async () => (next = (await cluster.nodesOfSlot(slot).catch(() => ({ primary: old }))).primary) !== old, 100);
      return {
        what: `primary ${old} of slot ${slot} killed -9, replica ${next} took the slot over ${((Date.now() - killedAt) / 1000).toFixed(1)} s later`,
        // Back as the new primary's replica: with one replica per primary, waitReplicas 1 needs it.
        bringBack: async () => {
          await cluster.restart(old);
          return `${old} started again, as the replica of ${next}`;
        },
      };
    }
    const set = this.#set;
    if (!set) throw new Error('RedisFaultAdapter: failover needs a failover set-up');
    const old = await set.primaryPort();
    await set.kill9(old);
    const killedAt = Date.now();
    this.#primary = await set.newPrimary(old);
    return { what: `primary ${old} killed -9, replica ${this.#primary} promoted ${((Date.now() - killedAt) / 1000).toFixed(1)} s later` };
  }

  /** One command to the server, or to the set-up's primary (on a cluster, the one serving `key`'s slot). */
  async #command(key: string, ...args: (string | number)[]): Promise<unknown> {
    if (this.#cluster) return this.#cluster.command(await this.#cluster.primaryOf(key), ...args);
    // Partitions fail over behind the harness's back: the primary is asked for each time.
    if (this.#network) this.#primary = await this.#set!.primaryPort();
    return this.#set ? this.#set.command(this.#primary, ...args) : this.node.command(...args);
  }

  async scope(label: string, dir: string): Promise<Scope> {
    const queue = label;
    const errorQueue = `${label}.error`;
    const keys = new RedisKeys(label);
    const work = keys.of(queue);
    const error = keys.of(errorQueue);
    this.#queues.set(queue, work);
    this.#queues.set(errorQueue, error);
    const set = this.#set;
    const cluster = this.#cluster;
    // Each row starts with primary i in member i, as the roles and the docs describe; a failover of an earlier row swapped a shard's nodes.
    if (cluster && this.#network) await cluster.restorePrimaries();
    const url = cluster
      ? `redis://${cluster.seeds.map((seed) => `${seed.host}:${seed.port}`).join(',')}`
      : set
        ? set.url(this.#primary)
        : this.node.url;
    const waitReplicas = this.#failover?.waitReplicas;
    const sentinels = set && { sentinels: set.sentinels, sentinelName: MASTER_NAME };
    const spec = (role: string): TransportSpec => ({ kind: 'redis', url, connectionName: `${label}-${role}`, keyPrefix: label, waitReplicas, ...sentinels });
    const harness = openSpec(spec('harness'));
    const network = this.#network;
    return {
      label,
      queue,
      errorQueue,
      place: network && ((role, argv) => network.command(clientMemberOf(role), argv)),
      // On a set-up with replicas, the primary at the scope's start: the CLI takes one server.
      cliTarget: url,
      cliEnv: { [REDIS_PREFIX_ENV]: label },
      spec,
      errorCount: async () => Number(await this.#command(error.stream, 'XLEN', error.stream)),
      delayedCount: async () => Number(await this.#command(work.delayed, 'ZCARD', work.delayed)),
      errorIds: () => ingestErrorIds(harness, errorQueue, join(dir, 'error-store.db')),
      pendingIds: async () => [...(await this.#streamIds(work.stream)), ...(await this.#delayedIds(work.delayedData))],
      cleanup: async () => {
        this.#queues.delete(queue);
        this.#queues.delete(errorQueue);
        await harness.close();
        await this.#deletePrefix(label);
        // The servers' logs so far, beside the scenario's evidence.
        if (network) for (const log of (cluster ?? set)!.logs()) copyFileSync(log.path, join(dir, log.name));
      },
    };
  }

  async killBroker(): Promise<void> {
    await this.node.kill9();
    await this.node.boot();
  }

  async restartBroker(): Promise<void> {
    await this.node.restart();
  }

  async stallBroker(ms: number): Promise<void> {
    this.node.stall();
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      this.node.resume();
    }
  }

  async cutConnections(scope: Scope): Promise<number> {
    return this.node.killClients(`${scope.label}-`, (name) => !name.startsWith(`${scope.label}-harness`));
  }

  async memoryAlarm(on: boolean): Promise<void> {
    await this.node.setMaxmemory(on ? 1 : 0);
  }

  /** `maxmemory` 1 (`noeviction`): every script that writes a retry or error-queue copy fails with OOM; acks, which only free memory, still run. */
  async refuseSettlements(_scope: Scope, on: boolean): Promise<void> {
    await this.node.setMaxmemory(on ? 1 : 0);
  }

  async deleteQueueIfEmpty(queue: string): Promise<boolean> {
    const { stream } = this.#keysOf(queue);
    return Number(await this.#command(stream, 'EVAL', DELETE_IF_EMPTY, 1, stream)) === 1;
  }

  async readyCount(queue: string): Promise<number> {
    const { stream } = this.#keysOf(queue);
    const length = Number(await this.#command(stream, 'XLEN', stream));
    const summary = (await this.#command(stream, 'XPENDING', stream, GROUP).catch(() => [0])) as unknown[];
    return length - Number(summary[0] ?? 0);
  }

  #keysOf(queue: string): QueueKeys {
    const keys = this.#queues.get(queue);
    if (!keys) throw new Error(`RedisFaultAdapter: ${queue} is not a queue of a live scope`);
    return keys;
  }

  /** The message ids (field `i`) of every entry in `stream`, ready or leased. */
  async #streamIds(stream: string): Promise<string[]> {
    const ids: string[] = [];
    for (let start = '-'; ; ) {
      const page = (await this.#command(stream, 'XRANGE', stream, start, '+', 'COUNT', PAGE)) as [string, string[]][];
      for (const [, fields] of page) {
        const at = fields.findIndex((field, i) => i % 2 === 0 && field === 'i');
        if (at >= 0) ids.push(fields[at + 1]!);
      }
      if (page.length < PAGE) return ids;
      start = `(${page[page.length - 1]![0]}`;
    }
  }

  /** The message ids of every delayed retry: the values of the `<token>:i` fields of `hash`. */
  async #delayedIds(hash: string): Promise<string[]> {
    const ids: string[] = [];
    let cursor = '0';
    do {
      const [next, flat] = (await this.#command(hash, 'HSCAN', hash, cursor, 'MATCH', '*:i', 'COUNT', PAGE)) as [string, string[]];
      for (let i = 0; i + 1 < flat.length; i += 2) ids.push(flat[i + 1]!);
      cursor = next;
    } while (cursor !== '0');
    return ids;
  }

  /** Deletes every key under the scope's hash tag. */
  async #deletePrefix(prefix: string): Promise<void> {
    let cursor = '0';
    do {
      const [next, keys] = (await this.#command(`{${prefix}}`, 'SCAN', cursor, 'MATCH', `{${prefix}}:*`, 'COUNT', PAGE)) as [string, string[]];
      if (keys.length > 0) await this.#command(`{${prefix}}`, 'DEL', ...keys);
      cursor = next;
    } while (cursor !== '0');
  }
}
