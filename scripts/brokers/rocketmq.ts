/**
 * Apache RocketMQ 5.3.3 for the tests, from Maven Central jars alone: a
 * throwaway pom has Maven copy the name server's, the proxy's (which brings
 * the broker) and the admin tools' jars with their dependencies, and two
 * JVMs run from them on loopback: the name server (9876), and the broker
 * with the gRPC proxy in one process (`-pm local`; broker 10911, gRPC 8081,
 * remoting proxy 8080), its timer ticking every 100 ms. Both are sized for
 * a small shared machine: about 3 GB in all.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Broker, BrokerStatus } from './broker.js';
import { BROKERS_HOME, brokersDir, listening, livePid, onPath, run, spawnDetached, stopPid, waitFor } from './system.js';

const VERSION = '5.3.3';

/** The ports the tests use, by role. */
const PORTS = { nameserver: 9876, broker: 10911, proxy: 8081 } as const;

/** The remoting proxy's port: the stock one, unused by the tests. */
const REMOTING_PROXY_PORT = 8080;

/** Where the pom and the jars live: `<BROKERS_HOME>/rocketmq/5.3.3`. */
const INSTALL_DIR = join(BROKERS_HOME, 'rocketmq', VERSION);
const LIB_DIR = join(INSTALL_DIR, 'lib');

/** Written once Maven has copied every jar: its presence means "installed". */
const INSTALLED_MARKER = join(INSTALL_DIR, 'lib.complete');

/**
 * The run directory, `<BROKERS_HOME>/run/rocketmq`, both `ROCKETMQ_HOME`
 * and the JVMs' `user.home`: the configs in `conf/`, the store in `store/`,
 * RocketMQ's own logs in `logs/rocketmqlogs/`, the pid files, and the JVMs'
 * stdout and stderr.
 */
const RUN_DIR = join(BROKERS_HOME, 'run', 'rocketmq');
const CONF_DIR = join(RUN_DIR, 'conf');
const LOGS_DIR = join(RUN_DIR, 'logs', 'rocketmqlogs');
const LOG_FILE = join(RUN_DIR, 'rocketmq.log');

/**
 * The broker's timer tick (`timerPrecisionMs`; RocketMQ's default is
 * 1 000): a timed message arrives up to one tick late, and the transport
 * reads the tick off the broker to judge which retries land before a
 * deadline. A tenth of the default costs the timer ten slot reads a second
 * instead of one, and its wheel (a fixed number of slots) spans a tenth of
 * the time, so long delays are re-filed (rolled) more often on their way.
 */
const TIMER_PRECISION_MS = 100;

/**
 * Records the `timerPrecisionMs` the store was written with. The timer
 * wheel files its entries by tick, so a store written with another
 * precision would never deliver the timed messages pending in it: the
 * store is started afresh then (it holds test topics only).
 */
const PRECISION_MARKER = join(RUN_DIR, 'store.timer-precision');

/** How long a JVM may take to boot on a busy 2-core machine. */
const BOOT_TIMEOUT_MS = 180_000;

/** One of the two JVMs this script runs. */
interface Jvm {
  /** Its name in messages. */
  readonly role: string;
  readonly pidFile: string;
  /** The ports it must listen on to count as up. */
  readonly ports: readonly number[];
  /** The line it prints on stdout once it serves. */
  readonly bootLine: string;
  /** How long its shutdown hook may run before SIGKILL. */
  readonly graceMs: number;
  /** Its heap and logging flags, main class and arguments. */
  readonly args: readonly string[];
}

/**
 * Flags both JVMs share: those of the stock `runserver.sh`/`runbroker.sh`
 * for JDK 9+, less the ones meant for big dedicated hosts (16 MB G1
 * regions, `AlwaysPreTouch`, the obsolete `-UseBiasedLocking`). JDK 17
 * needs no `--add-opens`: RocketMQ 5.3 frees mapped buffers through Netty
 * and `Unsafe`.
 */
function commonFlags(gcLog: string): string[] {
  return [
    '-server',
    '-XX:+UseG1GC',
    '-XX:G1ReservePercent=25',
    '-XX:InitiatingHeapOccupancyPercent=30',
    '-XX:SoftRefLRUPolicyMSPerMB=0',
    '-XX:-OmitStackTraceInFastThrow',
    '-XX:-UseLargePages',
    `-Xlog:gc*:file=${join(LOGS_DIR, gcLog)}:time,tags:filecount=5,filesize=10M`,
    `-Duser.home=${RUN_DIR}`,
    '-cp',
    `${CONF_DIR}:${LIB_DIR}/*`,
  ];
}

const NAMESRV: Jvm = {
  role: 'name server',
  pidFile: join(RUN_DIR, 'namesrv.pid'),
  ports: [PORTS.nameserver],
  bootLine: 'The Name Server boot success',
  graceMs: 15_000,
  args: [
    '-Xms256m',
    '-Xmx512m',
    '-XX:MetaspaceSize=128m',
    '-XX:MaxMetaspaceSize=320m',
    ...commonFlags('gc_namesrv.log'),
    // Every jar carries its own logback file; without this the name server would pick the proxy's.
    '-Drmq.logback.configurationFile=rmq.namesrv.logback.xml',
    'org.apache.rocketmq.namesrv.NamesrvStartup',
    '-c',
    join(CONF_DIR, 'namesrv.conf'),
  ],
};

