/**
 * RocketMQ 5.3.3 nodes of the fault suite's own, never the shared ones on
 * 9876/10911/8081: a name server (9976) and one or two brokers, from the
 * jars `npm run brokers -- up rocketmq` installed, each JVM with a home
 * directory of its own under one temporary directory that `stop()` removes.
 *
 * Two layouts:
 * - `local`: the broker with its gRPC proxy in one JVM (`ProxyStartup -pm
 *   local`; broker 11011, gRPC 8181, remoting proxy 8180), as the shared
 *   broker runs;
 * - `cluster`: the proxy in a JVM of its own (`ProxyStartup -pm cluster`,
 *   8181/8180) in front of broker-a (11011) and, with `brokers: 2`,
 *   broker-b (11111), each a plain `BrokerStartup` JVM: so a proxy can be
 *   killed with its brokers alive, and one broker with the other alive.
 *
 * Every JVM can be killed -9, stopped gracefully, started again on the same
 * store, or frozen (SIGSTOP) and resumed. With a `placement`, each JVM runs
 * where it says (a network namespace of the suite's own) and listens on its
 * address there; otherwise every JVM listens on 127.0.0.1.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BROKERS_HOME, listening, livePid, spawnDetached, stopPid, waitFor } from '../../scripts/brokers/system.js';
import { RocketMqAdmin } from '../../src/transports/rocketmq/admin.js';
import type { NodePlacement } from '../support/nats-node.js';
import { trackServer, untrackServer, type OwnServer } from '../support/own-servers.js';

const VERSION = '5.3.3';
/** Where `npm run brokers -- up rocketmq` put the jars. */
export const ROCKETMQ_LIB = join(BROKERS_HOME, 'rocketmq', VERSION, 'lib');

/** The ports of one layout's JVMs. */
export interface RocketMqPorts {
  readonly nameServer: number;
  /** broker-a's listen port; it also takes the next one (HA) and the one two below (its fast channel). */
  readonly brokerA: number;
  /** broker-b's listen port, the same way. */
  readonly brokerB: number;
  readonly grpcProxy: number;
  readonly remotingProxy: number;
}

/** The suite's ports: apart from the shared broker's (9876, 10911, 8081, 8080). */
export const FAULT_PORTS: RocketMqPorts = {
  nameServer: 9976,
  brokerA: 11011,
  brokerB: 11111,
  grpcProxy: 8181,
  remotingProxy: 8180,
} as const;

/** Every JVM on loopback, started as it is. */
const LOOPBACK: NodePlacement = { host: '127.0.0.1', command: (argv) => [...argv] };

/** How long a JVM may take to boot on a busy 2-core machine. */
const BOOT_TIMEOUT_MS = 180_000;

/** One JVM of the layout. */
export type RocketMqRole = 'namesrv' | 'broker-a' | 'broker-b' | 'proxy';

interface JvmSpec {
  readonly role: RocketMqRole;
  /** Ports it must listen on to count as up. */
  readonly ports: readonly number[];
  /** The line it prints on stdout once it serves. */
  readonly bootLine: string;
  /** How long its shutdown hook may run before SIGKILL. */
  readonly graceMs: number;
  readonly args: readonly string[];
}

/** Options of {@link RocketMqNodes.start}. */
export interface RocketMqNodesOptions {
  /** `local`: broker and proxy in one JVM; `cluster`: a proxy JVM of its own. Default `local`. */
  readonly layout?: 'local' | 'cluster';
  /** Brokers: 1, or 2 (`cluster` layout only). Default 1. */
  readonly brokers?: 1 | 2;
  /** Broker settings added to (or overriding) the brokers' configuration, e.g. `{ timerPrecisionMs: 100 }`. Default none. */
  readonly brokerConfig?: Readonly<Record<string, string | number | boolean>>;
  /** Proxy settings added to (or overriding) the proxy's configuration (`rmq-proxy.json`), e.g. `{ grpcProducerThreadPoolNums: 1 }`. Default none. */
  readonly proxyConfig?: Readonly<Record<string, string | number | boolean>>;
  /** The ports, for a test that must stay apart from the fault suite's. Default {@link FAULT_PORTS}. */
  readonly ports?: RocketMqPorts;
  /** Where each JVM runs and the address it listens on. Default every JVM on 127.0.0.1. */
  readonly placement?: (role: RocketMqRole) => NodePlacement;
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
}

