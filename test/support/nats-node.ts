/**
 * NATS servers with JetStream of a test's own: one server, or a three-node
 * cluster on loopback, each node with its own client, route and monitoring
 * ports and its own store directory, so a test can kill -9, restart, stall
 * or limit them without touching the shared server on 4222.
 *
 * Clients connect without credentials and land in one account of the
 * nodes' own (`no_auth_user`), whose JetStream file-storage limit
 * {@link NatsCluster.limitStorage} can lower at run time (a configuration
 * reload): every write to a stream is then refused with "resource limits
 * exceeded for account", JetStream's nearest thing to a broker memory alarm.
 *
 * A node is ready when its monitoring port answers `/healthz` with 200 and,
 * in a cluster, `/jsz` names a metadata leader.
 *
 * Cleanup: `stop()` stops the nodes (SIGTERM) and removes the directory; if
 * the test process exits first, an exit hook kills them -9 by pid and
 * removes the directory.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jetstreamManager, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { freePort, portOpen } from './rabbit-node.js';
import { isTracked, trackServer, untrackServer, until } from './own-servers.js';

const SERVER = 'nats-server';
/** The shared server's port, never used by a node here. */
const SHARED_PORT = 4222;
/** The account clients land in, and its user (the `no_auth_user`). */
const ACCOUNT = 'FAULTS';
const USER = 'faults';

/** Options of {@link NatsCluster.start}. */
export interface NatsClusterOptions {
  /** Nodes: 1 for a single server, 3 for a cluster. Default 1. */
  readonly nodes?: number;
  /** Called with progress lines (boot, kill, restart). Default silent. */
  readonly log?: (line: string) => void;
  /**
   * Where node `index` runs: the address it listens on, with NATS's default
   * ports (4222 clients, 6222 routes, 8222 monitoring), and the command line
   * that runs a program there (e.g. inside a network namespace). Default:
   * loopback, on free ports, run directly.
   */
  readonly placement?: (index: number) => NodePlacement;
  /** The nats-server program the nodes run. Default `nats-server` from the PATH (Debian's). */
  readonly server?: string;
}

/** Where a node runs (see {@link NatsClusterOptions.placement}). */
export interface NodePlacement {
  readonly host: string;
  /** The command line that runs `argv` there. */
  readonly command: (argv: readonly string[]) => string[];
}

/** NATS's default ports, used on a node's own address. */
const DEFAULT_PORTS = { client: 4222, cluster: 6222, http: 8222 };
const LOOPBACK: NodePlacement = { host: '127.0.0.1', command: (argv) => [...argv] };

interface NodeSlot {
  readonly index: number;
  /** The node's `server_name`, which JetStream reports as a leader: `n<index>`. */
  readonly name: string;
  readonly placement: NodePlacement;
  readonly clientPort: number;
  readonly clusterPort: number;
  readonly httpPort: number;
  process?: ChildProcess;
  exited?: Promise<void>;
  stalled: boolean;
}


/**
 * The skip reason for a test that starts NATS servers of its own: undefined
 * when `nats-server` is installed. Throws under CI=true when it is not.
 */
export function natsNodeSkipReason(): string | undefined {
  const probe = spawnSync(SERVER, ['--version'], { stdio: 'ignore' });
  if (probe.error === undefined && probe.status === 0) return undefined;
  const reason = `no ${SERVER} on the PATH to start test servers from`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  console.warn(`\n!!! SKIPPING tests on NATS servers of their own: ${reason}. !!!\n`);
  return reason;
}


/** GETs a node's monitoring endpoint; resolves its status and JSON body, or undefined when nothing answers within a second. */
async function monitor(slot: NodeSlot, path: string): Promise<{ status: number; body: Record<string, unknown> } | undefined> {
  try {
    const response = await fetch(`http://${slot.placement.host}:${slot.httpPort}${path}`, { signal: AbortSignal.timeout(1_000) });
    return { status: response.status, body: (await response.json().catch(() => ({}))) as Record<string, unknown> };
  } catch {
    return undefined;
  }
}

/**
 * One NATS server or a cluster of them, of this process's own. Start it with
 * {@link NatsCluster.start}; node indexes run from 1.
 */
export class NatsCluster {
  readonly #slots: NodeSlot[];
  readonly #log: (line: string) => void;
  readonly #server: string;
  /** The account's file-storage limit in bytes; -1 for none. */
  #maxFile = -1;