const BROKER: Jvm = {
  role: 'broker and proxy',
  pidFile: join(RUN_DIR, 'broker.pid'),
  ports: [PORTS.broker, PORTS.proxy],
  bootLine: 'rocketmq-proxy startup successfully',
  // Its shutdown hook unregisters from the name server and flushes the store: about 15 s.
  graceMs: 30_000,
  args: [
    '-Xms1g',
    '-Xmx1g',
    '-XX:MaxDirectMemorySize=1g',
    ...commonFlags('gc_broker.log'),
    '-Drmq.logback.configurationFile=rmq.proxy.logback.xml',
    'org.apache.rocketmq.proxy.ProxyStartup',
    '-pm',
    'local',
    '-bc',
    join(CONF_DIR, 'broker.conf'),
    '-pc',
    join(CONF_DIR, 'rmq-proxy.json'),
  ],
};

/** The pom whose only use is to have Maven copy the jars and their dependencies. */
function pom(): string {
  const dependency = (artifact: string) =>
    `    <dependency><groupId>org.apache.rocketmq</groupId><artifactId>${artifact}</artifactId><version>${VERSION}</version></dependency>`;
  return [
    '<project xmlns="http://maven.apache.org/POM/4.0.0">',
    '  <modelVersion>4.0.0</modelVersion>',
    '  <groupId>local.redeliver</groupId>',
    '  <artifactId>rocketmq-jars</artifactId>',
    '  <version>1</version>',
    '  <packaging>pom</packaging>',
    '  <dependencies>',
    ...['rocketmq-namesrv', 'rocketmq-proxy', 'rocketmq-tools'].map(dependency),
    '  </dependencies>',
    '</project>',
    '',
  ].join('\n');
}

/** `key=value` lines of a Java properties file. */
function properties(entries: Record<string, string | number | boolean>): string {
  return Object.entries(entries)
    .map(([key, value]) => `${key}=${value}\n`)
    .join('');
}

/**
 * Writes the configs into `conf/` (each start, so that they follow this
 * file): everything on 127.0.0.1 where RocketMQ lets us choose (the gRPC
 * proxy, the remoting proxy and the HA port 10912 bind every interface).
 */
function writeConfigs(): void {
  mkdirSync(CONF_DIR, { recursive: true });
  mkdirSync(LOGS_DIR, { recursive: true });
  writeFileSync(join(CONF_DIR, 'namesrv.conf'), properties({ listenPort: PORTS.nameserver, bindAddress: '127.0.0.1' }));
  writeFileSync(
    join(CONF_DIR, 'broker.conf'),
    properties({
      brokerClusterName: 'DefaultCluster',
      brokerName: 'broker-a',
      brokerId: 0,
      brokerRole: 'ASYNC_MASTER',
      flushDiskType: 'ASYNC_FLUSH',
      namesrvAddr: `127.0.0.1:${PORTS.nameserver}`,
      brokerIP1: '127.0.0.1',
      bindAddress: '127.0.0.1',
      listenPort: PORTS.broker,
      storePathRootDir: join(RUN_DIR, 'store'),
      // 128 MB commit log files instead of 1 GB: tests write little.
      mappedFileSizeCommitLog: 128 * 1024 * 1024,
      autoCreateTopicEnable: true,
      autoCreateSubscriptionGroup: true,
      // Topics created with `+message.type=MIXED` (normal and timed messages in one topic) are refused without it.
      enableMixedMessageType: true,
      // Timed (delayed) messages at any time, not only the 18 fixed delay levels.
      timerWheelEnable: true,
      // The timer fires every 100 ms instead of every second: a timed message arrives at most about 100 ms late.
      timerPrecisionMs: TIMER_PRECISION_MS,
      aclEnable: false,
      authenticationEnabled: false,
      authorizationEnabled: false,
    }),
  );
  const proxy = {
    rocketMQClusterName: 'DefaultCluster',
    namesrvAddr: `127.0.0.1:${PORTS.nameserver}`,
    proxyMode: 'local',
    grpcServerPort: PORTS.proxy,
    remotingListenPort: REMOTING_PROXY_PORT,
  };
  writeFileSync(join(CONF_DIR, 'rmq-proxy.json'), `${JSON.stringify(proxy, null, 2)}\n`);
}

/** Removes a store written with another timer precision (see {@link PRECISION_MARKER}), then records the current one. */
function storeForPrecision(say: (line: string) => void): void {
  const store = join(RUN_DIR, 'store');
  const recorded = existsSync(PRECISION_MARKER) ? readFileSync(PRECISION_MARKER, 'utf8').trim() : '1000';
  if (existsSync(store) && recorded !== String(TIMER_PRECISION_MS)) {
    say(`RocketMQ: the store was written with timerPrecisionMs=${recorded}; starting from an empty store with ${TIMER_PRECISION_MS}`);
    rmSync(store, { recursive: true, force: true });
  }
  writeFileSync(PRECISION_MARKER, `${TIMER_PRECISION_MS}\n`);
}