/** Why the nodes cannot run here, or undefined when they can. */
export function rocketMqNodesSkipReason(): string | undefined {
  return existsSync(ROCKETMQ_LIB) ? undefined : `no RocketMQ ${VERSION} jars in ${ROCKETMQ_LIB} (npm run brokers -- up rocketmq)`;
}

/** A running layout; start it with {@link RocketMqNodes.start}. */
export class RocketMqNodes implements OwnServer {
  readonly #jvms = new Map<RocketMqRole, JvmSpec>();
  readonly #log: (line: string) => void;

  private constructor(
    /** Per JVM: its home (configs, RocketMQ's logs, stdout, pid file); per broker its store. */
    readonly baseDir: string,
    readonly layout: 'local' | 'cluster',
    readonly brokers: 1 | 2,
    log: (line: string) => void,
    private readonly brokerConfig: Readonly<Record<string, string | number | boolean>> = {},
    private readonly proxyConfig: Readonly<Record<string, string | number | boolean>> = {},
    /** The ports this layout's JVMs listen on. */
    readonly ports: RocketMqPorts = FAULT_PORTS,
    private readonly placement: (role: RocketMqRole) => NodePlacement = () => LOOPBACK,
  ) {
    this.#log = log;
  }

  /** Writes the configs and boots every JVM: the name server first, then the brokers, then the proxy. */
  static async start(options: RocketMqNodesOptions = {}): Promise<RocketMqNodes> {
    const skip = rocketMqNodesSkipReason();
    if (skip) throw new Error(skip);
    const layout = options.layout ?? 'local';
    const brokers = options.brokers ?? 1;
    if (brokers === 2 && layout !== 'cluster') throw new Error('RocketMqNodes: two brokers need the cluster layout (one proxy in front of both)');
    const nodes = new RocketMqNodes(mkdtempSync(join(tmpdir(), 'redeliver-rocketmq-')), layout, brokers, options.log ?? (() => undefined), options.brokerConfig, options.proxyConfig, options.ports, options.placement);
    trackServer(nodes);
    try {
      nodes.#configure();
      await nodes.boot('namesrv');
      await Promise.all(nodes.roles.filter((r) => r.startsWith('broker')).map((r) => nodes.boot(r)));
      if (layout === 'cluster') await nodes.boot('proxy');
    } catch (error) {
      nodes.destroySync();
      throw error;
    }
    return nodes;
  }

