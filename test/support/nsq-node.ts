/**
 * nsqd servers of a test's own, with an nsqlookupd they register with, on
 * fixed loopback ports from a base the caller picks (never the shared
 * 4150/4151/4160/4161), each nsqd with a data directory of its own, so a
 * test can kill -9, restart gracefully or stall them without touching the
 * shared nsqd. Messages an nsqd wrote to its data directory come back when
 * it boots again on it.
 *
 * Ports, from `basePort`: nsqlookupd TCP/HTTP at +0/+1, nsqd `i` (from 1)
 * TCP/HTTP at +2i/+2i+1. With a `placement`, each process listens on an
 * address of its own (e.g. inside a network namespace), on the same ports.
 *
 * Cleanup: `stop()` stops every process (SIGTERM) and removes the
 * directory; if the test process exits first, an exit hook kills them -9 by
 * pid and removes the directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { NodePlacement } from './nats-node.js';
import { portOpen } from './rabbit-node.js';
import { isTracked, trackServer, untrackServer, until } from './own-servers.js';

const BIN_DIR = join(homedir(), '.cache', 'redeliver', 'brokers', 'nsq', '1.3.0', 'bin');
const NSQD = join(BIN_DIR, 'nsqd');
const NSQLOOKUPD = join(BIN_DIR, 'nsqlookupd');
/** The shared nsqd's and nsqlookupd's ports, never used here. */
const SHARED_PORTS = [4150, 4151, 4160, 4161];
const LOOPBACK: NodePlacement = { host: '127.0.0.1', command: (argv) => [...argv] };

/** nsqd settings that change what it keeps on a crash and what it costs. */
export interface NsqdSettings {
  /** `--mem-queue-size`: messages a topic or channel holds in memory before its disk queue. 0 writes every message to disk. Default nsqd's 10,000. */
  readonly memQueueSize?: number;
  /** `--sync-every`: messages per disk queue fsync. Default nsqd's 2,500. */
  readonly syncEvery?: number;
  /** `--max-msg-size`: the largest message body nsqd takes, in bytes. Default nsqd's 1,048,576. */
  readonly maxMsgSize?: number;
  /** `--max-rdy-count`: the highest RDY one connection may ask for. Default nsqd's 2,500. */
  readonly maxRdyCount?: number;
}

/** Options of {@link NsqNodes.start}. */
export interface NsqNodesOptions extends NsqdSettings {
  /** The first of the ports (see the file comment). */
  readonly basePort: number;
  /** nsqd servers. Default 1. */
  readonly nodes?: number;
  /** Called with progress lines (boot, kill, restart). Default silent. */
  readonly log?: (line: string) => void;
  /**
   * Where each process runs: the address it listens on (and nsqd
   * broadcasts to nsqlookupd) and the command line that runs it there (e.g.
   * inside a network namespace); `'lookupd'` for nsqlookupd, 1.. for nsqd.
   * Default: loopback, run directly.
   */
  readonly placement?: (node: 'lookupd' | number) => NodePlacement;
}

interface Slot {
  readonly name: string;
  readonly binary: string;
  readonly placement: NodePlacement;
  readonly tcpPort: number;
  readonly httpPort: number;
  process?: ChildProcess;
  exited?: Promise<void>;
  stalled: boolean;
}

/** Why tests on nsqd servers of their own cannot run here, or undefined when they can. Throws under CI=true. */
export function nsqNodeSkipReason(): string | undefined {
  if (existsSync(NSQD) && existsSync(NSQLOOKUPD)) return undefined;
  const reason = `no nsqd/nsqlookupd in ${BIN_DIR} (npm run brokers -- up nsq builds them)`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  console.warn(`\n!!! SKIPPING tests on nsqd servers of their own: ${reason}. !!!\n`);
  return reason;
}

/** An nsqlookupd and one or more nsqd servers of this process's own; nsqd indexes run from 1. */
export class NsqNodes {
  readonly #lookupd: Slot;
  readonly #nsqd: Slot[];
  readonly #log: (line: string) => void;
  #settings: NsqdSettings;

