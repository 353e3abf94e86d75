/**
 * The fault suite on NSQ: an nsqlookupd and two nsqd of the suite's own
 * (never the shared 4150), on fixed ports from a base of the adapter's. A
 * scenario's topics carry its label. Single-node scenarios use nsqd 1, their
 * workers and producer connecting through a TCP proxy of the scenario's own
 * (nsqd has no API that closes one client's connection, so the proxy cuts
 * them); the two-node scenario consumes through nsqlookupd from both.
 *
 * nsqd keeps deferred (`DPUB`/`REQ`) and in-flight messages, and its memory
 * queue below `--mem-queue-size`, in memory only: a kill -9 loses them. For
 * the scenarios where nsqd itself loses messages, the bare nsqjs client
 * runs beside redeliver (see {@link NsqFaultAdapter.bareScope}) so the row
 * says what nsqd lost without redeliver.
 *
 * Depths are read off nsqd's `/stats`; error-queue ids are ingested into an
 * error store through the transport, as on every transport; pending ids are
 * read off the channel with a reader of the adapter's own.
 *
 * With `network` (transport `nsq-netns`), nsqd 1 and 2 run in network
 * namespaces `n1` and `n2` of the suite's own (see network/network.ts),
 * nsqlookupd in `n3`, the producer and the odd workers in a client
 * namespace `c1`, the even workers in `c2`; the partition scenarios cut
 * that network apart. Workers find both nsqd through nsqlookupd; the
 * producer is given both nsqd and sends to them in turn, so a send that
 * fails on a cut nsqd is tried again (by the Producer's retries) on the
 * other. nsqd nodes share nothing: the partition's "leader" is the nsqd
 * holding more of the scope's work when it starts, its "followers" the other
 * nsqd and nsqlookupd.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import nsq from 'nsqjs';
import { decodeEnvelope } from '../../../src/transports/nsq/envelope.js';
import { DEFAULT_ERROR_CHANNEL } from '../../../src/transports/nsq/operations.js';
import { NsqNodes } from '../../support/nsq-node.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { CLIENT_MEMBERS, clientMemberOf } from '../network/client-members.js';
import type { Nemesis } from '../network/nemesis.js';
import type { FaultNetwork } from '../network/network.js';
import { openNetwork } from '../network/open.js';
import type { PartitionRoles } from '../network/partitions.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { ingestErrorIds } from './error-ids.js';
import { partitionable, type FaultAdapter, type Partitionable, type Scope, type ScopeOptions } from './types.js';

/** Options of {@link NsqFaultAdapter}. */
export interface NsqFaultAdapterOptions {
  /** nsqd's `--mem-queue-size`; 0 writes every message to disk as it arrives. Default nsqd's (10,000); with 0 the adapter runs the broker kill only, as `nsq-mem0`. */
  readonly memQueueSize?: number;
  /** The first of the ports nsqlookupd and the two nsqd listen on (6 in all). Default 4250, or 4260 with `memQueueSize` 0. */
  readonly basePort?: number;
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
  /** nsqd, nsqlookupd and the clients in network namespaces of the suite's own, for the partition scenarios (transport `nsq-netns`). Default false. */
  readonly network?: boolean;
}

/** The network's nsqd and nsqlookupd members (the clients' are CLIENT_MEMBERS). */
const NSQD_MEMBERS = ['n1', 'n2'] as const;
const LOOKUPD_MEMBER = 'n3';

/** The channel the transport's consumers read through (its default), and the bare client's. */
const CHANNEL = 'redeliver';
const BARE_CHANNEL = 'bare';
/** The scenarios where nsqd loses messages by design, run with the bare client beside redeliver. */
const BARE_SCENARIOS = ['broker-kill', 'broker-restart'];
/** A pending-id read ends once no message came for this long. */
const READ_IDLE_MS = 1_500;
/**
 * Between two lease marks of a partition row's workers: each lease (2 s)
 * then counts from no later than nsqd sent the message, at most this plus
 * a round trip before its arrival, so a delivery a cut held back is not
 * handled beside the copy nsqd gave out again.
 */
const LEASE_MARK_MS = 100;