  private constructor(
    /** The cluster's temporary directory: per node a config file, a log and a store directory. */
    readonly baseDir: string,
    slots: NodeSlot[],
    log: (line: string) => void,
    server: string,
  ) {
    this.#slots = slots;
    this.#log = log;
    this.#server = server;
  }

  /** Starts the nodes on free ports with fresh store directories; resolves when every one is ready. */
  static async start(options: NatsClusterOptions = {}): Promise<NatsCluster> {
    const count = options.nodes ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > 5) throw new RangeError(`NatsCluster: nodes must be 1 to 5, got ${count}`);
    const ports: number[] = [];
    while (!options.placement && ports.length < 3 * count) {
      const port = await freePort();
      if (port !== SHARED_PORT && !ports.includes(port)) ports.push(port);
    }
    const slots = Array.from({ length: count }, (_, i) => ({
      index: i + 1,
      name: `n${i + 1}`,
      placement: options.placement?.(i + 1) ?? LOOPBACK,
      clientPort: options.placement ? DEFAULT_PORTS.client : ports[3 * i]!,
      clusterPort: options.placement ? DEFAULT_PORTS.cluster : ports[3 * i + 1]!,
      httpPort: options.placement ? DEFAULT_PORTS.http : ports[3 * i + 2]!,
      stalled: false,
    }));
    const cluster = new NatsCluster(mkdtempSync(join(tmpdir(), 'redeliver-nats-')), slots, options.log ?? (() => undefined), options.server ?? SERVER);
    trackServer(cluster);
    try {
      await Promise.all(cluster.nodes.map((index) => cluster.boot(index)));
    } catch (error) {
      cluster.destroySync();
      throw error;
    }
    return cluster;
  }

  /** Node indexes, from 1. */
  get nodes(): number[] {
    return this.#slots.map((slot) => slot.index);
  }

  /** The client URL of node `index` (default 1). */
  url(index = 1): string {
    const slot = this.#slot(index);
    return `nats://${slot.placement.host}:${slot.clientPort}`;
  }

  /** The client port of node `index` (default 1). */
  port(index = 1): number {
    return this.#slot(index).clientPort;
  }

  /** The store directory of node `index`, kept across kills and restarts. */
  storeDir(index: number): string {
    return join(this.baseDir, this.#slot(index).name);
  }

  /** The log file of node `index`, appended to across kills and restarts. */
  logPath(index: number): string {
    return join(this.baseDir, `${this.#slot(index).name}.log`);
  }

  /** The node index whose server name is `serverName` (as JetStream reports leaders), or undefined. */
  indexOf(serverName: string | undefined): number | undefined {
    return this.#slots.find((slot) => slot.name === serverName)?.index;
  }

  /** Starts node `index` on its store directory (first boot, or after a kill or stop); resolves when it is ready. */
  async boot(index: number): Promise<void> {
    const slot = this.#slot(index);
    mkdirSync(this.storeDir(index), { recursive: true });
    this.#writeConfig(slot);
    const started = Date.now();
    const [file, ...args] = slot.placement.command([this.#server, '-c', this.#configPath(slot), '-l', this.logPath(index)]);
    const child = spawn(file!, args, { detached: true, stdio: 'ignore' });
    child.unref();
    slot.process = child;
    slot.stalled = false;
    slot.exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    await until(`${slot.name} on ${slot.clientPort} to be ready`, 60_000, async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`nats-server ${slot.name} exited at start; see ${this.logPath(index)}`);
      return this.#ready(slot);
    });
    this.#log(`nats-server ${slot.name} up on ${slot.clientPort} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  /** Kills node `index` with SIGKILL; resolves when the process is gone and its client port closed. */
  async kill(index: number): Promise<void> {
    const slot = this.#slot(index);
    this.#log(`kill -9 nats-server ${slot.name}`);
    if (slot.process?.pid) signalQuietly(slot.process.pid, 'SIGKILL');
    await slot.exited;
    slot.stalled = false;
    // A killed server's port stays open a moment after the process is reported gone.
    await until(`${slot.name} to close its port`, 30_000, async () => !(await portOpen(slot.clientPort, slot.placement.host)));
  }

  /** Stops node `index` gracefully (SIGTERM) and starts it again on the same store directory. */
  async restart(index: number): Promise<void> {
    this.#log(`restart nats-server ${this.#slot(index).name}`);
    await this.#terminate(this.#slot(index));
    await this.boot(index);
  }

  /** Freezes node `index` (SIGSTOP): it keeps its connections open and answers nothing until {@link resume}. */
  stall(index: number): void {
    const slot = this.#slot(index);
    this.#log(`stall nats-server ${slot.name}`);
    if (slot.process?.pid) signalQuietly(slot.process.pid, 'SIGSTOP');
    slot.stalled = true;
  }

  /** Lets a stalled node `index` run again (SIGCONT). */
  resume(index: number): void {
    const slot = this.#slot(index);
    this.#log(`resume nats-server ${slot.name}`);
    if (slot.process?.pid) signalQuietly(slot.process.pid, 'SIGCONT');
    slot.stalled = false;
  }

  /**
   * Sets the clients' account's JetStream file-storage limit on every
   * running, unstalled node (a configuration reload): 1 byte refuses every
   * write to a stream ("resource limits exceeded for account"); undefined
   * lifts the limit. Resolves once those nodes have reloaded.
   */
  async limitStorage(bytes: number | undefined): Promise<void> {
    this.#maxFile = bytes ?? -1;
    this.#log(`account file storage limit ${bytes ?? 'none'}`);
    await Promise.all(
      this.#slots.filter((slot) => running(slot) && !slot.stalled).map(async (slot) => {
        const before = (await monitor(slot, '/varz'))?.body['config_load_time'];
        this.#writeConfig(slot);
        signalQuietly(slot.process!.pid!, 'SIGHUP');
        await until(`${slot.name} to reload its configuration`, 10_000, async () => {
          const now = (await monitor(slot, '/varz'))?.body['config_load_time'];
          return now !== undefined && now !== before;
        });
      }),
    );
  }

  /** The node leading the JetStream metadata (cluster only), from `/jsz` of a running node; undefined while none does. */
  async metaLeader(): Promise<number | undefined> {
    for (const slot of this.#slots.filter((s) => !s.stalled)) {
      const jsz = await monitor(slot, '/jsz');
      const leader = (jsz?.body['meta_cluster'] as { leader?: string } | undefined)?.leader;
      if (leader) return this.indexOf(leader);
    }
    return undefined;
  }

  /** The node leading `stream`; waits up to `timeoutMs` (default 30 s) while it has none. */
  async streamLeader(stream: string, timeoutMs = 30_000): Promise<number> {
    return this.#leader(`a leader of stream ${stream}`, timeoutMs, async (jsm) => (await jsm.streams.info(stream)).cluster?.leader);
  }

  /** The node leading consumer `consumer` of `stream`; waits up to `timeoutMs` (default 30 s) while it has none. */
  async consumerLeader(stream: string, consumer: string, timeoutMs = 30_000): Promise<number> {
    return this.#leader(`a leader of consumer ${stream} > ${consumer}`, timeoutMs, async (jsm) => (await jsm.consumers.info(stream, consumer)).cluster?.leader);
  }

  /** Asks the leader of `stream` to step down; resolves when another node leads it. */
  async stepDownStream(stream: string): Promise<number> {
    const before = await this.streamLeader(stream);
    await this.#stepDown(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`);
    await until(`a new leader of stream ${stream}`, 30_000, async () => (await this.streamLeader(stream).catch(() => before)) !== before, 250);
    return this.streamLeader(stream);
  }

  /** Asks the leader of consumer `consumer` of `stream` to step down; resolves when another node leads it. */
  async stepDownConsumer(stream: string, consumer: string): Promise<number> {
    const before = await this.consumerLeader(stream, consumer);
    await this.#stepDown(`$JS.API.CONSUMER.LEADER.STEPDOWN.${stream}.${consumer}`);
    await until(`a new leader of consumer ${stream} > ${consumer}`, 30_000, async () => (await this.consumerLeader(stream, consumer).catch(() => before)) !== before, 250);
    return this.consumerLeader(stream, consumer);
  }

  /**
   * Runs `use` with a JetStream manager connected to the running, unstalled
   * nodes only (no other node learnt from the cluster), then closes it.
   */
  async withManager<T>(use: (jsm: JetStreamManager) => Promise<T>): Promise<T> {
    return this.#withConnection(async (nc) => use(await jetstreamManager(nc, { timeout: 2_000 })));
  }

  /** Stops every node (SIGTERM, SIGKILL after 10 s) and removes the directory. Safe to call twice. */
  async stop(): Promise<void> {
    if (!isTracked(this)) return;
    for (const slot of this.#slots.filter((s) => s.stalled)) this.resume(slot.index);
    await Promise.all(this.#slots.map((slot) => this.#terminate(slot)));
    this.destroySync();
  }

  /** Kills every node by pid and removes the directory, synchronously (for exit hooks). */
  destroySync(): void {
    if (!untrackServer(this)) return;
    for (const slot of this.#slots) if (slot.process?.pid) signalQuietly(slot.process.pid, 'SIGKILL');
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  async #leader(what: string, timeoutMs: number, ask: (jsm: JetStreamManager) => Promise<string | undefined>): Promise<number> {
    let index: number | undefined;
    await until(what, timeoutMs, async () => (index = this.indexOf(await this.withManager(ask).catch(() => undefined))) !== undefined, 250);
    return index!;
  }

  async #stepDown(subject: string): Promise<void> {
    await this.#withConnection(async (nc) => {
      const reply = (await nc.request(subject, undefined, { timeout: 5_000 })).json<{ success?: boolean; error?: { description?: string } }>();
      if (!reply.success) throw new Error(`${subject}: ${reply.error?.description ?? 'refused'}`);
    });
  }

  async #withConnection<T>(use: (nc: NatsConnection) => Promise<T>): Promise<T> {
    const servers = this.#slots.filter((slot) => !slot.stalled && running(slot)).map((slot) => this.url(slot.index));
    const nc = await connect({ servers, name: 'nats-node-admin', ignoreClusterUpdates: true, reconnect: false, timeout: 2_000 });
    try {
      return await use(nc);
    } finally {
      await nc.close().catch(() => undefined);
    }
  }

  async #ready(slot: NodeSlot): Promise<boolean> {
    const health = await monitor(slot, '/healthz');
    if (health?.status !== 200) return false;
    if (this.#slots.length === 1) return true;
    const jsz = await monitor(slot, '/jsz');
    return Boolean((jsz?.body['meta_cluster'] as { leader?: string } | undefined)?.leader);
  }

  async #terminate(slot: NodeSlot): Promise<void> {
    const pid = slot.process?.pid;
    if (!pid || !running(slot)) return;
    if (slot.stalled) this.resume(slot.index);
    signalQuietly(pid, 'SIGTERM');
    const timer = setTimeout(() => signalQuietly(pid, 'SIGKILL'), 10_000);
    await slot.exited;
    clearTimeout(timer);
    await until(`${slot.name} to close its port`, 30_000, async () => !(await portOpen(slot.clientPort, slot.placement.host)));
  }

  #configPath(slot: NodeSlot): string {
    return join(this.baseDir, `${slot.name}.conf`);
  }

  #writeConfig(slot: NodeSlot): void {
    const lines = [
      `server_name: ${slot.name}`,
      `listen: ${slot.placement.host}:${slot.clientPort}`,
      `http: ${slot.placement.host}:${slot.httpPort}`,
      `jetstream { store_dir: "${this.storeDir(slot.index)}" }`,
      `accounts { ${ACCOUNT}: { jetstream: { max_mem: -1, max_file: ${this.#maxFile} }, users: [ { user: ${USER}, password: ${USER} } ] } }`,
      `no_auth_user: ${USER}`,
    ];
    if (this.#slots.length > 1) {
      const routes = this.#slots.map((s) => `nats-route://${s.placement.host}:${s.clusterPort}`).join(', ');
      lines.push(`cluster { name: faults, listen: ${slot.placement.host}:${slot.clusterPort}, routes: [ ${routes} ] }`);
    }
    writeFileSync(this.#configPath(slot), `${lines.join('\n')}\n`);
  }

  #slot(index: number): NodeSlot {
    const slot = this.#slots[index - 1];
    if (!slot) throw new RangeError(`NatsCluster: no node ${index} (nodes are 1 to ${this.#slots.length})`);
    return slot;
  }
}

/** Whether the node's process was started and has not exited. */
function running(slot: NodeSlot): boolean {
  return slot.process?.pid !== undefined && slot.process.exitCode === null && slot.process.signalCode === null;
}

function signalQuietly(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // Already gone.
  }
}
