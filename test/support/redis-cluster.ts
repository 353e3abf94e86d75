/**
 * A Redis Cluster of a test's own: N primaries with R replicas each, every
 * node on its own loopback port (in a range the test names, never 6379) and
 * its own directory under one temporary base directory, with every write in
 * the append-only file before the reply (`--appendonly yes --appendfsync
 * always`) and no RDB snapshots. The cluster is formed with
 * `redis-cli --cluster create` and is ready once every node reports
 * `cluster_state:ok` with all 16384 slots assigned and sees every other node.
 *
 * With a `placement`, each node runs where it says (e.g. in a network
 * namespace, listening on and announcing that namespace's address, on a
 * fixed port from the start of the range), every write in the append-only
 * file once a second, and each replica is attached to a primary of the
 * test's choosing instead of the one `redis-cli` picks: the cluster is
 * formed of the primaries alone, then replica `r` (node `primaries + r`)
 * follows primary `r % primaries` (`CLUSTER MEET`, `CLUSTER REPLICATE`).
 *
 * Cleanup: `stop()` kills every node and removes the base directory; if the
 * test process exits first, an exit hook does the same by pid.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { portOpen } from './rabbit-node.js';
import { isTracked, trackServer, untrackServer, until } from './own-servers.js';
import type { ServerPlacement } from './redis-replica-set.js';

const run = promisify(execFile);

/** How many hash slots a Redis Cluster has. */
export const CLUSTER_SLOTS = 16_384;

/** The cluster bus of a node listens on its port plus this. */
const BUS_OFFSET = 10_000;

/** Options of {@link RedisCluster.start}. */
export interface RedisClusterOptions {
  /** How many primaries share the slots. Default 3 (the fewest `redis-cli --cluster create` accepts). */
  readonly primaries?: number;
  /** How many replicas each primary gets. Default 1. */
  readonly replicasPerPrimary?: number;
  /** The inclusive range of client ports the nodes may take (bus ports are 10000 higher). Default 7100–7199. */
  readonly ports?: readonly [number, number];
  /** Milliseconds a node may be unreachable before the cluster marks it failed (`cluster-node-timeout`). Default 2000. */
  readonly nodeTimeoutMs?: number;
  /** Called with progress lines (boot, create, kill, stop). Default silent. */
  readonly log?: (line: string) => void;
  /**
   * Where node `index` runs (primaries first, then replicas): the address
   * it listens on and announces (`cluster-announce-ip`), and the command
   * line that runs a program there. Node `index` takes port `ports[0] +
   * index`. Default every node on 127.0.0.1, run as is, on free ports.
   */
  readonly placement?: (index: number) => ServerPlacement;
}

/** One node of the cluster. */
export interface ClusterNode {
  /** The address it listens on (127.0.0.1 without a placement). */
  readonly host: string;
  /** Its client port. */
  readonly port: number;
  /** Its data directory (AOF, nodes.conf, log). */
  readonly dir: string;
}

/** One shard as `CLUSTER SHARDS` describes it. */
export interface ClusterShard {
  /** The slot ranges it serves, inclusive. */
  readonly slots: readonly (readonly [number, number])[];
  /** Its nodes that are not marked failed. */
  readonly nodes: readonly { readonly port: number; readonly role: 'master' | 'replica'; readonly health: string }[];
}

interface RunningNode extends ClusterNode {
  readonly placement: ServerPlacement;
  process?: ChildProcess;
  exited?: Promise<void>;
}

/** A Redis Cluster of this process's own. Start it with {@link RedisCluster.start}. */
export class RedisCluster {
  readonly #nodes: RunningNode[];
  readonly #admins = new Map<number, Redis>();

