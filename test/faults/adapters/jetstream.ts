/**
 * The fault suite on NATS JetStream: a server (or a three-node cluster) of
 * the suite's own, never the shared one on 4222. Each scenario has its own
 * stream prefix, so the streams it reads at the end hold only its own
 * messages. Depths and pending ids are read off the server over the
 * adapter's own connection, not through the transport under test;
 * error-queue ids are ingested into an error store through the transport,
 * as on every transport.
 *
 * On one server, each scenario's workers and producer connect through a TCP
 * proxy of the scenario's own: NATS 2.9 has no API that closes one client's
 * connection (`$SYS.REQ.SERVER.<id>.KICK` came with 2.10), so the proxy
 * closes them. On the cluster, they connect to node 1 only, and the leader
 * kill picks another node.
 *
 * With `network`, the three nodes run in network namespaces of the suite's
 * own (see network/network.ts), the producer and the odd workers in a
 * client namespace `c1`, the even workers in `c2`, every client knowing
 * every node; the partition scenarios cut that network apart. There the
 * bare nats.js client runs beside redeliver (see
 * {@link JetStreamFaultAdapter.bareScope}), its stream and consumer led by
 * the node that leads redeliver's, so a cut meets both alike. The
 * namespaced nodes run the newer nats-server of
 * {@link installPartitionServer}, since Debian's 2.9.10 loses confirmed
 * publishes in some splits of its own accord.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { AckPolicy, DiscardPolicy, jetstreamManager, RetentionPolicy, StorageType, type JetStreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { installPartitionServer } from '../../../scripts/brokers/nats.js';
import { NATS_PREFIX_ENV } from '../../../src/cli/open-transport.js';
import { decodeNatsHeaders } from '../../../src/transports/jetstream/codec.js';
import { JetStreamNames, QUEUE_CONSUMER, QUEUE_DESCRIPTION, type QueueNames } from '../../../src/transports/jetstream/names.js';
import { JETSTREAM_DEFAULTS } from '../../../src/transports/jetstream/options.js';
import { readerFor, readStream } from '../../../src/transports/jetstream/stream-reader.js';
import { isNotFound } from '../../../src/transports/jetstream/topology.js';
import { deleteJetStreamPrefix } from '../../support/jetstream-scratch.js';
import { NatsCluster } from '../../support/nats-node.js';
import type { Nemesis } from '../network/nemesis.js';
import { CLIENT_MEMBERS, clientMemberOf } from '../network/client-members.js';
import type { FaultNetwork } from '../network/network.js';
import { openNetwork } from '../network/open.js';
import type { PartitionRoles } from '../network/partitions.js';
import { until } from '../../support/own-servers.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { BARE_CONSUMER, bareNames } from '../children/jetstream-bare-client.js';
import { WORKER_LEASE_MS } from '../context.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { ingestErrorIds } from './error-ids.js';
import { partitionable, type FaultAdapter, type Partitionable, type Scope, type ScopeOptions } from './types.js';

/** Options of {@link JetStreamFaultAdapter}. */
export interface JetStreamFaultAdapterOptions {
  /** 1 for one server with streams of one replica, 3 for a cluster with three replicas. Default 1. */
  readonly nodes?: number;
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
  /** Nodes and clients in network namespaces of the suite's own, for the partition scenarios (three nodes only). Default false. */
  readonly network?: boolean;
}

const SINGLE_NODE_SKIPS: Record<string, string> = {
  'cluster-leader-kill': 'needs the three-node cluster adapter',
};

/** The node the cluster's clients connect to; the leader kill never picks it. */
const CLIENT_NODE = 1;
/** Step-downs tried to put a stream's leader and its consumer's leader on the same node. */
const STEP_DOWNS = 10;
/** Step-downs tried before a partition, fewer: a partition of the stream's leader alone is still one worth running. */
const ROLE_STEP_DOWNS = 3;
const NS_PER_MS = 1_000_000;

