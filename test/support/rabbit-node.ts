/**
 * RabbitMQ nodes of a test's own: one node, or a three-node cluster on
 * loopback, each with its own ports, data directory, epmd and cookie, so a
 * test can kill -9, restart or memory-alarm them without touching the shared
 * broker on 5672. `rabbitmqctl` here only ever reaches these nodes: it runs
 * from `/usr/lib/rabbitmq/bin` with this cluster's epmd port and cookie,
 * never through the `/usr/sbin` wrappers (which switch to the shared node's
 * user, directory and cookie).
 *
 * With `placement`, each node runs where the placement says (e.g. in a
 * network namespace of its own) on its own address with RabbitMQ's default
 * ports, an epmd of its own beside it on 4369, and a long node name
 * `rabbit@<address>`; `rabbitmqctl` then runs beside the node it targets.
 *
 * Cleanup: `stop()` stops the nodes and removes the directory; if the test
 * process exits first (a failed test, an uncaught error), an exit hook
 * kill -9s every node and epmd by pid and removes the directory.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { NodePlacement } from './nats-node.js';
import { isTracked, trackServer, untrackServer, until } from './own-servers.js';

const BIN = '/usr/lib/rabbitmq/bin';
/** A queue's ready and unacknowledged messages, over the queue record `Q` (Erlang). */
const MESSAGES = 'proplists:get_value(messages, rabbit_amqqueue:info(Q, [messages]), 0)';
/** A quorum queue's dead-lettered copies its target has not confirmed, 0 on other queues, over `Q` (Erlang). */
const MESSAGES_DLX = '(try proplists:get_value(messages_dlx, rabbit_amqqueue:info(Q, [messages_dlx]), 0) catch _:_ -> 0 end)';
const run = promisify(execFile);

/** Options of {@link RabbitCluster.start}. */
export interface RabbitClusterOptions {
  /** Nodes in the cluster: 1 for a single node, 3 for a quorum cluster. Default 1. */
  readonly nodes?: number;
  /** Prefix of the node names (`<prefix><i>@localhost`). Default `'rmqt'`. */
  readonly namePrefix?: string;
  /** Lines appended to every node's `rabbitmq.conf`. Default none. */
  readonly extraConfig?: readonly string[];
  /**
   * Settings of the `rabbit` application that `rabbitmq.conf` cannot set,
   * written to every node's `advanced.config` as `{rabbit, [{key, value}]}`
   * (values as Erlang terms, e.g. `{ dead_letter_worker_publisher_confirm_timeout: '2000' }`).
   * Default none.
   */
  readonly rabbitEnv?: Readonly<Record<string, string>>;
  /** Called with progress lines (boot, join, kill). Default silent. */
  readonly log?: (line: string) => void;
  /**
   * Where node `index` runs: the address it listens on, with RabbitMQ's
   * default ports (5672 AMQP, 25672 distribution, 4369 for its own epmd),
   * named `rabbit@<address>` (long names), and the command line that runs a
   * program there (e.g. inside a network namespace); every `rabbitmqctl`
   * call runs there too. Default: loopback, on free ports, one epmd for the
   * cluster, short names `<namePrefix><i>@localhost`.
   */
  readonly placement?: (index: number) => NodePlacement;
}

interface NodeSlot {
  readonly index: number;
  readonly name: string;
  readonly dir: string;
  readonly placement: NodePlacement;
  /** Whether the node has a placement of its own: long name, own epmd, default ports on its address. */
  readonly placed: boolean;
  readonly amqpPort: number;
  readonly distPort: number;
  process?: ChildProcess;
  /** The node's own epmd (placed nodes only). */
  epmd?: ChildProcess;
}

/** RabbitMQ's and epmd's default ports, used on a placed node's own address. */
const DEFAULT_PORTS = { amqp: 5672, dist: 25672, epmd: 4369 };
const LOOPBACK: NodePlacement = { host: '127.0.0.1', command: (argv) => [...argv] };


/**
 * The skip reason for a test that starts nodes of its own: undefined when
 * the RabbitMQ server is installed. Throws under CI=true when it is not.
 */