const SKIPS: Record<string, string> = {
  'memory-alarm': 'nsqd has no memory alarm: past --mem-queue-size a topic writes to its disk queue, and nothing refuses a publish for memory',
  'error-queue-full': 'an NSQ topic has no length bound that refuses a publish',
  'settlement-refused':
    'nsqd has no setting that refuses publishes and keeps the connection (E_PUB_FAILED comes only while it exits or its disk queue is unhealthy)',
  'queue-deleted':
    "a delayed retry waits inside the topic's channel (DPUB/REQ deferral), so deleting the topic deletes its retries with it: a loss by design, not a fault to survive",
  'cluster-leader-kill': 'nsqd nodes hold their own messages, without replication: nsqd-kill-with-lookupd is the two-node scenario',
};

interface ChannelStats {
  readonly channel_name: string;
  readonly depth: number;
  readonly in_flight_count: number;
  readonly deferred_count: number;
}
interface TopicStats {
  readonly topic_name: string;
  readonly depth: number;
  readonly channels: readonly ChannelStats[];
}

/** The NSQ adapter, on nsqd servers of its own. */
export class NsqFaultAdapter implements FaultAdapter {
  readonly transport: string;
  /** Long enough for a lease to run out (the transport's 30 s) and a 10 s delayed retry after it. */
  readonly stallMs = 75_000;
  readonly #memQueueSize: number | undefined;
  readonly #basePort: number;
  readonly #log: (line: string) => void;
  readonly #networked: boolean;
  #network?: FaultNetwork;
  #nemesis?: Nemesis;
  #nodes?: NsqNodes;
  /** Each live scope's proxy, by label (single-node scopes). */
  readonly #proxies = new Map<string, TcpProxy>();

