/**
 * The fault suite on Apache RocketMQ 5.3: nodes of the suite's own (see
 * ../rocketmq-nodes.ts), never the shared ones. Two layouts, each its own
 * adapter:
 * - `rocketmq`: a name server and one broker with its gRPC proxy in one
 *   JVM, the way `npm run brokers` runs it; every scenario that applies,
 *   and the name-server kill;
 * - `rocketmq-2-node`: a proxy JVM of its own in front of two brokers
 *   (broker-a, broker-b) of one cluster; the proxy kill with both brokers
 *   alive, and the scale-out scenario (broker-b killed, broker-a's queues
 *   handled on);
 * - `rocketmq-netns` (`network`): the two-broker layout with each JVM in a
 *   network namespace of the suite's own (see network/network.ts): broker-a
 *   in `n1`, broker-b in `n2`, the name server in `n3`, the proxy in `n4`;
 *   the producer and the odd workers in client member `c1`, the even workers
 *   in `c2`, every client given the proxy's address. The partition
 *   scenarios cut that network apart. Brokers share no queue: the
 *   partition's "leader" is the broker holding more of the scope's work
 *   when it starts, its "followers" the other broker, the name server and
 *   the proxy.
 *
 * Each scenario has its own topics (`<label>`, `<label>-error`) and
 * consumer group (`<label>`). Each scenario's workers and producer are
 * given a TCP proxy of the scenario's own as their endpoint; the client also
 * connects straight to the address the proxy's routes name, so the
 * connection cut closes both (see `cutConnections`). Depths are read off the brokers
 * over the remoting protocol: queue offsets for the topics, the timer's own
 * per-topic count (`GET_TIMER_METRICS`) for delayed retries. The error
 * topic is read in place, during the drain and at the end (see `#errorIds`).
 */
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { SimpleConsumer, type MessageView } from 'rocketmq-client-nodejs';
import { ROCKETMQ_GROUP_ENV, ROCKETMQ_NAME_SERVER_ENV } from '../../../src/cli/open-transport.js';
import { DLQ_PREFIX, RETRY_PREFIX, RocketMqAdmin } from '../../../src/transports/rocketmq/admin.js';
import { ID_PROPERTY } from '../../../src/transports/rocketmq/codec.js';
import { parseServerJson, request } from '../../../src/transports/rocketmq/remoting.js';
import { MIN_INVISIBLE_MS } from '../../../src/transports/rocketmq/options.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { CLIENT_MEMBERS, clientMemberOf } from '../network/client-members.js';
import type { Nemesis } from '../network/nemesis.js';
import type { FaultNetwork } from '../network/network.js';
import { openNetwork } from '../network/open.js';
import type { PartitionRoles } from '../network/partitions.js';
import { RocketMqNodes, type RocketMqRole } from '../rocketmq-nodes.js';
import type { Transport } from '../../../src/transport/types.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { partitionable, type FaultAdapter, type Partitionable, type Scope } from './types.js';

/** The broker's request for its timer's per-topic counts. */
const GET_TIMER_METRICS = 61;
/** The broker's request that creates a topic or changes its configuration. */
const UPDATE_AND_CREATE_TOPIC = 17;
/** How long the read of the pending messages goes on without a new one: two receives' wait (`awaitDuration` 5 s). */
const PENDING_QUIET_MS = 10_000;

/** Options of {@link RocketMqFaultAdapter}. */
export interface RocketMqFaultAdapterOptions {
  /** `single`: broker and proxy in one JVM; `two-brokers`: a proxy JVM in front of broker-a and broker-b. Default `single`. */
  readonly layout?: 'single' | 'two-brokers';
  /** The two-broker layout's JVMs and the clients in network namespaces of the suite's own, for the partition scenarios (transport `rocketmq-netns`). Default false. */
  readonly network?: boolean;
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
}

/** Each JVM's member of the suite's network (the clients' are CLIENT_MEMBERS). */
const MEMBER_OF: Record<RocketMqRole, string> = { 'broker-a': 'n1', 'broker-b': 'n2', namesrv: 'n3', proxy: 'n4' };