export function rabbitNodeSkipReason(): string | undefined {
  if (existsSync(join(BIN, 'rabbitmq-server'))) return undefined;
  const reason = `no RabbitMQ server installed in ${BIN} to start test nodes from`;
  if (process.env['CI'] === 'true') throw new Error(`${reason}, and CI=true: broker tests must run in CI`);
  console.warn(`\n!!! SKIPPING tests on RabbitMQ nodes of their own: ${reason}. !!!\n`);
  return reason;
}

/** One row of `rabbitmqctl list_connections pid client_properties`: the broker's pid and the client-provided connection name. */
export interface ConnectionRow {
  readonly pid: string;
  readonly name: string | undefined;
}

/** Parses the output of `rabbitmqctl list_connections pid client_properties --no-table-headers`. */
export function parseConnections(output: string): ConnectionRow[] {
  return output
    .split('\n')
    .filter((row) => row.trim().length > 0)
    .map((row) => ({
      // Tab-separated: the pid as the broker names it, then the client properties as an Erlang term.
      pid: row.split('\t')[0]!.trim(),
      name: /\{"connection_name","([^"]*)"\}/.exec(row)?.[1],
    }));
}

/** A TCP port nothing listens on right now, chosen by the OS. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Whether something accepts connections on `host` (default 127.0.0.1) at `port`. */
export function portOpen(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}


/**
 * One RabbitMQ node or a cluster of them, of this process's own. Start it
 * with {@link RabbitCluster.start}; node indexes run from 1.
 */
export class RabbitCluster {
  private readonly slots: NodeSlot[];
  private epmd?: ChildProcess;

  private constructor(
    /** The cluster's temporary directory (data, logs, cookie). */
    readonly baseDir: string,
    private readonly epmdPort: number,
    private readonly ctlPorts: readonly [number, number],
    slots: NodeSlot[],
    private readonly options: Required<Pick<RabbitClusterOptions, 'extraConfig' | 'rabbitEnv' | 'log'>>,
  ) {
    this.slots = slots;
  }

  /** Boots the nodes (about 10 s each, in parallel) and joins them into one cluster. */
  static async start(options: RabbitClusterOptions = {}): Promise<RabbitCluster> {
    const count = options.nodes ?? 1;
    if (!Number.isInteger(count) || count < 1 || count > 9) throw new RangeError(`RabbitCluster: nodes must be 1 to 9, got ${count}`);
    const prefix = options.namePrefix ?? 'rmqt';
    const baseDir = mkdtempSync(join(tmpdir(), 'redeliver-rabbit-'));
    const ports: number[] = [];
    while (!options.placement && ports.length < 2 * count + 1) {
      const port = await freePort();
      if (!ports.includes(port)) ports.push(port);
    }
    const ctlMin = 36_000 + Math.floor(Math.random() * 900) * 10;
    const slots = Array.from({ length: count }, (_, i): NodeSlot => {
      const placement = options.placement?.(i + 1);
      return {
        index: i + 1,
        name: placement ? `rabbit@${placement.host}` : `${prefix}${i + 1}@localhost`,
        dir: join(baseDir, `n${i + 1}`),
        placement: placement ?? LOOPBACK,
        placed: placement !== undefined,
        amqpPort: placement ? DEFAULT_PORTS.amqp : ports[1 + 2 * i]!,
        distPort: placement ? DEFAULT_PORTS.dist : ports[2 + 2 * i]!,
      };
    });
    const cluster = new RabbitCluster(baseDir, options.placement ? DEFAULT_PORTS.epmd : ports[0]!, [ctlMin, ctlMin + 9], slots, {
      extraConfig: options.extraConfig ?? [],
      rabbitEnv: options.rabbitEnv ?? {},
      log: options.log ?? (() => undefined),
    });
    trackServer(cluster);
    try {
      await cluster.init();
      await Promise.all(cluster.slots.map((slot) => cluster.boot(slot.index)));
      for (const slot of cluster.slots.slice(1)) {
        await cluster.ctl(slot.index, 'stop_app');
        await cluster.ctl(slot.index, 'join_cluster', cluster.slots[0]!.name);
        await cluster.ctl(slot.index, 'start_app');
      }
    } catch (error) {
      cluster.destroySync();
      throw error;
    }
    return cluster;
  }

