/**
 * A Redis server of a test's own: its own port (never 6379) and data
 * directory, with every write in the append-only file before the reply
 * (`--appendonly yes --appendfsync always`) and no RDB snapshots, so a test
 * can kill it -9, restart it, cut its clients or raise a memory limit
 * without touching the shared server. Data comes back from the AOF when the
 * server boots again on the same directory.
 *
 * Cleanup: `stop()` shuts the server down and removes the directory; if the
 * test process exits first, an exit hook kills the server -9 by pid and
 * removes the directory.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { redisAnswers } from './brokers.js';
import { freePort, portOpen } from './rabbit-node.js';
import { isTracked, trackServer, untrackServer, until } from './own-servers.js';

const SERVER = 'redis-server';

/** The name of the node's own admin connection, so `killClients` of any test prefix never cuts it. */
const ADMIN_NAME = 'redis-node-admin';

/** Options of {@link RedisNode.start}. */
export interface RedisNodeOptions {
  /** Called with progress lines (boot, kill, restart). Default silent. */
  readonly log?: (line: string) => void;
}

/** One connection as `CLIENT LIST` shows it. */
export interface RedisClientRow {
  readonly id: string;
  readonly name: string;
}


/**
 * The skip reason for a test that starts Redis servers of its own:
 * undefined when `redis-server` is installed. Throws under CI=true when it
 * is not.
 */
export function redisNodeSkipReason(): string | undefined {
  const probe = spawnSync(SERVER, ['--version'], { stdio: 'ignore' });
  if (probe.error === undefined && probe.status === 0) return undefined;
  const reason = `no ${SERVER} on the PATH to start test servers from`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  console.warn(`\n!!! SKIPPING tests on Redis servers of their own: ${reason}. !!!\n`);
  return reason;
}

/** Parses `CLIENT LIST`: one row per connection, its id and name (empty when it has none). */
export function parseClientList(output: string): RedisClientRow[] {
  return output
    .split('\n')
    .filter((line) => line.trim().length > 0)
    .map((line) => ({ id: /(?:^| )id=(\d+)/.exec(line)?.[1] ?? '', name: /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '' }))
    .filter((row) => row.id !== '');
}


/** A Redis server of this process's own. Start it with {@link RedisNode.start}. */
export class RedisNode {
  #process?: ChildProcess;
  #exited?: Promise<void>;
  #admin?: Redis;

  private constructor(
    /** The server's data directory (AOF, log). */
    readonly dir: string,
    /** The port it listens on, on 127.0.0.1. */
    readonly port: number,
    private readonly log: (line: string) => void,
  ) {}

  /** Starts a server on a free port with a fresh directory; resolves when it answers PING. */
  static async start(options: RedisNodeOptions = {}): Promise<RedisNode> {
    let port = await freePort();
    while (port === 6379) port = await freePort();
    const node = new RedisNode(mkdtempSync(join(tmpdir(), 'redeliver-redis-')), port, options.log ?? (() => undefined));
    trackServer(node);
    try {
      await node.boot();
    } catch (error) {
      node.destroySync();
      throw error;
    }
    return node;
  }