/** The JetStream adapter, on servers of its own. */
export class JetStreamFaultAdapter implements FaultAdapter {
  readonly transport: string;
  /**
   * On the namespaced cluster, 60 s with nothing handled is a stuck run
   * (its retries wait 1 and 2 s, its leases 2 s); elsewhere the run's
   * default.
   */
  readonly stallMs: number | undefined;
  readonly #nodes: number;
  readonly #log: (line: string) => void;
  readonly #networked: boolean;
  #network?: FaultNetwork;
  #nemesis?: Nemesis;
  #cluster?: NatsCluster;
  #harness?: { nc: NatsConnection; jsm: JetStreamManager };
  /** The names of every queue of a live scope, by queue name (queue names are unique: they carry the scope's label). */
  readonly #queues = new Map<string, QueueNames>();
  /** The stream of each live bare scope, by the label of the scope it runs beside. */
  readonly #bareStreams = new Map<string, string>();
  /** Each live scope's proxy, by label (one server only). */
  readonly #proxies = new Map<string, TcpProxy>();

  constructor(options: JetStreamFaultAdapterOptions = {}) {
    this.#nodes = options.nodes ?? 1;
    this.#log = options.log ?? (() => undefined);
    this.#networked = options.network ?? false;
    if (this.#networked && this.#nodes !== 3) throw new Error('JetStreamFaultAdapter: network needs nodes: 3');
    this.stallMs = this.#networked ? 60_000 : undefined;
    this.transport = this.#nodes === 1 ? 'jetstream' : this.#networked ? `jetstream-${this.#nodes}-netns` : `jetstream-${this.#nodes}-node`;
  }

  skipReason(scenario: string): string | undefined {
    if (this.#networked) return scenario.startsWith('partition-') ? undefined : 'the namespaced cluster runs the partition scenarios only';
    if (this.#nodes === 1) return SINGLE_NODE_SKIPS[scenario];
    return scenario === 'cluster-leader-kill' ? undefined : 'the cluster runs the leader-kill scenario only';
  }

  get cluster(): NatsCluster {
    if (!this.#cluster) throw new Error('JetStreamFaultAdapter: start() first');
    return this.#cluster;
  }

  async start(): Promise<void> {
    if (this.#networked) {
      ({ network: this.#network, nemesis: this.#nemesis } = openNetwork(['n1', 'n2', 'n3', ...CLIENT_MEMBERS], this.#log));
    }
    const network = this.#network;
    const placement = network && ((index: number) => ({ host: network.member(`n${index}`).address, command: (argv: readonly string[]) => network.command(`n${index}`, argv) }));
    const server = network && (await installPartitionServer(this.#log));
    if (server) this.#log(`nodes run ${server}`);
    this.#cluster = await NatsCluster.start({ nodes: this.#nodes, log: this.#log, placement, server });
    const nc = await connect({
      servers: this.cluster.nodes.map((node) => this.cluster.url(node)),
      name: 'faults-harness',
      ignoreClusterUpdates: true,
      maxReconnectAttempts: -1,
      reconnectTimeWait: 250,
    });
    this.#harness = { nc, jsm: await jetstreamManager(nc, { timeout: 5_000, checkAPI: false }) };
  }

  async stop(): Promise<void> {
    for (const proxy of this.#proxies.values()) await proxy.close();
    this.#proxies.clear();
    this.#nemesis?.heal();
    await this.#harness?.nc.close().catch(() => undefined);
    await this.#cluster?.stop();
    this.#network?.destroy();
  }

  get partitions(): Partitionable | undefined {
    return partitionable(this.#nemesis, (scope) => this.#roles(scope));
  }

  /**
   * The node leading the scope's work stream, after step-downs have put its
   * consumer's leadership on the same node where they can (a partition of
   * the leader then cuts off both), and the others.
   */
  async #roles(scope: Scope): Promise<PartitionRoles> {
    const { stream } = this.#queues.get(scope.queue)!;
    const cluster = this.cluster;
    const leader = await cluster.streamLeader(stream);
    const consumer = await this.#moveTo(leader, `${stream} > ${QUEUE_CONSUMER}`, () => cluster.consumerLeader(stream, QUEUE_CONSUMER), () => cluster.stepDownConsumer(stream, QUEUE_CONSUMER));
    this.#log(`${stream}: stream leader node ${leader}, consumer leader node ${consumer}`);
    const bare = this.#bareStreams.get(scope.label);
    if (bare) {
      const bareLeader = await this.#moveTo(leader, bare, () => cluster.streamLeader(bare), () => cluster.stepDownStream(bare));
      const bareConsumer = await this.#moveTo(leader, `${bare} > ${BARE_CONSUMER}`, () => cluster.consumerLeader(bare, BARE_CONSUMER), () => cluster.stepDownConsumer(bare, BARE_CONSUMER));
      this.#log(`${bare} (bare client): stream leader node ${bareLeader}, consumer leader node ${bareConsumer}`);
    }
    return { leader: `n${leader}`, followers: cluster.nodes.filter((n) => n !== leader).map((n) => `n${n}`), clients: CLIENT_MEMBERS };
  }

  /**
   * Steps a Raft group's leader down (up to {@link ROLE_STEP_DOWNS} times)
   * until it is on `node`; best effort: a step-down whose election does not
   * finish in time (seen after a run of cuts) leaves the leader where it is,
   * logged, and the partition goes on with the roles as they stand.
   */
  async #moveTo(node: number, what: string, read: () => Promise<number>, stepDown: () => Promise<number>): Promise<number | string> {
    let at = await read();
    for (let i = 0; at !== node && i < ROLE_STEP_DOWNS; i++) {
      try {
        at = await stepDown();
      } catch (error) {
        this.#log(`${what}: a step-down did not finish (${(error as Error).message}); its leader stays where it is`);
        return read().catch(() => 'unknown');
      }
    }
    return at;
  }

  async scope(label: string, dir: string, options: ScopeOptions = {}): Promise<Scope> {
    const names = new JetStreamNames(label);
    const queue = label;
    const errorQueue = `${label}.error`;
    const work = names.of(queue);
    const error = names.of(errorQueue);
    this.#queues.set(queue, work);
    this.#queues.set(errorQueue, error);
    const replicas = this.#nodes === 1 ? 1 : 3;
    let servers = this.#networked ? this.cluster.nodes.map((node) => this.cluster.url(node)) : [this.cluster.url(CLIENT_NODE)];
    if (this.#nodes === 1) {
      const proxy = await TcpProxy.start(this.cluster.port(1));
      this.#proxies.set(label, proxy);
      servers = [`nats://127.0.0.1:${proxy.port}`];
    }
    if (options.errorQueueMaxLength !== undefined) {
      // The error queue's stream made first, as the transport would make it, but bounded: a dead-letter to a full one is refused.
      await this.#jsm.streams.add({
        name: error.stream,
        subjects: [error.subject],
        description: QUEUE_DESCRIPTION.error,
        retention: RetentionPolicy.Workqueue,
        storage: StorageType.File,
        discard: DiscardPolicy.New,
        num_replicas: replicas,
        duplicate_window: JETSTREAM_DEFAULTS.duplicateWindowMs * NS_PER_MS,
        max_msgs: options.errorQueueMaxLength,
      });
    }
    const spec = (role: string): TransportSpec => ({ kind: 'jetstream', servers, connectionName: `${label}-${role}`, prefix: label, replicas });
    // The harness's own transport, to ingest the error queue: connected to the server itself, so no cut reaches it.
    const direct = this.cluster.url(CLIENT_NODE);
    const harness = openSpec({ kind: 'jetstream', servers: [direct], connectionName: `${label}-harness`, prefix: label, replicas });
    const network = this.#network;
    return {
      label,
      queue,
      errorQueue,
      place: network && ((role, argv) => network.command(clientMemberOf(role), argv)),
      cliTarget: direct,
      cliEnv: { [NATS_PREFIX_ENV]: label },
      spec,
      errorCount: () => this.#messages(error.stream),
      delayedCount: () => this.#messages(names.delayStream),
      errorIds: () => ingestErrorIds(harness, errorQueue, join(dir, 'error-store.db')),
      pendingIds: async () => [...(await this.#ids(work.stream, work.subject)), ...(await this.#ids(names.delayStream, work.delaySubject))],
      cleanup: async () => {
        this.#queues.delete(queue);
        this.#queues.delete(errorQueue);
        await this.#proxies.get(label)?.close();
        this.#proxies.delete(label);
        await harness.close();
        await deleteJetStreamPrefix(label, direct);
        // The servers' logs so far, beside the scenario's evidence.
        for (const node of this.cluster.nodes) copyFileSync(this.cluster.logPath(node), join(dir, `nats-n${node}.log`));
      },
    };
  }

  /**
   * On the namespaced cluster, for every partition scenario: a scope for the
   * bare nats.js client (children/jetstream-bare-*.ts), with a work-queue
   * stream of three replicas and a durable pull consumer whose `ack_wait`
   * is the workers' lease, and an error stream, made here. Its processes
   * run where redeliver's of the same role do.
   */
  async bareScope(scenario: string, label: string): Promise<Scope | undefined> {
    const network = this.#network;
    if (!network || !scenario.startsWith('partition-')) return undefined;
    const queue = label;
    const errorQueue = `${label}-error`;
    const jsm = this.#jsm;
    for (const name of [queue, errorQueue]) {
      const { stream, subject } = bareNames(name);
      await answered(`the bare client's stream ${stream}`, () =>
        jsm.streams.add({
          name: stream,
          subjects: [subject],
          retention: RetentionPolicy.Workqueue,
          storage: StorageType.File,
          num_replicas: 3,
          duplicate_window: JETSTREAM_DEFAULTS.duplicateWindowMs * NS_PER_MS,
        }),
      );
    }
    const { stream } = bareNames(queue);
    await answered(`the bare client's consumer of ${stream}`, () => jsm.consumers.add(stream, { durable_name: BARE_CONSUMER, ack_policy: AckPolicy.Explicit, ack_wait: WORKER_LEASE_MS * NS_PER_MS, max_deliver: -1 }));
    this.#bareStreams.set(label.replace(/-bare$/, ''), stream);
    const servers = this.cluster.nodes.map((node) => this.cluster.url(node));
    return {
      label,
      queue,
      errorQueue,
      place: (role, argv) => network.command(clientMemberOf(role), argv),
      cliTarget: this.cluster.url(CLIENT_NODE),
      children: { worker: 'test/faults/children/jetstream-bare-worker.ts', producer: 'test/faults/children/jetstream-bare-producer.ts' },
      spec: (role) => ({ kind: 'jetstream', servers, connectionName: `${label}-${role}`, prefix: label, replicas: 3 }),
      errorCount: () => this.#messages(bareNames(errorQueue).stream),
      delayedCount: async () => (await jsm.consumers.info(stream, BARE_CONSUMER)).num_ack_pending,
      errorIds: () => this.#bodies(bareNames(errorQueue).stream),
      pendingIds: () => this.#bodies(stream),
      cleanup: async () => {
        this.#bareStreams.delete(label.replace(/-bare$/, ''));
        for (const name of [queue, errorQueue]) await jsm.streams.delete(bareNames(name).stream).catch(() => undefined);
      },
    };
  }

  async killBroker(): Promise<void> {
    await this.cluster.kill(1);
    await this.cluster.boot(1);
  }

  async restartBroker(): Promise<void> {
    await this.cluster.restart(1);
  }

  async stallBroker(ms: number): Promise<void> {
    this.cluster.stall(1);
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      this.cluster.resume(1);
    }
  }

  async cutConnections(scope: Scope): Promise<number> {
    const proxy = this.#proxies.get(scope.label);
    if (!proxy) throw new Error(`JetStreamFaultAdapter: ${scope.label} has no proxy to cut (one server only)`);
    const cut = proxy.cut();
    this.#log(`cut ${cut} connection(s) of ${scope.label}`);
    return cut;
  }

  async memoryAlarm(on: boolean): Promise<void> {
    await this.cluster.limitStorage(on ? 1 : undefined);
  }

  /** The account's storage limit at 1 byte: every stream write, so every retry and error-queue copy, fails with "resource limits exceeded"; acks still run. */
  async refuseSettlements(_scope: Scope, on: boolean): Promise<void> {
    await this.cluster.limitStorage(on ? 1 : undefined);
  }

  /**
   * Deletes a queue's stream when it holds no message. The stream is first
   * moved off its subject, so no publish can land between the check and the
   * deletion; when it is not empty it gets its subject back.
   */
  async deleteQueueIfEmpty(queue: string): Promise<boolean> {
    const names = this.#queues.get(queue);
    if (!names) throw new Error(`JetStreamFaultAdapter: ${queue} is not a queue of a live scope`);
    const jsm = this.#jsm;
    const info = await jsm.streams.info(names.stream).catch((error: unknown) => {
      if (isNotFound(error)) return undefined;
      throw error;
    });
    if (info === undefined) return true;
    if (info.state.messages > 0) return false;
    await jsm.streams.update(names.stream, { ...info.config, subjects: [`${names.subject}.parked`] });
    if ((await jsm.streams.info(names.stream)).state.messages === 0) {
      await jsm.streams.delete(names.stream);
      return true;
    }
    await jsm.streams.update(names.stream, { ...info.config, subjects: [names.subject] });
    return false;
  }

  /**
   * Kills the node leading the work queue's stream, after step-downs have
   * moved that leadership off the clients' node and put the stream's
   * consumer's leadership on the same node (the worst case: pull requests
   * and stored messages lose their leader at once).
   */
  async killQueueLeader(scope: Scope): Promise<() => Promise<void>> {
    const { stream } = this.#queues.get(scope.queue)!;
    const cluster = this.cluster;
    let leader = await cluster.streamLeader(stream);
    for (let i = 0; leader === CLIENT_NODE && i < STEP_DOWNS; i++) leader = await cluster.stepDownStream(stream);
    if (leader === CLIENT_NODE) throw new Error(`the clients' node ${CLIENT_NODE} still leads ${stream} after ${STEP_DOWNS} step-downs`);
    let consumer = await cluster.consumerLeader(stream, QUEUE_CONSUMER);
    for (let i = 0; consumer !== leader && i < STEP_DOWNS; i++) consumer = await cluster.stepDownConsumer(stream, QUEUE_CONSUMER);
    this.#log(`${stream}: stream leader node ${leader}, consumer leader node ${consumer}, clients on node ${CLIENT_NODE}`);
    await cluster.kill(leader);
    return () => cluster.boot(leader);
  }

  get #jsm(): JetStreamManager {
    if (!this.#harness) throw new Error('JetStreamFaultAdapter: start() first');
    return this.#harness.jsm;
  }

  /** Messages in `stream` now; 0 when it does not exist. */
  async #messages(stream: string): Promise<number> {
    return this.#jsm.streams.info(stream).then(
      (info) => info.state.messages,
      (error: unknown) => {
        if (isNotFound(error)) return 0;
        throw error;
      },
    );
  }

  /** The bodies (the bare client's message ids) of every message of `stream`, read without removing them. */
  async #bodies(stream: string): Promise<string[]> {
    const { subject } = bareNames(stream);
    const messages = await readStream(readerFor(this.#jsm, undefined), stream, subject, { from: 1, limit: Number.MAX_SAFE_INTEGER });
    return messages.map((message) => message.string());
  }

  /** The message ids of every message of `stream` on `subject`, read without removing them; none when the stream does not exist. */
  async #ids(stream: string, subject: string): Promise<string[]> {
    const messages = await readStream(readerFor(this.#jsm, undefined), stream, subject, { from: 1, limit: Number.MAX_SAFE_INTEGER });
    return messages.map((message) => {
      const decoded = decodeNatsHeaders(message.header);
      return decoded.id ?? decoded.natsMsgId ?? `${stream}:${message.seq}`;
    });
  }
}

/**
 * Runs a stream or consumer `add` until the cluster answers it, for up to
 * 30 s: after a run of cuts its metadata leader may still be in election
 * (the request times out). An add the server already did, asked again
 * with the same settings, answers with what is there.
 */
async function answered(what: string, add: () => Promise<unknown>): Promise<void> {
  await until(what, 30_000, () => add().then(() => true, () => false), 500);
}
