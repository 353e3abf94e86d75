/**
 * A Redis primary with replicas of a test's own, optionally watched by
 * Sentinels: each server on its own port (from `basePort` up, never 6379)
 * and directory, the replicas following the primary from the start, the
 * Sentinels (`redis-server --sentinel`) monitoring it as `mymaster` with a
 * 1 s down-after, so a killed primary is replaced within seconds. With a
 * `placement`, each data server runs where it says (e.g. in a network
 * namespace of its own, on that namespace's address), Sentinel `i` beside
 * data server `i`, as on machines of their own.
 *
 * Cleanup: `stop()` kills every process and removes the directories; if
 * the test process exits first, an exit hook does the same by pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { redisAnswers } from './brokers.js';
import { portOpen } from './rabbit-node.js';
import { trackServer, untrackServer, until } from './own-servers.js';

/** The name the Sentinels monitor the primary under. */
export const MASTER_NAME = 'mymaster';

/** Options of {@link RedisReplicaSet.start}. */
export interface RedisReplicaSetOptions {
  /** The primary's port; replicas take the next ones, Sentinels the ones after. */
  readonly basePort: number;
  /** Replicas of the primary. */
  readonly replicas: number;
  /** Sentinels watching the primary (quorum: a majority of them). Default 0. */
  readonly sentinels?: number;
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
  /**
   * Where data server `index` (0 the first primary) and Sentinel `index`
   * run: the address they listen on and the command line that runs a
   * program there. Needs no more Sentinels than data servers. Default every
   * server on 127.0.0.1, run as is.
   */
  readonly placement?: (index: number) => ServerPlacement;
  /**
   * `min-replicas-to-write` on every data server (any may become the
   * primary): a primary refuses writes while fewer replicas than this
   * acknowledged it within `maxLagSeconds` (`min-replicas-max-lag`).
   * Default none: a primary takes writes with no replica.
   */
  readonly minReplicasToWrite?: { readonly replicas: number; readonly maxLagSeconds: number };
}

/** Where a server runs (see {@link RedisReplicaSetOptions.placement}). */
export interface ServerPlacement {
  /** The address it listens on, and that the others reach it at. */
  readonly host: string;
  /** The command line that runs `argv` there. */
  readonly command: (argv: readonly string[]) => string[];
}

const LOOPBACK: ServerPlacement = { host: '127.0.0.1', command: (argv) => [...argv] };

interface Server {
  readonly port: number;
  readonly child: ChildProcess;
  readonly exited: Promise<void>;
}

/** A primary, its replicas and optional Sentinels of this process's own. Start it with {@link RedisReplicaSet.start}. */
export class RedisReplicaSet {
  readonly #servers = new Map<number, Server>();
  readonly #admins = new Map<number, Redis>();
  /** Where the server on each port (data or Sentinel) runs. */
  readonly #placements = new Map<number, ServerPlacement>();
  /** Each server's log file, by port. */
  readonly #logs = new Map<number, string>();

  private constructor(
    readonly dir: string,
    /** The ports of the data servers: the first primary at the start, the others its replicas. */
    readonly dataPorts: readonly number[],
    readonly sentinelPorts: readonly number[],
    private readonly log: (line: string) => void,
    private readonly minReplicasToWrite: RedisReplicaSetOptions['minReplicasToWrite'],
  ) {}