  /** The server's URL. */
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts the server on its directory (after a kill or a shutdown); resolves when it answers PING with its data loaded. */
  async boot(): Promise<void> {
    const started = Date.now();
    const child = spawn(
      SERVER,
      [
        '--port', String(this.port),
        '--bind', '127.0.0.1',
        '--dir', this.dir,
        '--appendonly', 'yes',
        '--appendfsync', 'always',
        '--save', '',
        '--daemonize', 'no',
        '--logfile', join(this.dir, 'redis.log'),
      ],
      { detached: true, stdio: 'ignore' },
    );
    child.unref();
    this.#process = child;
    this.#exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    await until(`redis-server on ${this.port} to answer PING`, 60_000, async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`redis-server on ${this.port} exited at start; see ${join(this.dir, 'redis.log')}`);
      return redisAnswers(this.url);
    }, 50);
    this.log(`redis-server up on ${this.port} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  /** Kills the server with SIGKILL; resolves when the process is gone and its port closed. */
  async kill9(): Promise<void> {
    this.log(`kill -9 redis-server on ${this.port}`);
    this.#dropAdmin();
    if (this.#process?.pid) killQuietly(this.#process.pid);
    await this.#exited;
    await until(`redis-server on ${this.port} to close its port`, 30_000, async () => !(await portOpen(this.port)), 50);
  }

  /** Freezes the server (SIGSTOP): it keeps its connections open and answers nothing until {@link resume}. */
  stall(): void {
    this.log(`stall redis-server on ${this.port}`);
    if (this.#process?.pid) signalQuietly(this.#process.pid, 'SIGSTOP');
  }

  /** Lets a stalled server run again (SIGCONT). */
  resume(): void {
    this.log(`resume redis-server on ${this.port}`);
    if (this.#process?.pid) signalQuietly(this.#process.pid, 'SIGCONT');
  }

  /** Shuts the server down gracefully (`SHUTDOWN`, the AOF flushed) and starts it again on the same directory. */
  async restart(): Promise<void> {
    this.log(`restart redis-server on ${this.port}`);
    await this.#shutdown();
    await this.boot();
  }

  /** The connections whose name starts with `namePrefix`. */
  async clients(namePrefix: string): Promise<RedisClientRow[]> {
    const list = String(await this.#command('CLIENT', 'LIST'));
    return parseClientList(list).filter((row) => row.name.startsWith(namePrefix) && row.name !== ADMIN_NAME);
  }

  /** Closes, from the server's side, the connections whose name starts with `namePrefix` and passes `filter`; resolves how many. */
  async killClients(namePrefix: string, filter: (name: string) => boolean = () => true): Promise<number> {
    const targets = (await this.clients(namePrefix)).filter((row) => filter(row.name));
    let killed = 0;
    for (const row of targets) killed += Number(await this.#command('CLIENT', 'KILL', 'ID', row.id).catch(() => 0));
    this.log(`killed ${killed} client(s) named ${namePrefix}* on ${this.port}`);
    return killed;
  }

  /**
   * Sets `maxmemory` (with `maxmemory-policy noeviction`): 1 byte makes
   * every write that may grow memory fail with OOM, a memory alarm; 0
   * clears the limit.
   */
  async setMaxmemory(bytes: number): Promise<void> {
    this.log(`maxmemory ${bytes} on ${this.port}`);
    await this.#command('CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    await this.#command('CONFIG', 'SET', 'maxmemory', String(bytes));
  }

  /** Sends one command on the node's admin connection (reconnected after a kill or restart). */
  command(...args: (string | number)[]): Promise<unknown> {
    return this.#command(...args);
  }

  /** Shuts the server down and removes its directory. Safe to call twice. */
  async stop(): Promise<void> {
    if (!isTracked(this)) return;
    await this.#shutdown().catch(() => undefined);
    this.destroySync();
  }

  /** Kills the server by pid and removes the directory, synchronously (for exit hooks). */
  destroySync(): void {
    if (!untrackServer(this)) return;
    this.#dropAdmin();
    if (this.#process?.pid) killQuietly(this.#process.pid);
    rmSync(this.dir, { recursive: true, force: true });
  }

  async #shutdown(): Promise<void> {
    this.#dropAdmin();
    const client = this.#oneShot();
    try {
      await client.connect();
      // The server closes the connection instead of replying.
      await client.call('SHUTDOWN').catch(() => undefined);
    } finally {
      client.disconnect();
    }
    await this.#exited;
    await until(`redis-server on ${this.port} to close its port`, 30_000, async () => !(await portOpen(this.port)), 50);
  }

  #command(...args: (string | number)[]): Promise<unknown> {
    this.#admin ??= (() => {
      // Fails at once while the server is down, reconnects by itself when it is back.
      const client = new Redis({ port: this.port, host: '127.0.0.1', connectionName: ADMIN_NAME, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 100 });
      client.on('error', () => undefined);
      return client;
    })();
    const admin = this.#admin;
    const [name, ...rest] = args;
    return admin.status === 'ready' ? admin.call(String(name), ...rest) : until('the admin connection', 30_000, () => admin.status === 'ready', 50).then(() => admin.call(String(name), ...rest));
  }

  #dropAdmin(): void {
    this.#admin?.disconnect();
    this.#admin = undefined;
  }

  #oneShot(): Redis {
    const client = new Redis({ port: this.port, host: '127.0.0.1', lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => undefined);
    return client;
  }
}

function killQuietly(pid: number): void {
  signalQuietly(pid, 'SIGKILL');
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}