  /** Node indexes, from 1. */
  get nodes(): number[] {
    return this.slots.map((slot) => slot.index);
  }

  /** The AMQP URL of node `index` (default 1). */
  url(index = 1): string {
    const slot = this.slot(index);
    return `amqp://guest:guest@${slot.placement.host}:${slot.amqpPort}`;
  }

  /** The AMQP port of node `index`. */
  port(index = 1): number {
    return this.slot(index).amqpPort;
  }

  /** The Erlang node name of node `index`, e.g. `rmqt1@localhost`, or `rabbit@10.213.7.10` when placed. */
  nodeName(index: number): string {
    return this.slot(index).name;
  }

  /** The main log file of node `index`. */
  logPath(index: number): string {
    const slot = this.slot(index);
    return join(slot.dir, 'log', `${slot.name}.log`);
  }

  /** Runs `rabbitmqctl -q -n <node> ...args` against node `index` of this cluster only; resolves its output. */
  async ctl(index: number, ...args: string[]): Promise<string> {
    return this.tool('rabbitmqctl', index, args);
  }

  /**
   * Messages in each of `queues` (vhost `/`), as node `index` counts them in
   * one pass, in the order given: ready and unacknowledged, plus, for a
   * quorum queue, those it dead-lettered at least once and its target has
   * not confirmed yet (`messages_dlx`), which neither an AMQP read nor any
   * `list_queues` column shows. A queue that does not exist counts 0.
   */
  messagesIn(queues: readonly string[], index = 1): Promise<number[]> {
    return this.#countEach('messagesIn', queues, `${MESSAGES} + ${MESSAGES_DLX}`, index);
  }

  /**
   * Copies each quorum queue of `queues` (vhost `/`) dead-lettered and not
   * yet confirmed by their target (`messages_dlx`), as node `index` counts
   * them in one pass, in the order given; 0 for a queue that does not exist.
   */
  deadLetteredUnconfirmed(queues: readonly string[], index = 1): Promise<number[]> {
    return this.#countEach('deadLetteredUnconfirmed', queues, MESSAGES_DLX, index);
  }