  constructor(options: NsqFaultAdapterOptions = {}) {
    this.#memQueueSize = options.memQueueSize;
    this.#basePort = options.basePort ?? (options.memQueueSize === 0 ? 4260 : 4250);
    this.#log = options.log ?? (() => undefined);
    this.#networked = options.network ?? false;
    if (this.#networked && options.memQueueSize !== undefined) throw new Error('NsqFaultAdapter: network runs on nsqd defaults, without memQueueSize');
    this.transport = this.#networked ? 'nsq-netns' : options.memQueueSize === undefined ? 'nsq' : `nsq-mem${options.memQueueSize}`;
  }

  skipReason(scenario: string): string | undefined {
    if (this.#networked) return scenario.startsWith('partition-') ? undefined : 'the namespaced nodes run the partition scenarios only';
    if (this.#memQueueSize !== undefined && scenario !== 'broker-kill') return `the --mem-queue-size=${this.#memQueueSize} variant runs the broker kill only`;
    return SKIPS[scenario];
  }

  get nodes(): NsqNodes {
    if (!this.#nodes) throw new Error('NsqFaultAdapter: start() first');
    return this.#nodes;
  }

  async start(): Promise<void> {
    if (this.#networked) {
      ({ network: this.#network, nemesis: this.#nemesis } = openNetwork([...NSQD_MEMBERS, LOOKUPD_MEMBER, ...CLIENT_MEMBERS], this.#log));
    }
    const network = this.#network;
    const placement =
      network &&
      ((node: 'lookupd' | number) => {
        const member = node === 'lookupd' ? LOOKUPD_MEMBER : `n${node}`;
        return { host: network.member(member).address, command: (argv: readonly string[]) => network.command(member, argv) };
      });
    this.#nodes = await NsqNodes.start({ basePort: this.#basePort, nodes: 2, memQueueSize: this.#memQueueSize, log: this.#log, placement });
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
   * The nsqd holding more of the scope's work now (messages ready, in flight
   * and deferred on the work topic's channel; nsqd 1 on a tie) as the
   * leader; the other nsqd and nsqlookupd as followers.
   */
  async #roles(scope: Scope): Promise<PartitionRoles> {
    const held = await Promise.all(this.nodes.nodes.map((node) => this.#total([node], scope.queue, CHANNEL)));
    const leader = held[1]! > held[0]! ? 2 : 1;
    this.#log(`${scope.queue}: nsqd 1 holds ${held[0]}, nsqd 2 holds ${held[1]}; leader n${leader}`);
    return { leader: `n${leader}`, followers: [`n${3 - leader}`, LOOKUPD_MEMBER], clients: CLIENT_MEMBERS };
  }

  async scope(label: string, dir: string, options: ScopeOptions = {}): Promise<Scope> {
    const nodes = this.nodes;
    const queue = label;
    const errorQueue = `${label}.error`;
    const direct = (node: number) => ({ [nodes.tcpAddress(node)]: nodes.httpAddress(node) });
    let spec: (role: string, node?: number) => TransportSpec;
    if (this.#networked) {
      // Workers find both nsqd through nsqlookupd, and bound each lease by a lease mark (see LEASE_MARK_MS); the producer sends to both in turn.
      spec = (role) => {
        const base = { kind: 'nsq', connectionName: `${label}-${role}`, httpAddresses: { ...direct(1), ...direct(2) } } as const;
        return role.startsWith('worker') ? { ...base, nsqd: [], lookupd: [nodes.lookupdHttpAddress], leaseMarkMs: LEASE_MARK_MS } : { ...base, nsqd: [nodes.tcpAddress(1), nodes.tcpAddress(2)] };
      };
    } else if (options.discovery) {
      // Workers find both nsqd through nsqlookupd; each producer sends to the node it is given.
      spec = (role, node = 1) => {
        const base = { kind: 'nsq', connectionName: `${label}-${role}`, httpAddresses: { ...direct(1), ...direct(2) } } as const;
        return role.startsWith('worker') ? { ...base, nsqd: [], lookupd: [nodes.lookupdHttpAddress] } : { ...base, nsqd: [nodes.tcpAddress(node)] };
      };
    } else {
      const proxy = await TcpProxy.start(nodes.tcpPort(1));
      this.#proxies.set(label, proxy);
      const address = `127.0.0.1:${proxy.port}`;
      spec = (role) => ({ kind: 'nsq', nsqd: [address], httpAddresses: { [address]: nodes.httpAddress(1) }, connectionName: `${label}-${role}` });
    }
    const nodeList = options.discovery || this.#networked ? [1, 2] : [1];
    // The harness's own transport, to ingest the error queue from every node of the scope: connected to nsqd itself, so no cut reaches it.
    const harness = openSpec({
      kind: 'nsq',
      nsqd: nodeList.map((node) => nodes.tcpAddress(node)),
      httpAddresses: Object.assign({}, ...nodeList.map(direct)) as Record<string, string>,
      connectionName: `${label}-harness`,
    });
    const network = this.#network;
    return {
      label,
      queue,
      errorQueue,
      place: network && ((role, argv) => network.command(clientMemberOf(role), argv)),
      cliTarget: `nsq://${nodes.tcpAddress(1)}`,
      spec,
      errorCount: () => this.#total(nodeList, errorQueue, DEFAULT_ERROR_CHANNEL),
      delayedCount: () => this.#deferred(nodeList, queue),
      errorIds: () => ingestErrorIds(harness, errorQueue, join(dir, 'error-store.db')),
      pendingIds: async () => (await Promise.all(nodeList.map((node) => readIds(nodes.tcpAddress(node), queue, CHANNEL)))).flat(),
      cleanup: async () => {
        await this.#proxies.get(label)?.close();
        this.#proxies.delete(label);
        await harness.close();
        for (const node of nodeList) await this.#deleteTopics(node, [queue, errorQueue]);
        // The nodes' logs so far, beside the scenario's evidence.
        if (this.#networked) for (const name of ['nsqlookupd', 'nsqd1', 'nsqd2']) copyFileSync(join(nodes.baseDir, `${name}.log`), join(dir, `${name}.log`));
      },
    };
  }

  /**
   * For the scenarios where nsqd loses messages by design (a kill -9 or a
   * graceful restart with retries pending): a scope on topic `label` of
   * nsqd 1, read through channel `bare` by the bare nsqjs worker and sent to
   * by the bare nsqjs producer (children/nsq-bare-*.ts).
   */
  async bareScope(scenario: string, label: string): Promise<Scope | undefined> {
    if (!BARE_SCENARIOS.includes(scenario)) return undefined;
    const nodes = this.nodes;
    const queue = label;
    const errorQueue = `${label}.error`;
    const address = nodes.tcpAddress(1);
    // The topic and channel made first, so the first messages published go to the channel.
    await nodes.post(1, `/topic/create?topic=${queue}`);
    await nodes.post(1, `/channel/create?topic=${queue}&channel=${BARE_CHANNEL}`);
    return {
      label,
      queue,
      errorQueue,
      cliTarget: `nsq://${address}`,
      children: { worker: 'test/faults/children/nsq-bare-worker.ts', producer: 'test/faults/children/nsq-bare-producer.ts' },
      spec: (role) => ({ kind: 'nsq', nsqd: [address], httpAddresses: { [address]: nodes.httpAddress(1) }, connectionName: `${label}-${role}`, channel: BARE_CHANNEL }),
      errorCount: () => this.#total([1], errorQueue, BARE_CHANNEL),
      delayedCount: () => this.#deferred([1], queue),
      errorIds: () => readIds(address, errorQueue, BARE_CHANNEL),
      pendingIds: () => readIds(address, queue, BARE_CHANNEL),
      cleanup: () => this.#deleteTopics(1, [queue, errorQueue]),
    };
  }

  async killBroker(): Promise<void> {
    await this.nodes.kill(1);
    await this.nodes.boot(1);
  }

  async restartBroker(): Promise<void> {
    await this.nodes.restart(1);
  }

  async stallBroker(ms: number): Promise<void> {
    this.nodes.stall(1);
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      this.nodes.resume(1);
    }
  }

  async cutConnections(scope: Scope): Promise<number> {
    const proxy = this.#proxies.get(scope.label);
    if (!proxy) throw new Error(`NsqFaultAdapter: ${scope.label} has no proxy to cut (single-node scopes only)`);
    return proxy.cut();
  }

  async killNode(node: number): Promise<() => Promise<void>> {
    await this.nodes.kill(node);
    return () => this.nodes.boot(node);
  }

  /** A topic's stats on nsqd `node`, or undefined when it has no such topic (or does not answer). */
  async #topic(node: number, topic: string): Promise<TopicStats | undefined> {
    const stats = (await this.nodes.get(node, `/stats?format=json&topic=${encodeURIComponent(topic)}`)) as { topics?: TopicStats[] };
    return stats.topics?.find((t) => t.topic_name === topic);
  }

  /**
   * Messages a topic holds on `nodes` for the readers of `channel`: the
   * topic's own (not yet passed to a channel) and the channel's ready,
   * in-flight and deferred ones. Only that channel: another channel of the
   * topic holds copies of its own that this reader never gets.
   */
  async #total(nodes: readonly number[], topic: string, channel: string): Promise<number> {
    let total = 0;
    for (const node of nodes) {
      const stats = await this.#topic(node, topic).catch(() => undefined);
      const c = stats?.channels.find((c) => c.channel_name === channel);
      if (stats) total += stats.depth + (c ? c.depth + c.in_flight_count + c.deferred_count : 0);
    }
    return total;
  }

  /** Deferred messages (delayed retries) in a topic's channels on `nodes`. */
  async #deferred(nodes: readonly number[], topic: string): Promise<number> {
    let total = 0;
    for (const node of nodes) {
      const stats = await this.#topic(node, topic).catch(() => undefined);
      total += stats?.channels.reduce((sum, c) => sum + c.deferred_count, 0) ?? 0;
    }
    return total;
  }

  async #deleteTopics(node: number, topics: readonly string[]): Promise<void> {
    for (const topic of topics) await this.nodes.post(node, `/topic/delete?topic=${encodeURIComponent(topic)}`).catch(() => undefined);
  }
}

/**
 * Reads the messages ready now on `topic`/`channel` of the nsqd at
 * `address` and finishes them, until none comes for {@link READ_IDLE_MS};
 * resolves their ids: `m-<i>` from a redeliver envelope's `{ i }` body, or
 * the plain body (the bare client's). Deferred messages are not ready, so not
 * read.
 */
function readIds(address: string, topic: string, channel: string): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const ids: string[] = [];
    const reader = new nsq.Reader(topic, channel, { nsqdTCPAddresses: [address], maxInFlight: 200, maxAttempts: 0, clientId: 'faults-reader' });
    let idle: NodeJS.Timeout | undefined;
    const done = () => {
      reader.close();
      resolve(ids);
    };
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(done, READ_IDLE_MS);
    };
    reader.on('message', (message) => {
      ids.push(idOf(message.body));
      message.finish();
      arm();
    });
    reader.on('error', (error) => {
      // A FIN refused for a message no longer in flight (its timeout ran out and it came back) is read again; not a failure of the read.
      if (error.message.includes('E_FIN_FAILED')) return;
      clearTimeout(idle);
      reader.close();
      reject(error);
    });
    reader.connect();
    arm();
  });
}

function idOf(bytes: Buffer): string {
  const envelope = decodeEnvelope(bytes);
  if (!envelope) return bytes.toString();
  const { i } = JSON.parse(Buffer.from(envelope.body).toString()) as { i: number };
  return `m-${i}`;
}