  private constructor(
    /** The directory holding every node's directory. */
    readonly dir: string,
    ports: readonly number[],
    /** How many primaries share the slots. */
    readonly primaries: number,
    private readonly nodeTimeoutMs: number,
    private readonly log: (line: string) => void,
    private readonly placement: ((index: number) => ServerPlacement) | undefined,
  ) {
    this.#nodes = ports.map((port, i) => {
      const where = placement?.(i) ?? LOOPBACK;
      return { host: where.host, port, placement: where, dir: join(dir, String(port)) };
    });
  }

  /** Starts the nodes, forms the cluster and resolves once every node reports it whole and healthy. */
  static async start(options: RedisClusterOptions = {}): Promise<RedisCluster> {
    const primaries = options.primaries ?? 3;
    const replicas = options.replicasPerPrimary ?? 1;
    if (!Number.isInteger(primaries) || primaries < 3) throw new Error(`a Redis Cluster needs at least 3 primaries, got ${primaries}`);
    if (!Number.isInteger(replicas) || replicas < 0) throw new Error(`replicasPerPrimary must be a whole number >= 0, got ${replicas}`);
    const count = primaries * (1 + replicas);
    const range = options.ports ?? [7100, 7199];
    const { placement } = options;
    if (placement && range[0] + count - 1 > range[1]) throw new Error(`a cluster of ${count} nodes does not fit in ports ${range[0]}-${range[1]}`);
    const ports = placement ? Array.from({ length: count }, (_, i) => range[0] + i) : await freeClusterPorts(count, range);
    const cluster = new RedisCluster(mkdtempSync(join(tmpdir(), 'redeliver-redis-cluster-')), ports, primaries, options.nodeTimeoutMs ?? 2_000, options.log ?? (() => undefined), placement);
    trackServer(cluster);
    try {
      if (placement) {
        for (const node of cluster.#nodes) {
          if (await portOpen(node.port, node.host)) throw new Error(`port ${node.port} on ${node.host} is taken: another server runs there`);
        }
      }
      await Promise.all(cluster.#nodes.map((node) => cluster.#boot(node)));
      if (placement) await cluster.#createPaired();
      else await cluster.#create(replicas);
      await cluster.waitHealthy();
    } catch (error) {
      cluster.destroySync();
      throw error;
    }
    return cluster;
  }

  /** Every node, primaries and replicas, in the order `redis-cli --cluster create` was given them. */
  get nodes(): readonly ClusterNode[] {
    return this.#nodes;
  }

  /** The node addresses to hand an ioredis `Cluster` as seeds. */
  get seeds(): { host: string; port: number }[] {
    return this.#nodes.map((node) => ({ host: node.host, port: node.port }));
  }

  /**
   * Resolves once every running node reports `cluster_state:ok` with all
   * slots served and knows every other running node as not failed, and
   * `CLUSTER SHARDS` on every running node shows one shard per primary,
   * each serving slots, and every running node online (a replica is listed
   * in its primary's shard, online, once it has synced with it).
   */
  async waitHealthy(timeoutMs = 60_000): Promise<void> {
    const running = () => this.#nodes.filter((node) => node.process !== undefined);
    await until('the Redis Cluster to report cluster_state:ok on every node', timeoutMs, async () => {
      for (const node of running()) {
        const info = parseInfo(String(await this.command(node.port, 'CLUSTER', 'INFO').catch(() => '')));
        if (info.get('cluster_state') !== 'ok' || info.get('cluster_slots_ok') !== String(CLUSTER_SLOTS)) return false;
        const rows = parseClusterNodes(String(await this.command(node.port, 'CLUSTER', 'NODES')));
        for (const other of running()) {
          const row = rows.find((r) => r.port === other.port);
          if (row === undefined || row.flags.some((f) => f === 'fail' || f === 'fail?' || f === 'handshake' || f === 'noaddr')) return false;
        }
      }
      for (const node of running()) {
        const shards = await this.shards(node.port).catch(() => []);
        if (shards.length !== this.primaries || shards.some((shard) => shard.slots.length === 0)) return false;
        const listed = shards.flatMap((shard) => shard.nodes);
        if (!running().every((other) => listed.some((n) => n.port === other.port && n.health === 'online'))) return false;
      }
      return true;
    }, 100);
  }

  /** The hash slot of `key`, as the cluster computes it (`CLUSTER KEYSLOT`). */
  async keySlot(key: string): Promise<number> {
    return Number(await this.command(this.#anyRunning().port, 'CLUSTER', 'KEYSLOT', key));
  }

  /** The shards as the node on `port` (default: the first running node) sees them (`CLUSTER SHARDS`). */
  async shards(port = this.#anyRunning().port): Promise<ClusterShard[]> {
    const reply = (await this.command(port, 'CLUSTER', 'SHARDS')) as unknown[];
    return reply.map((raw) => {
      const shard = pairs(raw as unknown[]);
      const flat = (shard.get('slots') as unknown[]).map(Number);
      const slots: [number, number][] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) slots.push([flat[i]!, flat[i + 1]!]);
      const nodes = (shard.get('nodes') as unknown[]).map((n) => {
        const node = pairs(n as unknown[]);
        return { port: Number(node.get('port')), role: String(node.get('role')) as 'master' | 'replica', health: String(node.get('health')) };
      });
      return { slots, nodes };
    });
  }

  /** The port of the primary that serves `slot` now, and of its replicas. */
  async nodesOfSlot(slot: number): Promise<{ primary: number; replicas: number[] }> {
    for (const shard of await this.shards()) {
      if (!shard.slots.some(([from, to]) => slot >= from && slot <= to)) continue;
      const primary = shard.nodes.find((n) => n.role === 'master' && n.health !== 'fail');
      if (primary === undefined) throw new Error(`slot ${slot} has no live primary`);
      return { primary: primary.port, replicas: shard.nodes.filter((n) => n.role === 'replica').map((n) => n.port) };
    }
    throw new Error(`slot ${slot} is served by no shard`);
  }

  /**
   * The port of the primary that serves `slot` as the most running nodes
   * see it (each asked with `CLUSTER SHARDS`, given 3 s to answer; the
   * earliest node's on a tie): a node cut off from the others, or just
   * back, may still name a primary the majority replaced.
   */
  async agreedPrimaryOf(slot: number): Promise<number> {
    const named = new Map<number, number>();
    await Promise.all(
      this.#nodes
        .filter((node) => node.process !== undefined)
        .map(async (node) => {
          const shards = await withTimeout(this.shards(node.port), 3_000).catch(() => undefined);
          const shard = shards?.find((s) => s.slots.some(([from, to]) => slot >= from && slot <= to));
          const primary = shard?.nodes.find((n) => n.role === 'master' && n.health !== 'fail');
          if (primary) named.set(primary.port, (named.get(primary.port) ?? 0) + 1);
        }),
    );
    if (named.size === 0) throw new Error(`no node names a live primary of slot ${slot}`);
    const order = (port: number) => this.#nodes.findIndex((n) => n.port === port);
    return [...named.entries()].sort((a, b) => b[1] - a[1] || order(a[0]) - order(b[0]))[0]![0];
  }

  /** The port of the primary that holds `key` now (with a placement, as most nodes see it: {@link agreedPrimaryOf}). */
  async primaryOf(key: string): Promise<number> {
    const slot = await this.keySlot(key);
    return this.placement ? this.agreedPrimaryOf(slot) : (await this.nodesOfSlot(slot)).primary;
  }

  /**
   * Makes each of the first `primaries` nodes the primary of its shard
   * again where a failover made it its replica's replica: `CLUSTER
   * FAILOVER` on it (a manual failover: the primary stops taking writes
   * until the replica has caught up, then they swap, nothing lost), tried
   * again every 5 s until it holds, then waits for the cluster to be
   * healthy. Resolves a line per swap. A placed cluster's layout (which
   * member holds which primary) holds only if every row starts from it.
   */
  async restorePrimaries(timeoutMs = 60_000): Promise<string[]> {
    const done: string[] = [];
    for (const node of this.#nodes.slice(0, this.primaries)) {
      const role = async () => ((await this.command(node.port, 'ROLE').catch(() => [])) as unknown[])[0];
      if ((await role()) === 'master') continue;
      const from = Date.now();
      let asked = 0;
      await until(`node ${node.port} to be a primary again`, timeoutMs, async () => {
        if ((await role()) === 'master') return true;
        if (Date.now() - asked >= 5_000) {
          asked = Date.now();
          await this.command(node.port, 'CLUSTER', 'FAILOVER').catch(() => undefined);
        }
        return false;
      }, 200);
      done.push(`${node.host}:${node.port} primary again (manual failover, ${((Date.now() - from) / 1000).toFixed(1)} s)`);
    }
    if (done.length > 0) await this.waitHealthy(timeoutMs);
    for (const line of done) this.log(line);
    return done;
  }

  /** The log file of every node, named `redis-<port>.log`, for a test's evidence. */
  logs(): { name: string; path: string }[] {
    return this.#nodes.map((node) => ({ name: `redis-${node.port}.log`, path: join(node.dir, 'redis.log') }));
  }

  /** Kills the node on `port` with SIGKILL; resolves when its process is gone and its port closed. */
  async kill9(port: number): Promise<void> {
    const node = this.#node(port);
    this.log(`kill -9 redis cluster node ${port}`);
    this.#dropAdmin(port);
    if (node.process?.pid) killQuietly(node.process.pid);
    await node.exited;
    node.process = undefined;
    await until(`redis cluster node ${port} to close its port`, 30_000, async () => !(await portOpen(port, node.host)), 50);
  }

  /** Starts a killed node again on its directory (its nodes.conf and AOF); resolves when it answers PING. */
  async restart(port: number): Promise<void> {
    const node = this.#node(port);
    if (node.process !== undefined) throw new Error(`redis cluster node ${port} is still running`);
    await this.#boot(node);
  }

  /** Sends one command to the node on `port` on an admin connection of the cluster's own. */
  command(port: number, ...args: (string | number)[]): Promise<unknown> {
    let admin = this.#admins.get(port);
    if (admin === undefined) {
      admin = new Redis({ port, host: this.#node(port).host, enableOfflineQueue: true, maxRetriesPerRequest: 1, retryStrategy: () => 100, connectTimeout: 2_000 });
      admin.on('error', () => undefined);
      this.#admins.set(port, admin);
    }
    const [name, ...rest] = args;
    return admin.call(String(name), ...rest);
  }

  /** Kills every node and removes the base directory. Safe to call twice. */
  async stop(): Promise<void> {
    if (!isTracked(this)) return;
    const exits = this.#nodes.map((node) => node.exited ?? Promise.resolve());
    this.destroySync();
    await Promise.all(exits);
    await Promise.all(this.#nodes.map((node) => until(`redis cluster node ${node.port} to close its port`, 30_000, async () => !(await portOpen(node.port, node.host)), 50)));
    this.log('redis cluster stopped');
  }

  /** Kills every node by pid and removes the base directory, synchronously (for exit hooks). */
  destroySync(): void {
    if (!untrackServer(this)) return;
    for (const port of [...this.#admins.keys()]) this.#dropAdmin(port);
    for (const node of this.#nodes) if (node.process?.pid) killQuietly(node.process.pid);
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #boot(node: RunningNode): Promise<void> {
    mkdirSync(node.dir, { recursive: true });
    const placed = this.placement !== undefined;
    const [file, ...argv] = node.placement.command([
      'redis-server',
      '--port', String(node.port),
      '--bind', node.host,
      ...(placed
        ? [
            // Clients from other addresses than loopback, and the address the other nodes and the clients are told.
            '--protected-mode', 'no',
            '--cluster-announce-ip', node.host,
          ]
        : []),
      '--dir', node.dir,
      '--cluster-enabled', 'yes',
      '--cluster-config-file', 'nodes.conf',
      '--cluster-node-timeout', String(this.nodeTimeoutMs),
      '--appendonly', 'yes',
      '--appendfsync', placed ? 'everysec' : 'always',
      '--save', '',
      '--daemonize', 'no',
      '--logfile', join(node.dir, 'redis.log'),
    ]);
    const child = spawn(file!, argv, { detached: true, stdio: 'ignore' });
    child.unref();
    node.process = child;
    node.exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    await until(`redis cluster node ${node.port} to answer PING`, 60_000, async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`redis cluster node ${node.port} exited at start; see ${join(node.dir, 'redis.log')}`);
      return (await this.command(node.port, 'PING').catch(() => '')) === 'PONG';
    }, 50);
    this.log(`redis cluster node up on ${node.port}`);
  }

  async #create(replicas: number): Promise<void> {
    const addresses = this.#nodes.map((node) => `127.0.0.1:${node.port}`);
    this.log(`redis-cli --cluster create ${addresses.join(' ')} --cluster-replicas ${replicas}`);
    try {
      await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes'], { timeout: 60_000 });
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string; message: string };
      throw new Error(`redis-cli --cluster create failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    }
  }

  /**
   * Forms the cluster of the primaries alone, then makes replica `r` (node
   * `primaries + r`) follow primary `r % primaries`: it meets the primary,
   * and once it knows the primary's id, replicates it.
   */
  async #createPaired(): Promise<void> {
    const primaries = this.#nodes.slice(0, this.primaries);
    const addresses = primaries.map((node) => `${node.host}:${node.port}`);
    this.log(`redis-cli --cluster create ${addresses.join(' ')} --cluster-replicas 0`);
    try {
      await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { timeout: 60_000 });
    } catch (error) {
      const e = error as { stdout?: string; stderr?: string; message: string };
      throw new Error(`redis-cli --cluster create failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    }
    const ids = await Promise.all(primaries.map(async (node) => String(await this.command(node.port, 'CLUSTER', 'MYID'))));
    await Promise.all(
      this.#nodes.slice(this.primaries).map(async (replica, r) => {
        const primary = primaries[r % this.primaries]!;
        const id = ids[r % this.primaries]!;
        await this.command(replica.port, 'CLUSTER', 'MEET', primary.host, primary.port);
        await until(`node ${replica.port} to know primary ${primary.port}`, 30_000, async () => {
          const rows = parseClusterNodes(String(await this.command(replica.port, 'CLUSTER', 'NODES')));
          const row = rows.find((r) => r.id === id);
          return row !== undefined && !row.flags.includes('handshake') && !row.flags.includes('noaddr');
        }, 100);
        await until(`node ${replica.port} to replicate ${primary.port}`, 30_000, async () => (await this.command(replica.port, 'CLUSTER', 'REPLICATE', id).catch(() => '')) === 'OK', 200);
        this.log(`redis cluster node ${replica.host}:${replica.port} replicates ${primary.host}:${primary.port}`);
      }),
    );
  }

  #node(port: number): RunningNode {
    const node = this.#nodes.find((n) => n.port === port);
    if (node === undefined) throw new Error(`no node of this cluster on port ${port}`);
    return node;
  }

  #anyRunning(): RunningNode {
    const node = this.#nodes.find((n) => n.process !== undefined);
    if (node === undefined) throw new Error('no node of the cluster is running');
    return node;
  }

  #dropAdmin(port: number): void {
    this.#admins.get(port)?.disconnect();
    this.#admins.delete(port);
  }
}