  /** Starts the servers, waits until every replica is in sync and every Sentinel knows all of them. */
  static async start(options: RedisReplicaSetOptions): Promise<RedisReplicaSet> {
    const { basePort, replicas } = options;
    const sentinels = options.sentinels ?? 0;
    const dataPorts = Array.from({ length: replicas + 1 }, (_, i) => basePort + i);
    const sentinelPorts = Array.from({ length: sentinels }, (_, i) => basePort + replicas + 1 + i);
    if (options.placement && sentinels > dataPorts.length) throw new Error('RedisReplicaSet: with a placement, at most one Sentinel per data server');
    const set = new RedisReplicaSet(mkdtempSync(join(tmpdir(), 'redeliver-redis-set-')), dataPorts, sentinelPorts, options.log ?? (() => undefined), options.minReplicasToWrite);
    dataPorts.forEach((port, i) => set.#placements.set(port, options.placement?.(i) ?? LOOPBACK));
    sentinelPorts.forEach((port, i) => set.#placements.set(port, options.placement?.(i) ?? LOOPBACK));
    trackServer(set);
    try {
      for (const port of [...dataPorts, ...sentinelPorts]) {
        if (await portOpen(port, set.host(port))) throw new Error(`port ${port} is taken: another server runs there`);
      }
      const [primary, ...followers] = dataPorts;
      await set.#boot(primary!);
      await Promise.all(followers.map((port) => set.#boot(port, ['--replicaof', set.host(primary!), String(primary)])));
      await until(`${replicas} replicas of ${primary} in sync`, 60_000, async () => (await set.syncedReplicas(primary!)) === replicas, 100);
      await Promise.all(sentinelPorts.map((port) => set.#bootSentinel(port, primary!, Math.floor(sentinels / 2) + 1)));
      if (sentinels > 0) {
        await until('every sentinel to know the replicas and the other sentinels', 60_000, async () => {
          for (const port of sentinelPorts) {
            const seen = await set.#sentinelView(port);
            if (seen.replicas !== replicas || seen.otherSentinels !== sentinels - 1) return false;
          }
          return true;
        }, 200);
      }
    } catch (error) {
      set.destroySync();
      throw error;
    }
    set.log(`redis replica set up: data ${dataPorts.join(', ')}${sentinels > 0 ? `, sentinels ${sentinelPorts.join(', ')}` : ''}`);
    return set;
  }

  /** The Sentinels' addresses, as ioredis's `sentinels` option takes them. */
  get sentinels(): { host: string; port: number }[] {
    return this.sentinelPorts.map((port) => ({ host: this.host(port), port }));
  }

  /** The address the server on `port` listens on. */
  host(port: number): string {
    return this.#placements.get(port)?.host ?? LOOPBACK.host;
  }

  /** The URL of data server `port`. */
  url(port: number): string {
    return `redis://${this.host(port)}:${port}`;
  }

  /**
   * The port of the primary the most Sentinels that answer name (the first
   * one's on a tie: a Sentinel cut off from the others may still name a
   * primary they replaced); without Sentinels, the first data server that
   * says it is a master.
   */
  async primaryPort(): Promise<number> {
    const named = new Map<number, number>();
    for (const port of this.sentinelPorts) {
      const reply = (await this.command(port, 'SENTINEL', 'get-master-addr-by-name', MASTER_NAME).catch(() => null)) as [string, string] | null;
      if (reply) named.set(Number(reply[1]), (named.get(Number(reply[1])) ?? 0) + 1);
    }
    if (named.size > 0) return [...named.entries()].reduce((best, next) => (next[1] > best[1] ? next : best))[0];
    for (const port of this.dataPorts) {
      if (!this.#servers.has(port)) continue;
      const role = (await this.command(port, 'ROLE').catch(() => null)) as unknown[] | null;
      if (role?.[0] === 'master') return port;
    }
    throw new Error('no primary found');
  }

  /** How many replicas of the server on `port` are online (`INFO replication`). */
  async syncedReplicas(port: number): Promise<number> {
    const info = String(await this.command(port, 'INFO', 'replication'));
    return [...info.matchAll(/^slave\d+:.*state=online/gm)].length;
  }

  /** Kills the server on `port` with SIGKILL; resolves when it is gone and its port closed. */
  async kill9(port: number): Promise<void> {
    this.log(`kill -9 redis-server on ${port}`);
    const server = this.#servers.get(port);
    this.#dropAdmin(port);
    if (!server?.child.pid) return;
    signalQuietly(server.child.pid, 'SIGKILL');
    await server.exited;
    this.#servers.delete(port);
    await until(`redis-server on ${port} to close its port`, 30_000, async () => !(await portOpen(port, this.host(port))), 50);
  }

  /** Freezes the server on `port` (SIGSTOP) until {@link resume}. */
  stall(port: number): void {
    this.log(`stall redis-server on ${port}`);
    const pid = this.#servers.get(port)?.child.pid;
    if (pid) signalQuietly(pid, 'SIGSTOP');
  }

  /** Lets a stalled server run again (SIGCONT). */
  resume(port: number): void {
    this.log(`resume redis-server on ${port}`);
    const pid = this.#servers.get(port)?.child.pid;
    if (pid) signalQuietly(pid, 'SIGCONT');
  }

  /**
   * Waits until the Sentinels name a primary other than `oldPrimary` and it
   * answers as a master; resolves its port.
   */
  async newPrimary(oldPrimary: number, timeoutMs = 60_000): Promise<number> {
    let found = oldPrimary;
    await until(`a primary other than ${oldPrimary}`, timeoutMs, async () => {
      found = await this.primaryPort().catch(() => oldPrimary);
      if (found === oldPrimary) return false;
      const role = (await this.command(found, 'ROLE').catch(() => null)) as unknown[] | null;
      return role?.[0] === 'master';
    }, 100);
    this.log(`new primary ${found}`);
    return found;
  }

  /** Sends one command to the server on `port` over an admin connection of the set's own. */
  command(port: number, ...args: (string | number)[]): Promise<unknown> {
    let admin = this.#admins.get(port);
    if (!admin) {
      admin = new Redis({ host: this.host(port), port, connectionName: 'redis-set-admin', maxRetriesPerRequest: 1, retryStrategy: () => 100, connectTimeout: 2_000 });
      admin.on('error', () => undefined);
      this.#admins.set(port, admin);
    }
    return admin.call(args[0] as string, ...args.slice(1));
  }

  /** The log file of every server, named `redis-<port>.log` or `sentinel-<port>.log`, for a test's evidence. */
  logs(): { name: string; path: string }[] {
    return [...this.#logs.entries()].map(([port, path]) => ({ name: `${this.sentinelPorts.includes(port) ? 'sentinel' : 'redis'}-${port}.log`, path }));
  }

  /** Kills every server and removes the directory. Safe to call twice. */
  async stop(): Promise<void> {
    const exits = [...this.#servers.values()].map((s) => s.exited);
    this.destroySync();
    await Promise.all(exits);
  }

  /** Kills every server by pid and removes the directory, synchronously (for exit hooks). */
  destroySync(): void {
    if (!untrackServer(this)) return;
    for (const port of [...this.#admins.keys()]) this.#dropAdmin(port);
    for (const server of this.#servers.values()) {
      if (!server.child.pid) continue;
      signalQuietly(server.child.pid, 'SIGCONT');
      signalQuietly(server.child.pid, 'SIGKILL');
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #boot(port: number, extra: readonly string[] = []): Promise<void> {
    const own = mkdtempSync(join(this.dir, `${port}-`));
    const minReplicas = this.minReplicasToWrite;
    this.#logs.set(port, join(own, 'redis.log'));
    this.#spawn(port, [
      '--port', String(port),
      '--bind', this.host(port),
      // Clients from other addresses than loopback too, where a placement puts the servers on one.
      '--protected-mode', 'no',
      '--dir', own,
      '--appendonly', 'yes',
      '--appendfsync', 'everysec',
      '--save', '',
      '--daemonize', 'no',
      '--logfile', join(own, 'redis.log'),
      ...(minReplicas ? ['--min-replicas-to-write', String(minReplicas.replicas), '--min-replicas-max-lag', String(minReplicas.maxLagSeconds)] : []),
      ...extra,
    ]);
    await until(`redis-server on ${port} to answer PING`, 60_000, () => redisAnswers(this.url(port)), 50);
  }

  async #bootSentinel(port: number, primary: number, quorum: number): Promise<void> {
    const own = mkdtempSync(join(this.dir, `sentinel-${port}-`));
    const conf = join(own, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${port}`,
        `bind ${this.host(port)}`,
        'protected-mode no',
        `dir ${own}`,
        `logfile ${join(own, 'sentinel.log')}`,
        `sentinel monitor ${MASTER_NAME} ${this.host(primary)} ${primary} ${quorum}`,
        `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
        `sentinel failover-timeout ${MASTER_NAME} 10000`,
        `sentinel parallel-syncs ${MASTER_NAME} 2`,
        '',
      ].join('\n'),
    );
    this.#logs.set(port, join(own, 'sentinel.log'));
    this.#spawn(port, [conf, '--sentinel']);
    await until(`sentinel on ${port} to answer PING`, 60_000, () => redisAnswers(this.url(port)), 50);
  }

  #spawn(port: number, args: readonly string[]): void {
    const [file, ...argv] = (this.#placements.get(port) ?? LOOPBACK).command(['redis-server', ...args]);
    const child = spawn(file!, argv, { detached: true, stdio: 'ignore' });
    child.unref();
    const exited = new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    this.#servers.set(port, { port, child, exited });
  }

  /** How many replicas and other Sentinels the Sentinel on `port` knows of (`SENTINEL MASTER`). */
  async #sentinelView(port: number): Promise<{ replicas: number; otherSentinels: number }> {
    const flat = (await this.command(port, 'SENTINEL', 'MASTER', MASTER_NAME)) as string[];
    const field = (name: string) => Number(flat[flat.indexOf(name) + 1]);
    return { replicas: field('num-slaves'), otherSentinels: field('num-other-sentinels') };
  }

  #dropAdmin(port: number): void {
    this.#admins.get(port)?.disconnect();
    this.#admins.delete(port);
  }
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}