  /** The Erlang expression `count` (over the queue record `Q`) for each of `queues`, read on node `index` in one pass. */
  async #countEach(caller: string, queues: readonly string[], count: string, index: number): Promise<number[]> {
    if (queues.length === 0) return [];
    for (const queue of queues) if (!/^[\w.-]+$/.test(queue)) throw new RangeError(`RabbitCluster.${caller}: unexpected queue name ${JSON.stringify(queue)}`);
    const names = queues.map((queue) => `<<"${queue}">>`).join(', ');
    const expression =
      // Tagged, so that Erlang cannot print the list of counts as a string.
      `[{count, case rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, N)) of {ok, Q} -> ${count}; _ -> 0 end} || N <- [${names}]].`;
    const output = await this.ctl(index, 'eval', expression);
    const counts = [...output.matchAll(/\{count,(\d+)\}/g)].map((match) => Number(match[1]));
    if (counts.length !== queues.length) throw new Error(`RabbitCluster.${caller}: unexpected answer ${output.slice(0, 200)}`);
    return counts;
  }

  /**
   * Moves the leadership of quorum queue `queue` from node `from` (its
   * leader) to node `to` (`ra:transfer_leadership`); resolves the answer.
   * A new leader starts the queue's dead-letter worker afresh.
   */
  async transferLeadership(queue: string, from: number, to: number): Promise<string> {
    if (!/^[\w.-]+$/.test(queue)) throw new RangeError(`RabbitCluster.transferLeadership: unexpected queue name ${JSON.stringify(queue)}`);
    const [fromName, toName] = [this.slot(from).name, this.slot(to).name];
    const expression =
      `{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"${queue}">>)), {RaName, _} = amqqueue:get_pid(Q), ` +
      `ra:transfer_leadership({RaName, '${fromName}'}, {RaName, '${toName}'}).`;
    return (await this.ctl(from, 'eval', expression)).trim();
  }

  /** Runs `rabbitmq-queues -q -n <node> ...args` against node `index`. */
  async queues(index: number, ...args: string[]): Promise<string> {
    return this.tool('rabbitmq-queues', index, args);
  }

  /**
   * Closes the connections on node `index` whose client-provided name
   * `matches`, and only those; resolves how many. Connections on other
   * nodes of the cluster are not touched.
   */
  async closeConnections(matches: (name: string) => boolean, index = 1, reason = 'fault suite: connection cut'): Promise<number> {
    const rows = parseConnections(await this.ctl(index, 'list_connections', 'pid', 'client_properties', '--no-table-headers'));
    const targets = rows.filter((row) => row.name !== undefined && matches(row.name));
    for (const row of targets) await this.ctl(index, 'close_connection', row.pid, reason).catch(() => undefined);
    this.options.log(`closed ${targets.length} connection(s) on ${this.slot(index).name}`);
    return targets.length;
  }

  /**
   * The node index that leads quorum queue `queue` (vhost `/`), as the
   * queue's Raft member on node `from` knows it (default: the first node
   * that is up). Asks the member directly (`ra:members`), not
   * `list_queues`, which waits up to 60 s for every queue of the cluster to
   * answer.
   */
  async leaderOf(queue: string, from?: number): Promise<number> {
    if (!/^[\w.-]+$/.test(queue)) throw new RangeError(`RabbitCluster.leaderOf: unexpected queue name ${JSON.stringify(queue)}`);
    const expression =
      `{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"${queue}">>)), {RaName, _} = amqqueue:get_pid(Q), ` +
      `{ok, _, {_, Leader}} = ra:members({RaName, node()}), {leader, Leader}.`;
    for (const index of from === undefined ? await this.running() : [from]) {
      const output = await this.ctl(index, 'eval', expression).catch(() => '');
      const leader = /\{leader,'?([^'}]+)'?\}/.exec(output)?.[1];
      const slot = this.slots.find((s) => s.name === leader);
      if (slot) return slot.index;
    }
    throw new Error(`RabbitCluster: no leader found for queue ${queue}`);
  }

  /** Kills node `index` with SIGKILL and resolves once its AMQP port is closed. */
  async kill(index: number): Promise<void> {
    const slot = this.slot(index);
    this.options.log(`kill -9 ${slot.name}`);
    this.killSlot(slot);
    await until(`${slot.name} to die`, 30_000, async () => !(await portOpen(slot.amqpPort, slot.placement.host)));
  }

  /** Stops node `index` gracefully (returns when its process is gone). */
  async stopNode(index: number): Promise<void> {
    const slot = this.slot(index);
    this.options.log(`stop ${slot.name}`);
    await this.ctl(index, 'stop', join(slot.dir, 'pid')).catch(() => this.killSlot(slot));
    await until(`${slot.name} to stop`, 60_000, async () => !(await portOpen(slot.amqpPort, slot.placement.host)));
  }

  /** Stops node `index` gracefully and starts it again; resolves when it accepts AMQP connections. */
  async restart(index: number): Promise<void> {
    await this.stopNode(index);
    await this.boot(index);
  }

  /** Starts node `index` (after a kill or stop); resolves when it is up. A restarted cluster member rejoins by itself. */
  async boot(index: number): Promise<void> {
    const slot = this.slot(index);
    mkdirSync(slot.dir, { recursive: true });
    rmSync(join(slot.dir, 'pid'), { force: true });
    writeFileSync(
      join(slot.dir, 'rabbitmq.conf'),
      [`listeners.tcp.default = ${slot.placement.host}:${slot.amqpPort}`, 'loopback_users = none', ...this.options.extraConfig, ''].join('\n'),
    );
    writeFileSync(join(slot.dir, 'enabled_plugins'), '[].\n');
    const env = Object.entries(this.options.rabbitEnv).map(([key, value]) => `{${key}, ${value}}`);
    writeFileSync(join(slot.dir, 'advanced.config'), `[{rabbit, [${env.join(', ')}]}].\n`);
    const started = Date.now();
    const [file, ...args] = slot.placement.command([join(BIN, 'rabbitmq-server')]);
    slot.process = spawn(file!, args, {
      // Anything the node writes by a relative path (a Mnesia directory an autoheal restart made once) lands in its own directory.
      cwd: slot.dir,
      env: {
        ...this.env(slot),
        RABBITMQ_NODENAME: slot.name,
        RABBITMQ_NODE_IP_ADDRESS: slot.placement.host,
        RABBITMQ_NODE_PORT: String(slot.amqpPort),
        RABBITMQ_DIST_PORT: String(slot.distPort),
        RABBITMQ_MNESIA_BASE: join(slot.dir, 'mnesia'),
        RABBITMQ_LOG_BASE: join(slot.dir, 'log'),
        RABBITMQ_CONFIG_FILE: join(slot.dir, 'rabbitmq.conf'),
        RABBITMQ_ADVANCED_CONFIG_FILE: join(slot.dir, 'advanced.config'),
        RABBITMQ_CONFIG_FILES: join(slot.dir, 'conf.d', '*.conf'),
        RABBITMQ_ENABLED_PLUGINS_FILE: join(slot.dir, 'enabled_plugins'),
        RABBITMQ_PID_FILE: join(slot.dir, 'pid'),
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: `-kernel inet_dist_use_interface {${slot.placement.host.split('.').join(',')}}`,
      },
      detached: true,
      stdio: 'ignore',
    });
    slot.process.unref();
    await this.ctl(index, 'wait', '--timeout', '90', join(slot.dir, 'pid'));
    await until(`${slot.name} to accept AMQP`, 60_000, () => portOpen(slot.amqpPort, slot.placement.host));
    this.options.log(`${slot.name} up on ${slot.amqpPort} in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  /** Freezes node `index` (SIGSTOP of its Erlang VM): it keeps its connections open and answers nothing until {@link resume}. */
  stall(index = 1): void {
    this.options.log(`stall ${this.slot(index).name}`);
    this.signalSlot(this.slot(index), 'SIGSTOP');
  }

  /** Lets a stalled node `index` run again (SIGCONT). */
  resume(index = 1): void {
    this.options.log(`resume ${this.slot(index).name}`);
    this.signalSlot(this.slot(index), 'SIGCONT');
  }

  /**
   * Raises (`true`) or clears (`false`) a memory alarm on node `index` of
   * this cluster, which blocks publishers on every node. Resolves once the
   * node lists the alarm as raised (or no longer lists it): setting the
   * watermark only asks the memory monitor, which raises the alarm a moment
   * later, later still on a loaded machine.
   */
  async memoryAlarm(on: boolean, index = 1): Promise<void> {
    this.options.log(`memory alarm ${on ? 'on' : 'off'} on ${this.slot(index).name}`);
    await this.ctl(index, 'set_vm_memory_high_watermark', on ? '0.0000001' : '0.4');
    await until(`the memory alarm to be ${on ? 'raised' : 'cleared'} on ${this.slot(index).name}`, 60_000, async () => {
      const alarms = await this.ctl(index, 'eval', 'rabbit_alarm:get_alarms().');
      return /resource_limit,\s*memory/.test(alarms) === on;
    }, 200);
  }

  /** The indexes of nodes accepting AMQP connections now. */
  async running(): Promise<number[]> {
    const open = await Promise.all(this.slots.map(async (slot) => ((await portOpen(slot.amqpPort, slot.placement.host)) ? slot.index : 0)));
    return open.filter((index) => index > 0);
  }

  /** Stops every node, epmd, and removes the directory. Safe to call twice. */
  async stop(): Promise<void> {
    if (!isTracked(this)) return;
    await Promise.all(
      this.slots.map(async (slot) => {
        if (await portOpen(slot.amqpPort, slot.placement.host)) await this.stopNode(slot.index).catch(() => this.killSlot(slot));
      }),
    );
    this.destroySync();
  }

  /** Kills every node and epmd by pid and removes the directory, synchronously (for exit hooks). */
  destroySync(): void {
    if (!untrackServer(this)) return;
    for (const slot of this.slots) {
      this.killSlot(slot);
      if (slot.epmd?.pid) killQuietly(slot.epmd.pid);
    }
    if (this.epmd?.pid) killQuietly(this.epmd.pid);
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  private slot(index: number): NodeSlot {
    const slot = this.slots[index - 1];
    if (!slot) throw new RangeError(`RabbitCluster: no node ${index} (nodes are 1 to ${this.slots.length})`);
    return slot;
  }

  /** Sends `signal` to the node's Erlang VM (named by its pid file), if it got that far. */
  private signalSlot(slot: NodeSlot, signal: NodeJS.Signals): void {
    try {
      const pid = Number(readFileSync(join(slot.dir, 'pid'), 'utf8').trim());
      if (pid > 0) process.kill(pid, signal);
    } catch {
      // No pid file, or the node is gone.
    }
  }

  private killSlot(slot: NodeSlot): void {
    // The node's own pid file names the Erlang VM; the spawned script leads its process group.
    try {
      const pid = Number(readFileSync(join(slot.dir, 'pid'), 'utf8').trim());
      if (pid > 0) killQuietly(pid);
    } catch {
      // No pid file: the node never got that far.
    }
    if (slot.process?.pid) killQuietly(-slot.process.pid);
  }

  private async init(): Promise<void> {
    const home = join(this.baseDir, 'home');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(this.baseDir, 'env.conf'), '');
    const cookie = join(home, '.erlang.cookie');
    writeFileSync(cookie, randomBytes(32).toString('hex'));
    chmodSync(cookie, 0o400);
    const placed = this.slots.filter((slot) => slot.placed);
    if (placed.length === 0) {
      this.epmd = spawn('epmd', ['-port', String(this.epmdPort), '-address', '127.0.0.1'], { stdio: 'ignore', detached: true });
      this.epmd.unref();
      await until(`epmd on ${this.epmdPort}`, 10_000, () => portOpen(this.epmdPort));
      return;
    }
    // An epmd beside each placed node, on the node's address (where the others look it up) and on loopback (where its CLI registers).
    for (const slot of placed) {
      const [file, ...args] = slot.placement.command(['epmd', '-port', String(this.epmdPort), '-address', `127.0.0.1,${slot.placement.host}`]);
      slot.epmd = spawn(file!, args, { stdio: 'ignore', detached: true });
      slot.epmd.unref();
    }
    await Promise.all(placed.map((slot) => until(`epmd on ${slot.placement.host}:${this.epmdPort}`, 10_000, () => portOpen(this.epmdPort, slot.placement.host))));
  }

  private env(slot: NodeSlot): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env['PATH'],
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      HOME: join(this.baseDir, 'home'),
      ERL_EPMD_PORT: String(this.epmdPort),
      RABBITMQ_CONF_ENV_FILE: join(this.baseDir, 'env.conf'),
      ERL_CRASH_DUMP: join(this.baseDir, 'erl_crash.dump'),
      RABBITMQ_CTL_DIST_PORT_MIN: String(this.ctlPorts[0]),
      RABBITMQ_CTL_DIST_PORT_MAX: String(this.ctlPorts[1]),
    };
    if (slot.placed) env['RABBITMQ_USE_LONGNAME'] = 'true';
    return env;
  }

  private async tool(tool: string, index: number, args: string[]): Promise<string> {
    const slot = this.slot(index);
    const [file, ...argv] = slot.placement.command([join(BIN, tool), '-q', '-n', slot.name, ...(slot.placed ? ['--longnames'] : []), ...args]);
    const { stdout } = await run(file!, argv, {
      env: this.env(slot),
      timeout: 120_000,
    });
    return stdout;
  }
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
}