/** Whether Maven has copied every jar. */
function installed(): boolean {
  return existsSync(INSTALLED_MARKER);
}

/** The size of the shared stdout log now: where a JVM started now begins writing. */
function logSize(): number {
  return existsSync(LOG_FILE) ? statSync(LOG_FILE).size : 0;
}

/** What the JVMs wrote to the shared stdout log from byte `offset` on. */
function logSince(offset: number): string {
  return existsSync(LOG_FILE) ? readFileSync(LOG_FILE).subarray(offset).toString('utf8') : '';
}

/** Whether every one of `ports` accepts connections on 127.0.0.1. */
async function allListening(ports: readonly number[]): Promise<boolean> {
  const open = await Promise.all(ports.map((port) => listening(port)));
  return open.every(Boolean);
}

/** Fails when a port this JVM needs is held by a process this script did not start. */
async function ensurePortsFree(jvm: Jvm): Promise<void> {
  for (const port of jvm.ports) {
    if (await listening(port)) throw new Error(`RocketMQ ${jvm.role}: port ${port} is already taken by another process`);
  }
}

/**
 * Starts `jvm` unless its pid file names a live process, and resolves once
 * it serves: its ports listen and, when started here, it printed its boot
 * line. Stops it and names the logs to read when it dies or times out.
 */
async function launch(jvm: Jvm, say: (line: string) => void): Promise<void> {
  let since: number | null = null;
  const started = Date.now();
  if (livePid(jvm.pidFile) === null) {
    await ensurePortsFree(jvm);
    since = logSize();
    spawnDetached('java', jvm.args, { logFile: LOG_FILE, pidFile: jvm.pidFile, cwd: RUN_DIR, env: { ...process.env, ROCKETMQ_HOME: RUN_DIR } });
  }
  const ready = async () => {
    if (livePid(jvm.pidFile) === null) throw new Error(`RocketMQ ${jvm.role} exited`);
    return (since === null || logSince(since).includes(jvm.bootLine)) && (await allListening(jvm.ports));
  };
  try {
    await waitFor(`RocketMQ ${jvm.role}`, BOOT_TIMEOUT_MS, ready);
  } catch (error) {
    if (livePid(jvm.pidFile) !== null) await stopPid(jvm.pidFile, [], jvm.graceMs);
    throw new Error(`${(error as Error).message}: read ${LOG_FILE} and ${LOGS_DIR}`);
  }
  if (since !== null) say(`RocketMQ ${jvm.role} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

export const rocketmq: Broker = {
  name: 'rocketmq',
  ports: PORTS,
  // Debian 12's JDK (the default one) and Maven; install() still checks that both are on the PATH.
  debianPackages: ['openjdk-17-jre-headless', 'maven'],
  logFile: LOG_FILE,

  /** Checks `java` and `mvn`, then has Maven copy the jars unless a previous run did. */
  async install(say) {
    const missing: string[] = [];
    for (const command of ['java', 'mvn']) if (!(await onPath(command))) missing.push(command);
    if (missing.length > 0) throw new Error(`RocketMQ needs ${missing.join(' and ')} on the PATH (apt-get install openjdk-17-jre-headless maven)`);
    if (installed()) return;
    const dir = brokersDir('rocketmq', VERSION);
    writeFileSync(join(dir, 'pom.xml'), pom());
    say(`mvn: copying the RocketMQ ${VERSION} jars from Maven Central into ${LIB_DIR}`);
    await run('mvn', ['-B', '-q', 'dependency:copy-dependencies', `-DoutputDirectory=${LIB_DIR}`], { cwd: dir });
    const jars = readdirSync(LIB_DIR).filter((file) => file.endsWith('.jar')).length;
    writeFileSync(INSTALLED_MARKER, `${jars} jars\n`);
  },

  /** Starts the name server, then the broker with its proxy, each unless it runs. */
  async start(say) {
    if ((await this.status()).up) return;
    if (!installed()) throw new Error(`RocketMQ ${VERSION} is not installed: run the install step first`);
    writeConfigs();
    await launch(NAMESRV, say);
    if (livePid(BROKER.pidFile) === null) storeForPrecision(say);
    await launch(BROKER, say);
  },

  /** Stops the broker first, so that it unregisters from the name server, then the name server. */
  async stop(say) {
    for (const jvm of [BROKER, NAMESRV]) {
      if (livePid(jvm.pidFile) === null) continue;
      say(`stopping RocketMQ ${jvm.role}`);
      await stopPid(jvm.pidFile, jvm.ports, jvm.graceMs);
    }
  },

  async status(): Promise<BrokerStatus> {
    const namesrv = livePid(NAMESRV.pidFile);
    const broker = livePid(BROKER.pidFile);
    const up = namesrv !== null && broker !== null && (await allListening(Object.values(PORTS)));
    return { up, ports: PORTS, version: installed() ? VERSION : null, pid: broker };
  },
};