const SINGLE_SKIPS: Record<string, string> = {
  'memory-alarm':
    'RocketMQ has no memory alarm that holds publishers back: a broker short of page cache or disk refuses each write at once (SYSTEM_BUSY, disk full), which the send path meets as a refused write',
  'error-queue-full': 'a RocketMQ topic has no length bound that refuses a write: retention is by time and disk, so an error topic cannot be full',
  'queue-deleted':
    'deleting a topic is an admin act that also drops its consumer offsets on every broker; redeliver creates its topics at start and does not promise to survive one deleted under a running endpoint',
  'cluster-leader-kill':
    'RocketMQ brokers do not share a topic queue (no replicated queue without DLedger or a controller): the two-broker layout runs the scale-out scenario instead',
  'proxy-kill': 'in this layout the proxy and the broker are one JVM (`-pm local`): run by the two-broker layout, whose proxy is a JVM of its own',
  'broker-scale-out': 'needs the two-broker layout',
};

const TWO_BROKER_SCENARIOS = new Set(['proxy-kill', 'broker-scale-out']);

/** The RocketMQ adapter, on nodes of its own. */
export class RocketMqFaultAdapter implements FaultAdapter {
  readonly transport: string;
  /** The proxy raises the workers' 2 s lease to its shortest invisible duration. */
  readonly leaseMs = MIN_INVISIBLE_MS;
  readonly #layout: 'single' | 'two-brokers';
  readonly #log: (line: string) => void;
  readonly #networked: boolean;
  #network?: FaultNetwork;
  #nemesis?: Nemesis;
  #nodes?: RocketMqNodes;
  /** Each live scope's TCP proxy, by label. */
  readonly #proxies = new Map<string, TcpProxy>();