/** One row of `CLUSTER NODES`: the node's port and flags. */
export function parseClusterNodes(output: string): { id: string; port: number; flags: string[] }[] {
  return output
    .split('\n')
    .filter((line) => line.trim().length > 0)
    .map((line) => {
      const [id = '', address = '', flags = ''] = line.split(' ');
      return { id, port: Number(/:(\d+)@/.exec(address)?.[1] ?? -1), flags: flags.split(',') };
    });
}

/** `INFO`-style `name:value` lines as a map. */
export function parseInfo(output: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of output.split(/\r?\n/)) {
    const at = line.indexOf(':');
    if (at > 0) map.set(line.slice(0, at), line.slice(at + 1).trim());
  }
  return map;
}

/** `count` client ports in `range` whose port and bus port are both free now. */
async function freeClusterPorts(count: number, [low, high]: readonly [number, number]): Promise<number[]> {
  const ports: number[] = [];
  for (let port = low; port <= high && ports.length < count; port++) {
    if (port === 6379) continue;
    if (!(await portOpen(port)) && !(await portOpen(port + BUS_OFFSET))) ports.push(port);
  }
  if (ports.length < count) throw new Error(`only ${ports.length} free port(s) in ${low}-${high} for a cluster of ${count} nodes`);
  return ports;
}

const LOOPBACK: ServerPlacement = { host: '127.0.0.1', command: (argv) => [...argv] };

/** `promise`, or a rejection after `ms`. */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** A flat RESP2 `[name, value, name, value, ...]` reply as a map. */
function pairs(flat: unknown[]): Map<string, unknown> {
  const map = new Map<string, unknown>();
  for (let i = 0; i + 1 < flat.length; i += 2) map.set(String(flat[i]), flat[i + 1]);
  return map;
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}