  private constructor(
    /** Per nsqd a data directory, per process a log. */
    readonly baseDir: string,
    options: NsqNodesOptions,
  ) {
    const base = options.basePort;
    const count = options.nodes ?? 1;
    const ports = Array.from({ length: 2 * (count + 1) }, (_, i) => base + i);
    const shared = ports.filter((p) => SHARED_PORTS.includes(p));
    if (shared.length > 0 && !options.placement) throw new RangeError(`NsqNodes: ports ${shared.join(', ')} belong to the shared nsqd/nsqlookupd`);
    const place = options.placement ?? (() => LOOPBACK);
    this.#lookupd = { name: 'nsqlookupd', binary: NSQLOOKUPD, placement: place('lookupd'), tcpPort: base, httpPort: base + 1, stalled: false };
    this.#nsqd = Array.from({ length: count }, (_, i) => ({
      name: `nsqd${i + 1}`,
      binary: NSQD,
      placement: place(i + 1),
      tcpPort: base + 2 * (i + 1),
      httpPort: base + 2 * (i + 1) + 1,
      stalled: false,
    }));
    this.#log = options.log ?? (() => undefined);
    this.#settings = { memQueueSize: options.memQueueSize, syncEvery: options.syncEvery, maxMsgSize: options.maxMsgSize, maxRdyCount: options.maxRdyCount };
  }

  /** Starts nsqlookupd and every nsqd on fresh data directories; resolves when every one answers `/ping`. */
  static async start(options: NsqNodesOptions): Promise<NsqNodes> {
    const baseDir = mkdtempSync(join(tmpdir(), 'redeliver-nsq-'));
    let nodes: NsqNodes;
    try {
      nodes = new NsqNodes(baseDir, options);
    } catch (error) {
      rmSync(baseDir, { recursive: true, force: true });
      throw error;
    }
    trackServer(nodes);
    try {
      await nodes.#boot(nodes.#lookupd, []);
      await Promise.all(nodes.nodes.map((index) => nodes.boot(index)));
    } catch (error) {
      nodes.destroySync();
      throw error;
    }
    return nodes;
  }

  /** nsqd indexes, from 1. */
  get nodes(): number[] {
    return this.#nsqd.map((_, i) => i + 1);
  }

  /** nsqd `index`'s TCP address, `<host>:<port>` (`127.0.0.1` unless placed). */
  tcpAddress(index = 1): string {
    return address(this.#slot(index), 'tcpPort');
  }

  /** nsqd `index`'s TCP port. */
  tcpPort(index = 1): number {
    return this.#slot(index).tcpPort;
  }

  /** nsqd `index`'s HTTP address, `<host>:<port>` (`127.0.0.1` unless placed). */
  httpAddress(index = 1): string {
    return address(this.#slot(index), 'httpPort');
  }

  /** nsqlookupd's HTTP address. */
  get lookupdHttpAddress(): string {
    return address(this.#lookupd, 'httpPort');
  }

  /** The settings the next boot of an nsqd uses. */
  get settings(): NsqdSettings {
    return this.#settings;
  }

  /** Changes the settings of later boots (a running nsqd keeps its own until restarted). */
  configure(settings: NsqdSettings): void {
    this.#settings = settings;
  }

  /** Starts nsqd `index` on its data directory (first boot, or after a kill or stop); resolves when it answers `/ping`. */
  async boot(index: number): Promise<void> {
    const slot = this.#slot(index);
    const data = join(this.baseDir, slot.name);
    mkdirSync(data, { recursive: true });
    const args = [
      `--tcp-address=${address(slot, 'tcpPort')}`,
      `--http-address=${address(slot, 'httpPort')}`,
      `--broadcast-address=${slot.placement.host}`,
      `--lookupd-tcp-address=${address(this.#lookupd, 'tcpPort')}`,
      `--data-path=${data}`,
    ];
    if (this.#settings.memQueueSize !== undefined) args.push(`--mem-queue-size=${this.#settings.memQueueSize}`);
    if (this.#settings.syncEvery !== undefined) args.push(`--sync-every=${this.#settings.syncEvery}`);
    if (this.#settings.maxMsgSize !== undefined) args.push(`--max-msg-size=${this.#settings.maxMsgSize}`);
    if (this.#settings.maxRdyCount !== undefined) args.push(`--max-rdy-count=${this.#settings.maxRdyCount}`);
    await this.#boot(slot, args);
  }

  /** Kills nsqd `index` with SIGKILL; resolves when it is gone and its TCP port closed. */
  async kill(index: number): Promise<void> {
    const slot = this.#slot(index);
    this.#log(`kill -9 ${slot.name}`);
    signal(slot, 'SIGKILL');
    await exited(slot);
    slot.stalled = false;
    await until(`${slot.name} to close its port`, 30_000, async () => !(await portOpen(slot.tcpPort, slot.placement.host)));
  }

  /** Stops nsqd `index` gracefully (SIGTERM: it writes what it holds in memory to its data directory) and starts it again. */
  async restart(index: number): Promise<void> {
    this.#log(`restart ${this.#slot(index).name}`);
    await this.#terminate(this.#slot(index));
    await this.boot(index);
  }

  /** Freezes nsqd `index` (SIGSTOP): its connections stay open and it answers nothing until {@link resume}. */
  stall(index: number): void {
    const slot = this.#slot(index);
    signal(slot, 'SIGSTOP');
    slot.stalled = true;
  }

  /** Lets a stalled nsqd run again (SIGCONT). */
  resume(index: number): void {
    const slot = this.#slot(index);
    signal(slot, 'SIGCONT');
    slot.stalled = false;
  }

  /** GETs `path` on nsqd `index`'s HTTP API; resolves the parsed JSON, rejects on a status other than 200. */
  async get(index: number, path: string): Promise<unknown> {
    const response = await fetch(`http://${this.httpAddress(index)}${path}`, { signal: AbortSignal.timeout(5_000) });
    if (response.status !== 200) throw new Error(`GET ${path} on ${this.#slot(index).name}: ${response.status} ${await response.text()}`);
    return response.json();
  }

  /** POSTs to `path` on nsqd `index`'s HTTP API; rejects on a status other than 200. */
  async post(index: number, path: string): Promise<void> {
    const response = await fetch(`http://${this.httpAddress(index)}${path}`, { method: 'POST', signal: AbortSignal.timeout(5_000) });
    if (response.status !== 200) throw new Error(`POST ${path} on ${this.#slot(index).name}: ${response.status} ${await response.text()}`);
  }

  /** Stops every process gracefully and removes the directory. */
  async stop(): Promise<void> {
    if (!untrackServer(this)) return;
    for (const slot of [...this.#nsqd, this.#lookupd]) await this.#terminate(slot);
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  /** Kills every process -9 and removes the directory, synchronously (the exit hook). */
  destroySync(): void {
    if (!isTracked(this)) return;
    untrackServer(this);
    for (const slot of [...this.#nsqd, this.#lookupd]) signal(slot, 'SIGKILL');
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  async #boot(slot: Slot, args: string[]): Promise<void> {
    if (slot === this.#lookupd) args = [`--tcp-address=${address(slot, 'tcpPort')}`, `--http-address=${address(slot, 'httpPort')}`, `--broadcast-address=${slot.placement.host}`];
    // A node already answering on the port would pass for this one while this one fails to bind.
    if (await pings(slot)) throw new Error(`${slot.name}: something already answers /ping on ${address(slot, 'httpPort')}; another run's node? Stop it first`);
    const started = Date.now();
    const logFile = join(this.baseDir, `${slot.name}.log`);
    const out = openSync(logFile, 'a');
    const [file, ...argv] = slot.placement.command([slot.binary, ...args]);
    const child = spawn(file!, argv, { detached: true, stdio: ['ignore', out, out] });
    closeSync(out);
    child.unref();
    slot.process = child;
    slot.stalled = false;
    slot.exited = new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.once('error', () => resolve());
    });
    await until(`${slot.name} on ${slot.tcpPort} to answer /ping`, 30_000, async () => {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${slot.name} exited at start; see ${logFile}`);
      return pings(slot);
    });
    this.#log(`${slot.name} up on ${slot.tcpPort}/${slot.httpPort} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  async #terminate(slot: Slot): Promise<void> {
    if (!slot.process || slot.process.exitCode !== null || slot.process.signalCode !== null) return;
    if (slot.stalled) signal(slot, 'SIGCONT');
    signal(slot, 'SIGTERM');
    const timer = setTimeout(() => signal(slot, 'SIGKILL'), 30_000);
    await exited(slot);
    clearTimeout(timer);
    slot.stalled = false;
  }

  #slot(index: number): Slot {
    const slot = this.#nsqd[index - 1];
    if (!slot) throw new RangeError(`NsqNodes: no nsqd ${index} (1 to ${this.#nsqd.length})`);
    return slot;
  }
}

/** A slot's `host:port` for its TCP or HTTP port. */
function address(slot: Slot, port: 'tcpPort' | 'httpPort'): string {
  return `${slot.placement.host}:${slot[port]}`;
}

async function pings(slot: Slot): Promise<boolean> {
  try {
    const response = await fetch(`http://${address(slot, 'httpPort')}/ping`, { signal: AbortSignal.timeout(1_000) });
    return response.status === 200;
  } catch {
    return false;
  }
}

/** Resolves when the slot's process is gone, keeping the event loop alive meanwhile (the child itself is unref'd). */
async function exited(slot: Slot): Promise<void> {
  const alive = setInterval(() => undefined, 1_000);
  try {
    await slot.exited;
  } finally {
    clearInterval(alive);
  }
}

function signal(slot: Slot, name: NodeJS.Signals): void {
  const pid = slot.process?.pid;
  if (pid === undefined || slot.process!.exitCode !== null || slot.process!.signalCode !== null) return;
  try {
    process.kill(pid, name);
  } catch {
    // already gone
  }
}