  /** The JVMs of this layout. */
  get roles(): RocketMqRole[] {
    return [...this.#jvms.keys()];
  }

  /** The gRPC endpoint clients use. */
  get endpoints(): string {
    return `${this.hostOf(this.layout === 'cluster' ? 'proxy' : 'broker-a')}:${this.ports.grpcProxy}`;
  }

  /** The name server, `host:port`. */
  get nameServer(): string {
    return `${this.hostOf('namesrv')}:${this.ports.nameServer}`;
  }

  /** The address `role`'s JVM listens on. */
  hostOf(role: RocketMqRole): string {
    return this.placement(role).host;
  }

  /** A broker's remoting address, `host:port`, as the name server lists it. */
  brokerAddress(role: 'broker-a' | 'broker-b'): string {
    return `${this.hostOf(role)}:${role === 'broker-a' ? this.ports.brokerA : this.ports.brokerB}`;
  }

  /** The pid of `role`'s JVM, or null when it is not running. */
  pid(role: RocketMqRole): number | null {
    return livePid(this.#pidFile(role));
  }

  /** Starts `role`'s JVM on its existing store unless it runs; resolves once it printed its boot line and listens. */
  async boot(role: RocketMqRole): Promise<void> {
    const jvm = this.#jvm(role);
    if (this.pid(role) !== null) return;
    const host = this.hostOf(role);
    for (const port of jvm.ports) {
      await waitFor(`port ${port} free for the RocketMQ ${role}`, 60_000, async () => !(await listening(port, host)));
    }
    const out = this.#outFile(role);
    const since = existsSync(out) ? statSync(out).size : 0;
    const started = Date.now();
    const home = this.#home(role);
    const [command, ...args] = this.placement(role).command(['java', ...jvm.args]);
    spawnDetached(command!, args, { logFile: out, pidFile: this.#pidFile(role), cwd: home, env: { ...process.env, ROCKETMQ_HOME: home } });
    try {
      await waitFor(`RocketMQ ${role}`, BOOT_TIMEOUT_MS, async () => {
        if (this.pid(role) === null) throw new Error(`RocketMQ ${role} exited at start: read ${out}`);
        const printed = readFileSync(out).subarray(since).toString('utf8').includes(jvm.bootLine);
        return printed && (await Promise.all(jvm.ports.map((p) => listening(p, host)))).every(Boolean);
      });
      // A broker counts as up once the name server routes to it (when the name server runs).
      if (role.startsWith('broker') && this.pid('namesrv') !== null) {
        const address = `${host}:${jvm.ports[0]}`;
        const admin = new RocketMqAdmin(this.nameServer, 'DefaultCluster', 1, 2_000);
        await waitFor(`the name server to list ${role}`, 60_000, async () => (await admin.masters().catch((): string[] => [])).includes(address));
      }
    } catch (error) {
      this.#signal(role, 'SIGKILL');
      throw error;
    }
    this.#log(`RocketMQ ${role} up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  }

  /** Kills `role`'s JVM with SIGKILL; resolves once it is gone and its ports are closed. */
  async kill(role: RocketMqRole): Promise<void> {
    const pid = this.pid(role);
    this.#signal(role, 'SIGKILL');
    if (pid !== null) await waitFor(`RocketMQ ${role} to die`, 30_000, async () => this.pid(role) === null);
    const host = this.hostOf(role);
    for (const port of this.#jvm(role).ports) await waitFor(`port ${port} to close`, 30_000, async () => !(await listening(port, host)));
    this.#log(`RocketMQ ${role} killed -9`);
  }

  /** Stops `role`'s JVM gracefully (its shutdown hook unregisters and flushes), SIGKILL after its grace time. */
  async stopGracefully(role: RocketMqRole): Promise<void> {
    const jvm = this.#jvm(role);
    await stopPid(this.#pidFile(role), jvm.ports, jvm.graceMs, this.hostOf(role));
    this.#log(`RocketMQ ${role} stopped`);
  }

  /** Freezes (`true`, SIGSTOP) or resumes (`false`, SIGCONT) `role`'s JVM. */
  freeze(role: RocketMqRole, on: boolean): void {
    this.#signal(role, on ? 'SIGSTOP' : 'SIGCONT');
  }

  /** The store directory of a broker. */
  storeOf(role: 'broker-a' | 'broker-b'): string {
    return join(this.#home(role), 'store');
  }

  /** The stdout of `role`'s JVM and RocketMQ's own logs directory, for the evidence. */
  logsOf(role: RocketMqRole): { stdout: string; dir: string } {
    return { stdout: this.#outFile(role), dir: join(this.#home(role), 'logs', 'rocketmqlogs') };
  }

  /** Kills every JVM and removes the directory: the stores go with it, so nothing is worth a graceful stop. */
  async stop(): Promise<void> {
    if (!untrackServer(this)) return;
    for (const role of this.#jvms.keys()) await this.kill(role);
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  destroySync(): void {
    untrackServer(this);
    for (const role of this.#jvms.keys()) this.#signal(role, 'SIGCONT');
    for (const role of this.#jvms.keys()) this.#signal(role, 'SIGKILL');
    rmSync(this.baseDir, { recursive: true, force: true });
  }

  #signal(role: RocketMqRole, signal: NodeJS.Signals): void {
    const pid = this.pid(role);
    if (pid === null) return;
    try {
      process.kill(-pid, signal); // the JVM leads a session of its own
    } catch {
      try {
        process.kill(pid, signal);
      } catch {
        // already gone
      }
    }
  }

  #jvm(role: RocketMqRole): JvmSpec {
    const jvm = this.#jvms.get(role);
    if (!jvm) throw new Error(`RocketMqNodes: no ${role} in the ${this.layout} layout with ${this.brokers} broker(s)`);
    return jvm;
  }

  #home(role: RocketMqRole): string {
    return join(this.baseDir, role);
  }

  #pidFile(role: RocketMqRole): string {
    return join(this.#home(role), 'jvm.pid');
  }

  #outFile(role: RocketMqRole): string {
    return join(this.#home(role), 'stdout.log');
  }

  /** Writes every JVM's configs and records how each starts. */
  #configure(): void {
    const nameServer = this.nameServer;
    const namesrvConf = this.#write('namesrv', 'namesrv.conf', properties({ listenPort: this.ports.nameServer, bindAddress: this.hostOf('namesrv') }));
    this.#jvms.set('namesrv', {
      role: 'namesrv',
      ports: [this.ports.nameServer],
      bootLine: 'The Name Server boot success',
      graceMs: 15_000,
      args: [...this.#flags('namesrv', '256m'), '-Drmq.logback.configurationFile=rmq.namesrv.logback.xml', 'org.apache.rocketmq.namesrv.NamesrvStartup', '-c', namesrvConf],
    });
    const brokers: [RocketMqRole, string, number][] = [['broker-a', 'broker-a', this.ports.brokerA]];
    if (this.brokers === 2) brokers.push(['broker-b', 'broker-b', this.ports.brokerB]);
    const proxyJson = (mode: 'local' | 'cluster', home: RocketMqRole) =>
      this.#write(
        home,
        'rmq-proxy.json',
        JSON.stringify({
          rocketMQClusterName: 'DefaultCluster',
          namesrvAddr: nameServer,
          proxyMode: mode,
          grpcServerPort: this.ports.grpcProxy,
          remotingListenPort: this.ports.remotingProxy,
          ...this.proxyConfig,
        }),
      );
    for (const [role, brokerName, port] of brokers) {
      const brokerConf = this.#write(
        role,
        'broker.conf',
        properties({
          brokerClusterName: 'DefaultCluster',
          brokerName,
          brokerId: 0,
          brokerRole: 'ASYNC_MASTER',
          flushDiskType: 'ASYNC_FLUSH',
          namesrvAddr: nameServer,
          brokerIP1: this.hostOf(role),
          bindAddress: this.hostOf(role),
          listenPort: port,
          haListenPort: port + 1,
          storePathRootDir: join(this.#home(role), 'store'),
          mappedFileSizeCommitLog: 64 * 1024 * 1024,
          autoCreateTopicEnable: true,
          autoCreateSubscriptionGroup: true,
          enableMixedMessageType: true,
          timerWheelEnable: true,
          aclEnable: false,
          authenticationEnabled: false,
          authorizationEnabled: false,
          ...this.brokerConfig,
        }),
      );
      if (this.layout === 'local') {
        this.#jvms.set(role, {
          role,
          ports: [port, this.ports.grpcProxy],
          bootLine: 'rocketmq-proxy startup successfully',
          graceMs: 30_000,
          args: [
            ...this.#flags(role, '768m'),
            '-Drmq.logback.configurationFile=rmq.proxy.logback.xml',
            'org.apache.rocketmq.proxy.ProxyStartup',
            '-pm',
            'local',
            '-bc',
            brokerConf,
            '-pc',
            proxyJson('local', role),
          ],
        });
      } else {
        this.#jvms.set(role, {
          role,
          ports: [port],
          bootLine: 'boot success',
          graceMs: 30_000,
          args: [...this.#flags(role, '640m'), '-Drmq.logback.configurationFile=rmq.broker.logback.xml', 'org.apache.rocketmq.broker.BrokerStartup', '-c', brokerConf],
        });
      }
    }
    if (this.layout === 'cluster') {
      this.#jvms.set('proxy', {
        role: 'proxy',
        ports: [this.ports.grpcProxy],
        bootLine: 'rocketmq-proxy startup successfully',
        graceMs: 15_000,
        args: [
          ...this.#flags('proxy', '384m'),
          '-Drmq.logback.configurationFile=rmq.proxy.logback.xml',
          'org.apache.rocketmq.proxy.ProxyStartup',
          '-pm',
          'cluster',
          '-pc',
          proxyJson('cluster', 'proxy'),
        ],
      });
    }
  }

  /** Writes `file` into `role`'s home; resolves its path. */
  #write(role: RocketMqRole, file: string, text: string): string {
    const dir = join(this.#home(role), 'conf');
    mkdirSync(dir, { recursive: true });
    const path = join(dir, file);
    writeFileSync(path, text);
    return path;
  }

  /** The JVM flags of the shared broker's script (scripts/brokers/rocketmq.ts), with a smaller heap and this role's home. */
  #flags(role: RocketMqRole, heap: string): string[] {
    const home = this.#home(role);
    return [
      `-Xms${heap}`,
      `-Xmx${heap}`,
      `-XX:MaxDirectMemorySize=${heap}`,
      '-server',
      '-XX:+UseG1GC',
      '-XX:G1ReservePercent=25',
      '-XX:InitiatingHeapOccupancyPercent=30',
      '-XX:SoftRefLRUPolicyMSPerMB=0',
      '-XX:-OmitStackTraceInFastThrow',
      '-XX:-UseLargePages',
      `-Duser.home=${home}`,
      '-cp',
      `${join(home, 'conf')}:${ROCKETMQ_LIB}/*`,
    ];
  }
}

/** `key=value` lines of a Java properties file. */
function properties(entries: Record<string, string | number | boolean>): string {
  return Object.entries(entries)
    .map(([key, value]) => `${key}=${value}\n`)
    .join('');
}