  constructor(options: RocketMqFaultAdapterOptions = {}) {
    this.#networked = options.network ?? false;
    this.#layout = this.#networked ? 'two-brokers' : (options.layout ?? 'single');
    if (this.#networked && options.layout === 'single') throw new Error('RocketMqFaultAdapter: the network runs the two-broker layout');
    this.#log = options.log ?? (() => undefined);
    this.transport = this.#networked ? 'rocketmq-netns' : this.#layout === 'single' ? 'rocketmq' : 'rocketmq-2-node';
  }

  skipReason(scenario: string): string | undefined {
    if (this.#networked) return scenario.startsWith('partition-') ? undefined : 'the namespaced nodes run the partition scenarios only';
    if (this.#layout === 'single') return SINGLE_SKIPS[scenario];
    return TWO_BROKER_SCENARIOS.has(scenario) ? undefined : 'the two-broker layout runs the proxy-kill and scale-out scenarios only';
  }

  get nodes(): RocketMqNodes {
    if (!this.#nodes) throw new Error('RocketMqFaultAdapter: start() first');
    return this.#nodes;
  }

  async start(): Promise<void> {
    if (this.#networked) {
      ({ network: this.#network, nemesis: this.#nemesis } = openNetwork([...Object.values(MEMBER_OF), ...CLIENT_MEMBERS], this.#log));
    }
    const network = this.#network;
    this.#nodes = await RocketMqNodes.start({
      layout: this.#layout === 'single' ? 'local' : 'cluster',
      brokers: this.#layout === 'single' ? 1 : 2,
      placement: network && ((role) => ({ host: network.member(MEMBER_OF[role]).address, command: (argv) => network.command(MEMBER_OF[role], argv) })),
      log: this.#log,
    });
  }

  async stop(): Promise<void> {
    for (const proxy of this.#proxies.values()) await proxy.close();
    this.#proxies.clear();
    this.#nemesis?.heal();
    await this.#nodes?.stop();
    this.#network?.destroy();
  }

  get partitions(): Partitionable | undefined {
    return partitionable(this.#nemesis, (scope) => this.#roles(scope));
  }

  /**
   * The broker holding more of the scope's work now (messages not yet
   * consumed by its group on the work topic's queues there, and delayed
   * retries in its timer; broker-a on a tie) as the leader; the other
   * broker, the name server and the proxy as followers.
   */
  async #roles(scope: Scope): Promise<PartitionRoles> {
    const nodes = this.nodes;
    const offsets = await this.#admin().offsets(scope.queue, scope.label);
    const held = await Promise.all(
      (['broker-a', 'broker-b'] as const).map(async (role) => {
        const broker = nodes.brokerAddress(role);
        const unread = offsets.filter((o) => o.broker === broker).reduce((sum, o) => sum + Math.max(0, o.max - o.consumed), 0);
        return unread + (await this.#timed(scope.queue, [broker]));
      }),
    );
    const leader = held[1]! > held[0]! ? 'broker-b' : 'broker-a';
    const follower = leader === 'broker-a' ? 'broker-b' : 'broker-a';
    this.#log(`${scope.queue}: broker-a holds ${held[0]}, broker-b holds ${held[1]}; leader ${leader} (${MEMBER_OF[leader]})`);
    return { leader: MEMBER_OF[leader], followers: [MEMBER_OF[follower], MEMBER_OF.namesrv, MEMBER_OF.proxy], clients: CLIENT_MEMBERS };
  }

  async scope(label: string, dir: string): Promise<Scope> {
    const nodes = this.nodes;
    const queue = label;
    const errorQueue = `${label}-error`;
    const group = label;
    const admin = this.#admin();
    // On the network the clients reach the proxy's member, and the partitions cut them; on loopback a TCP proxy of the scope's own does.
    const proxy = this.#networked ? undefined : await TcpProxy.start(Number(nodes.endpoints.split(':')[1]));
    if (proxy) this.#proxies.set(label, proxy);
    const network = this.#network;
    const spec = (role: string, endpoints = proxy ? `127.0.0.1:${proxy.port}` : nodes.endpoints): TransportSpec => ({
      kind: 'rocketmq',
      endpoints,
      nameServer: nodes.nameServer,
      consumerGroup: group,
      connectionName: `${label}-${role}`,
    });
    // The harness's own transport, to ingest the error topic: straight to the proxy, so no cut reaches it.
    const harness = openSpec(spec('harness', nodes.endpoints));
    const unread = async (topic: string) => (await admin.offsets(topic, group).catch(() => [])).reduce((sum, q) => sum + Math.max(0, q.max - q.consumed), 0);
    return {
      label,
      queue,
      errorQueue,
      place: network && ((role, argv) => network.command(clientMemberOf(role), argv)),
      cliTarget: `rocketmq://${nodes.endpoints}`,
      cliEnv: { [ROCKETMQ_NAME_SERVER_ENV]: nodes.nameServer, [ROCKETMQ_GROUP_ENV]: group },
      spec: (role) => spec(role),
      errorCount: () => unread(errorQueue),
      delayedCount: () => this.#timed(queue),
      errorIds: () => this.#errorIds(harness, errorQueue),
      errorIdsNow: () => this.#errorIds(harness, errorQueue),
      pendingIds: () => this.#pendingIds(queue, group),
      cleanup: async () => {
        await proxy?.close();
        this.#proxies.delete(label);
        await harness.close();
        for (const topic of [queue, errorQueue, `${RETRY_PREFIX}${group}`, `${DLQ_PREFIX}${group}`]) await admin.deleteTopic(topic).catch(() => undefined);
        await admin.deleteGroup(group).catch(() => undefined);
        for (const role of nodes.roles) {
          const { stdout, dir: logs } = nodes.logsOf(role);
          if (existsSync(stdout)) copyFileSync(stdout, join(dir, `rocketmq-${role}.out`));
          const main = join(logs, role === 'namesrv' ? 'namesrv.log' : role === 'proxy' || nodes.layout === 'local' ? 'proxy.log' : 'broker.log');
          if (existsSync(main)) copyFileSync(main, join(dir, `rocketmq-${role}.log`));
        }
      },
    };
  }

  /** The broker JVM of the single layout (it holds the proxy too). */
  get #broker(): RocketMqRole {
    return 'broker-a';
  }

  async killBroker(): Promise<void> {
    await this.nodes.kill(this.#broker);
    await this.nodes.boot(this.#broker);
  }

  async restartBroker(): Promise<void> {
    await this.nodes.stopGracefully(this.#broker);
    await this.nodes.boot(this.#broker);
  }

  async stallBroker(ms: number): Promise<void> {
    this.nodes.freeze(this.#broker, true);
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      this.nodes.freeze(this.#broker, false);
    }
  }

  /**
   * Cuts every connection of this scope's processes to the proxy: those
   * through the scope's TCP proxy (the endpoint the clients were given),
   * and those the client opened straight to the address the proxy's routes
   * name, aborted with `ss -K` (the socket reset under the process, as a
   * proxy that drops it would).
   */
  async cutConnections(scope: Scope): Promise<number> {
    const proxy = this.#proxies.get(scope.label);
    if (!proxy) throw new Error(`RocketMqFaultAdapter: ${scope.label} has no TCP proxy`);
    const throughProxy = proxy.cut();
    const direct = await abortSockets(processesOf(scope.label), Number(this.nodes.endpoints.split(':')[1]));
    this.#log(`cut ${throughProxy} connection(s) of ${scope.label} through its TCP proxy, ${direct} straight to the proxy`);
    return throughProxy + direct;
  }

  /**
   * Makes the work and error topics read-only on every broker (`perm` 4:
   * the broker refuses each write with NO_PERMISSION, reads and acks go on),
   * or writable again (`perm` 6). Every copy a settlement writes goes to one
   * of them: a delayed retry is a timed message to the work topic, a
   * dead-letter a message to the error topic.
   */
  async refuseSettlements(scope: Scope, on: boolean): Promise<void> {
    const admin = this.#admin();
    for (const [topic, filter] of [
      [scope.queue, 'SINGLE_TAG'],
      [scope.errorQueue, 'MULTI_TAG'],
    ] as const) {
      for (const broker of await admin.masters()) {
        const config = await admin.config(broker, topic);
        if (config === undefined) continue;
        const fields = {
          topic,
          defaultTopic: 'TBW102',
          readQueueNums: String(config.readQueueNums),
          writeQueueNums: String(config.writeQueueNums),
          perm: on ? '4' : '6',
          topicFilterType: config.topicFilterType ?? filter,
          topicSysFlag: '0',
          order: 'false',
          attributes: '+message.type=MIXED',
        };
        const reply = await request(broker, UPDATE_AND_CREATE_TOPIC, fields);
        if (reply.code !== 0) throw new Error(`could not make ${topic} ${on ? 'read-only' : 'writable'} on ${broker}: code ${reply.code} ${reply.remark ?? ''}`);
      }
    }
    this.#log(`${scope.queue} and ${scope.errorQueue} ${on ? 'read-only' : 'writable again'}`);
  }

  /** Kills the name server with SIGKILL, leaves it down for `downMs`, and starts it again (brokers register again on their own). */
  async killNameServer(downMs: number): Promise<void> {
    await this.nodes.kill('namesrv');
    await new Promise((r) => setTimeout(r, downMs));
    await this.nodes.boot('namesrv');
  }

  /** Kills the proxy JVM with SIGKILL, brokers alive, leaves it down for `downMs`, and starts it again. */
  async killProxy(downMs: number): Promise<void> {
    await this.nodes.kill('proxy');
    await new Promise((r) => setTimeout(r, downMs));
    await this.nodes.boot('proxy');
  }

  /** Kills broker-b with SIGKILL, broker-a alive; resolves a function that starts it again on its store. */
  async killOneBroker(): Promise<() => Promise<void>> {
    await this.nodes.kill('broker-b');
    return () => this.nodes.boot('broker-b');
  }

  #admin(): RocketMqAdmin {
    return new RocketMqAdmin(this.nodes.nameServer, 'DefaultCluster', 4, 5_000);
  }

  /** Messages for `topic` waiting in the timers of `brokers` (default every master) now: delayed retries not yet due. */
  async #timed(topic: string, brokers?: readonly string[]): Promise<number> {
    let count = 0;
    for (const broker of brokers ?? (await this.#admin().masters())) {
      const reply = await request(broker, GET_TIMER_METRICS, {});
      const metrics = parseServerJson<{ timingCount?: Record<string, { count: number }> }>(reply.body);
      count += metrics.timingCount?.[topic]?.count ?? 0;
    }
    return count;
  }

  /**
   * The message ids of every entry in `errorQueue`, read in place the way
   * `redeliver errors list` reads it: a RocketMQ error topic is read whole
   * without consuming it, so nothing a consumer holds hides an entry, and
   * entries of a broker that was down are counted once it is back. An id
   * dead-lettered twice appears twice.
   */
  async #errorIds(harness: Transport, errorQueue: string): Promise<string[]> {
    const ids: string[] = [];
    for await (const page of harness.errorQueue!.scan(errorQueue)) ids.push(...page.map((entry) => entry.messageId));
    return ids;
  }

  /**
   * The ids of the messages still to be handled in `topic`: received by the
   * scope's group, none acked, until no receive brought an id not read
   * before for {@link PENDING_QUIET_MS} (two receives' wait). Each received
   * message stays invisible for 10 s, then is due again: a read that waited
   * for empty receives instead would read the same messages again and again
   * until the broker moved them to the group's dead-letter topic, 16
   * deliveries later. Read once every worker has stopped; a delivery a
   * stopped worker held comes back once its invisible duration ran out, so
   * the first receives may wait for it.
   */
  async #pendingIds(topic: string, group: string): Promise<string[]> {
    const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined, trace: () => undefined };
    const consumer = new SimpleConsumer({
      endpoints: this.nodes.endpoints,
      namespace: '',
      logger: silent as never,
      consumerGroup: group,
      subscriptions: new Map([[topic, '*']]),
      awaitDuration: 5_000,
    });
    await consumer.startup();
    const ids = new Set<string>();
    try {
      for (let newAt = Date.now(); Date.now() - newAt < PENDING_QUIET_MS; ) {
        const messages: MessageView[] = await consumer.receive(32, 10_000).catch(async () => {
          await new Promise((r) => setTimeout(r, 1_000));
          return [];
        });
        const before = ids.size;
        for (const message of messages) ids.add(message.properties.get(ID_PROPERTY) ?? message.messageId);
        if (ids.size > before) newAt = Date.now();
      }
    } finally {
      await consumer.shutdown();
    }
    return [...ids];
  }
}

/** The pids of this machine's processes whose command line names `label` (a scope's workers, producers and CLI runs carry it in their config), less this one. */
function processesOf(label: string): Set<number> {
  const pids = new Set<number>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`"${label}-`)) pids.add(pid);
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** Aborts (`ss -K`) every established TCP connection of `pids` to 127.0.0.1:`port`; resolves how many. */
async function abortSockets(pids: ReadonlySet<number>, port: number): Promise<number> {
  if (pids.size === 0) return 0;
  const run = promisify(execFile);
  const { stdout } = await run('ss', ['-tnpH', 'state', 'established', 'dst', `127.0.0.1:${port}`]);
  let aborted = 0;
  for (const line of stdout.split('\n')) {
    const owner = /pid=(\d+),/.exec(line);
    const local = /(\S+):(\d+)\s+\S+:\d+\s/.exec(line.trim());
    if (!owner || !local || !pids.has(Number(owner[1]))) continue;
    await run('ss', ['-K', 'src', `127.0.0.1:${local[2]}`, 'dst', `127.0.0.1:${port}`]);
    aborted++;
  }
  return aborted;
}
