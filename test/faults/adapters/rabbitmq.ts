/**
 * The fault suite on RabbitMQ: a node (or a three-node quorum cluster) of
 * the suite's own, never the shared broker. Each scenario gets its own work
 * queue, error queue and delay topology prefix, so the delay levels it reads
 * at the end hold only its own messages.
 *
 * Copies keep moving down the delay levels while the suite reads them, and
 * a copy mid-hop between two quorum levels (dead-lettered, not yet confirmed
 * by the next level) is in no queue's ready count: only the broker's
 * `messages_dlx` shows it. The end-of-run reads count the levels in the
 * order copies move through them, so that no copy can slip past the count
 * (see {@link RabbitMqFaultAdapter.pendingIdsOf}).
 *
 * With `network`, the three nodes run in network namespaces of the suite's
 * own (see network/network.ts), each with its own epmd and a long node name
 * on its address, under `cluster_partition_handling = autoheal` with a
 * short `net_ticktime` (see {@link NETWORK_CONFIG}); the producer and the
 * odd workers run in a client namespace `c1` connected to one follower of
 * the scope's work queue, the even workers in `c2` connected to the other;
 * the harness reads the evidence through c2's node over its own veth. The
 * partition scenarios cut that network apart. There the bare amqplib client
 * runs beside redeliver (see {@link RabbitMqFaultAdapter.bareScope}), its
 * work queue led by the node that leads redeliver's, so a cut meets both
 * alike.
 */
import amqp from 'amqplib';
import { copyFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { DELAY_LEVELS, RabbitMqTransport } from '../../../src/transports/rabbitmq/index.js';
import { until } from '../../support/own-servers.js';
import { RabbitCluster } from '../../support/rabbit-node.js';
import { CLIENT_MEMBERS, clientMemberOf } from '../network/client-members.js';
import type { Nemesis } from '../network/nemesis.js';
import type { FaultNetwork } from '../network/network.js';
import { openNetwork } from '../network/open.js';
import type { PartitionRoles } from '../network/partitions.js';
import { bareDelayQueue, bareQueues, declareBareQueues } from '../children/rabbitmq-bare-client.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { ingestErrorIds } from './error-ids.js';
import { partitionable, type FaultAdapter, type Partitionable, type Scope, type ScopeOptions } from './types.js';

/** Options of {@link RabbitMqFaultAdapter}. */
export interface RabbitMqFaultAdapterOptions {
  /** 1 for a single node with classic queues, 3 for a cluster with quorum queues. Default 1. */
  readonly nodes?: number;
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
  /** Nodes and clients in network namespaces of the suite's own, for the partition scenarios (three nodes only). Default false. */
  readonly network?: boolean;
}

/**
 * The namespaced cluster's partition handling: `net_ticktime` 5 s (default
 * 60 s), so the nodes notice a cut within 4 to 6 s, inside the suite's cuts
 * of 3 to 6 s (at 60 s, they never did, and the quorum work queue kept
 * its leader through 11 of 12 rows); and `autoheal`: once a partition is over, the
 * side with the most clients connected wins and the other nodes restart
 * their application and rejoin. `pause_minority`, the usual choice for
 * three nodes, acts only while a node sees itself in a minority: a cut
 * ending just as the nodes noticed it left the cluster's database
 * partitioned with every node running, and a row stalled (the work queue
 * without consumers, delay-level copies held mid-hop). Quorum queues are
 * Raft groups either way; a restarted node's members catch up from the log.
 */
const NETWORK_CONFIG = ['cluster_partition_handling = autoheal', 'net_ticktime = 5'];
/**
 * How long, on the namespaced cluster, a worker may take to start, and a
 * step of a scope's set-up or of the partition roles is tried again while
 * it fails (see `#settingUp`). After a cut, RabbitMQ 3.10's autoheal can
 * loop, its rounds a minute apart, for up to about 4 min here: each round
 * restarts a node's application, and while a node's database is split from
 * the others it refuses to declare a quorum queue another node made
 * (`cluster_not_formed`), so a worker connected there keeps trying until
 * the loop ends.
 */
const AUTOHEAL_SETTLE_MS = 300_000;
/**
 * A delay level's hop that a partition left unconfirmed (the next level's
 * leader cut off) is published again after 2 s instead of the broker's
 * default 180 s, so a row drains within its partition's seconds; a hop
 * published twice is a duplicate, counted.
 */
const NETWORK_RABBIT_ENV = { dead_letter_worker_publisher_confirm_timeout: '2000' };

const SINGLE_NODE_SKIPS: Record<string, string> = {
  'cluster-leader-kill': 'needs the three-node cluster adapter',
};

/** How long the end-of-run read waits for the delay levels to hand on every copy: past the 180 s retry of a hop left unconfirmed by a broker fault. */
const LEVELS_SETTLE_TIMEOUT_MS = 200_000;

/** How long a move of the bare work queue's leader may take before the partition goes on with the leader where it is. */
const LEADER_MOVE_TIMEOUT_MS = 10_000;

/** Ingests of the error queue at most, each after the cluster is whole, until one finds nothing new. */
const ERROR_INGEST_PASSES = 5;

const sum = (counts: readonly number[]) => counts.reduce((total, count) => total + count, 0);

/** The RabbitMQ adapter, on nodes of its own. */
export class RabbitMqFaultAdapter implements FaultAdapter {
  readonly transport: string;
  readonly workerStartMs: number | undefined;
  #cluster?: RabbitCluster;
  readonly #nodes: number;
  readonly #log: (line: string) => void;
  readonly #networked: boolean;
  #network?: FaultNetwork;
  #nemesis?: Nemesis;
  /**
   * The node clients connect to: in a cluster, one that does not lead the
   * work queue, so a leader kill does not cut them. On the network, the
   * node the harness reads through and the `c2` clients connect to.
   */
  #clientNode = 1;
  /** On the network, the node the `c1` clients connect to: the other follower of the work queue when the scope began. */
  #c1Node = 1;
  /** The work queue of each live bare scope, by the work queue of the scope it runs beside. */
  readonly #bareQueues = new Map<string, string>();

  constructor(options: RabbitMqFaultAdapterOptions = {}) {
    this.#nodes = options.nodes ?? 1;
    this.#log = options.log ?? (() => undefined);
    this.#networked = options.network ?? false;
    this.workerStartMs = this.#networked ? AUTOHEAL_SETTLE_MS : undefined;
    if (this.#networked && this.#nodes !== 3) throw new Error('RabbitMqFaultAdapter: network needs nodes: 3');
    this.transport = this.#nodes === 1 ? 'rabbitmq' : this.#networked ? `rabbitmq-${this.#nodes}-netns` : `rabbitmq-${this.#nodes}-node`;
  }

  skipReason(scenario: string): string | undefined {
    if (this.#networked) return scenario.startsWith('partition-') ? undefined : 'the namespaced cluster runs the partition scenarios only';
    if (this.#nodes === 1) return SINGLE_NODE_SKIPS[scenario];
    return scenario === 'cluster-leader-kill' ? undefined : 'the cluster runs the leader-kill scenario only';
  }

  get cluster(): RabbitCluster {
    if (!this.#cluster) throw new Error('RabbitMqFaultAdapter: start() first');
    return this.#cluster;
  }

  async start(): Promise<void> {
    if (this.#networked) {
      ({ network: this.#network, nemesis: this.#nemesis } = openNetwork(['n1', 'n2', 'n3', ...CLIENT_MEMBERS], this.#log));
    }
    const network = this.#network;
    const placement = network && ((index: number) => ({ host: network.member(`n${index}`).address, command: (argv: readonly string[]) => network.command(`n${index}`, argv) }));
    this.#cluster = await RabbitCluster.start({
      nodes: this.#nodes,
      namePrefix: 'rmqfault',
      log: this.#log,
      placement,
      extraConfig: network ? NETWORK_CONFIG : [],
      rabbitEnv: network ? NETWORK_RABBIT_ENV : {},
    });
  }

  async stop(): Promise<void> {
    this.#nemesis?.heal();
    // The namespaced cluster is thrown away with kill -9: after the partitions, `rabbitmqctl stop` has hung for its full 120 s on nodes.
    if (this.#networked) this.#cluster?.destroySync();
    else await this.#cluster?.stop();
    this.#network?.destroy();
  }

  get partitions(): Partitionable | undefined {
    return partitionable(this.#nemesis, (scope) => this.#roles(scope));
  }

  /** The node leading the scope's quorum work queue now, and the others. */
  async #roles(scope: Scope): Promise<PartitionRoles> {
    // Within a schedule the last cut may still be healing: no node may name a leader for a while.
    const leader = await this.#settingUp(`the leader of ${scope.queue}`, () => this.cluster.leaderOf(scope.queue));
    this.#log(`${scope.queue}: leader node ${leader}; c1 clients on node ${this.#c1Node}, c2 clients and the harness on node ${this.#clientNode}`);
    const bare = this.#bareQueues.get(scope.queue);
    if (bare) this.#log(`${bare} (bare client): leader node ${await this.#moveLeader(bare, leader)}`);
    return { leader: `n${leader}`, followers: this.cluster.nodes.filter((n) => n !== leader).map((n) => `n${n}`), clients: CLIENT_MEMBERS };
  }

  /**
   * Moves the leadership of quorum queue `queue` to `node` (`ra:transfer_leadership`),
   * unless it is there already, and resolves where it is after: best effort,
   * a move that does not finish within {@link LEADER_MOVE_TIMEOUT_MS} (or a
   * transfer the leader refuses) leaves it where it is, logged.
   */
  async #moveLeader(queue: string, node: number): Promise<number | string> {
    const at = await this.cluster.leaderOf(queue).catch(() => undefined);
    if (at === node) return node;
    const target = this.cluster.nodeName(node);
    const expression =
      `{ok, Q} = rabbit_amqqueue:lookup(rabbit_misc:r(<<"/">>, queue, <<"${queue}">>)), {RaName, _} = amqqueue:get_pid(Q), ` +
      `{ok, _, Leader} = ra:members({RaName, node()}), {transfer, ra:transfer_leadership(Leader, {RaName, '${target}'})}.`;
    try {
      const answer = await this.cluster.ctl(node, 'eval', expression);
      await until(`${queue}'s leader on node ${node} (${answer.trim()})`, LEADER_MOVE_TIMEOUT_MS, async () => (await this.cluster.leaderOf(queue, node).catch(() => undefined)) === node, 200);
      return `${node} (moved from node ${at ?? 'unknown'})`;
    } catch (error) {
      this.#log(`${queue}: the leader did not move to node ${node} (${(error as Error).message}); it stays where it is`);
      return this.cluster.leaderOf(queue).catch(() => 'unknown');
    }
  }

  /** On the network, the node a process of `role` connects to: the producers and odd workers (`c1`) to one follower, the harness and c2 to the other. */
  #nodeOf(role: string): number {
    return /^(producer|worker)-/.test(role) && clientMemberOf(role) === CLIENT_MEMBERS[0] ? this.#c1Node : this.#clientNode;
  }

  async scope(label: string, dir: string, options: ScopeOptions = {}): Promise<Scope> {
    const queue = label;
    const errorQueue = `${label}.error`;
    const topologyPrefix = `${label}.t`;
    const queueType = this.#nodes === 1 ? 'classic' : 'quorum';
    if (this.#nodes > 1) {
      // Declare the work queue first, then connect clients to a node that does not lead it.
      await this.#settingUp(`declaring ${queue}`, () => this.#withChannel(1, (channel) => channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } })));
      const leader = await this.#settingUp(`the leader of ${queue}`, () => this.cluster.leaderOf(queue));
      const followers = this.cluster.nodes.filter((node) => node !== leader);
      this.#clientNode = followers[0]!;
      this.#c1Node = this.#networked ? followers[1]! : this.#clientNode;
      this.#log(`${queue}: leader node ${leader}, clients on node ${this.#clientNode}${this.#networked ? ` (c2) and ${this.#c1Node} (c1)` : ''}`);
    }
    if (options.errorQueueMaxLength !== undefined) {
      const max = options.errorQueueMaxLength;
      await this.#withChannel(this.#clientNode, (channel) =>
        channel.assertQueue(errorQueue, {
          durable: true,
          arguments: { 'x-max-length': max, 'x-overflow': 'reject-publish', ...(queueType === 'quorum' ? { 'x-queue-type': 'quorum' } : {}) },
        }),
      );
    }
    const spec = (role: string): TransportSpec => ({
      kind: 'rabbitmq',
      url: this.cluster.url(this.#nodeOf(role)),
      connectionName: `${label}-${role}`,
      topologyPrefix,
      queueType,
    });
    const harness = openSpec(spec('harness')) as RabbitMqTransport;
    // Depths come from the broker itself, over a connection of the harness's own, not through the transport under test.
    const peek = new DepthPeek(() => this.cluster.url(this.#clientNode));
    // The delay levels in the order copies move through them (level 27 down to 0), and the quorum levels' unroutable
    // queue (copies whose work queue was gone when they came back).
    const { unroutable } = harness.topology;
    const levels = Array.from({ length: DELAY_LEVELS }, (_, n) => harness.topology.level(DELAY_LEVELS - 1 - n));
    const exits = [queue, ...(unroutable ? [unroutable] : [])];
    const network = this.#network;
    return {
      label,
      queue,
      errorQueue,
      place: network && ((role, argv) => network.command(clientMemberOf(role), argv)),
      cliTarget: this.cluster.url(this.#clientNode),
      spec,
      errorCount: () => peek.depth(errorQueue),
      async delayedCount() {
        let ready = 0;
        for (const level of levels) ready += await peek.depth(level);
        return ready;
      },
      delayedCountExact: async () => sum(await this.cluster.messagesIn(levels, this.#clientNode)),
      parkedCount: async () => (unroutable ? peek.depth(unroutable) : 0),
      unstick: this.#nodes > 1 ? () => this.#unstick(levels) : undefined,
      errorIds: () => this.#errorIds(harness, errorQueue, join(dir, 'error-store.db')),
      pendingIds: () => this.pendingIdsOf(levels, exits),
      cleanup: async () => {
        await peek.close();
        await harness.close();
        await this.#withChannel(this.#clientNode, async (channel) => {
          for (const q of [...exits, errorQueue, ...levels]) await channel.deleteQueue(q);
        }).catch(() => undefined);
        // On the network, the nodes' logs so far, beside the scenario's evidence.
        for (const node of network ? this.cluster.nodes : []) {
          if (existsSync(this.cluster.logPath(node))) copyFileSync(this.cluster.logPath(node), join(dir, `rabbit-n${node}.log`));
        }
      },
    };
  }

  /**
   * On the namespaced cluster, for every partition scenario: a scope for the
   * bare amqplib client (children/rabbitmq-bare-*.ts), with a work queue, an
   * error queue and a delay queue, all quorum queues as redeliver's are,
   * declared here through the node that leads redeliver's work queue, so
   * that their leaders start there (and {@link RabbitMqFaultAdapter.partitions}'
   * roles move the work queue's leader back there before each cut). Its
   * processes run where redeliver's of the same role do and connect to the
   * same node.
   */
  async bareScope(scenario: string, label: string): Promise<Scope | undefined> {
    const network = this.#network;
    if (!network || !scenario.startsWith('partition-')) return undefined;
    const queue = label;
    const errorQueue = `${label}.error`;
    const delay = bareDelayQueue(queue);
    const beside = label.replace(/-bare$/, '');
    const leader = await this.#settingUp(`the leader of ${beside}`, () => this.cluster.leaderOf(beside));
    await this.#settingUp(`declaring ${queue}`, () =>
      this.#withChannel(leader, (channel) => declareBareQueues(channel, queue, errorQueue)),
    );
    this.#bareQueues.set(beside, queue);
    this.#log(`${queue} (bare client): declared through node ${leader}, its leader node ${await this.cluster.leaderOf(queue).catch(() => 'unknown')}`);
    const peek = new DepthPeek(() => this.cluster.url(this.#clientNode));
    return {
      label,
      queue,
      errorQueue,
      place: (role, argv) => network.command(clientMemberOf(role), argv),
      cliTarget: this.cluster.url(this.#clientNode),
      children: { worker: 'test/faults/children/rabbitmq-bare-worker.ts', producer: 'test/faults/children/rabbitmq-bare-producer.ts' },
      spec: (role) => ({ kind: 'rabbitmq', url: this.cluster.url(this.#nodeOf(role)), connectionName: `${label}-${role}`, topologyPrefix: `${label}.t`, queueType: 'quorum' }),
      errorCount: () => peek.depth(errorQueue),
      delayedCount: () => peek.depth(delay),
      delayedCountExact: async () => sum(await this.cluster.messagesIn([delay], this.#clientNode)),
      errorIds: () => this.#bareErrorIds(errorQueue),
      pendingIds: () => this.pendingIdsOf([delay], [queue]),
      cleanup: async () => {
        this.#bareQueues.delete(beside);
        await peek.close();
        await this.#withChannel(this.#clientNode, async (channel) => {
          for (const q of bareQueues(queue, errorQueue)) await channel.deleteQueue(q.name);
        }).catch(() => undefined);
      },
    };
  }

  /** The bare error queue's ids, read off it (destructively) once every node is up and the queue has a leader (see {@link RabbitMqFaultAdapter.#errorIds}). */
  async #bareErrorIds(errorQueue: string): Promise<string[]> {
    await until(`every node up and a leader for ${errorQueue}`, 60_000, async () => {
      if ((await this.cluster.running()).length < this.#nodes) return false;
      return this.cluster.leaderOf(errorQueue).then(() => true, () => false);
    }, 500).catch((error: Error) => this.#log(`${error.message}; reading anyway`));
    return this.#drainIds([errorQueue]);
  }

  async killBroker(): Promise<void> {
    for (const node of this.cluster.nodes) await this.cluster.kill(node);
    await Promise.all(this.cluster.nodes.map((node) => this.cluster.boot(node)));
  }

  async restartBroker(): Promise<void> {
    for (const node of this.cluster.nodes) await this.cluster.restart(node);
  }

  async stallBroker(ms: number): Promise<void> {
    for (const node of this.cluster.nodes) this.cluster.stall(node);
    try {
      await new Promise((r) => setTimeout(r, ms));
    } finally {
      for (const node of this.cluster.nodes) this.cluster.resume(node);
    }
  }

  async cutConnections(scope: Scope): Promise<number> {
    // Each process has two connections, `<label>-<role>` and `<label>-<role>.publish`; the harness's are left alone.
    return this.cluster.closeConnections((name) => name.startsWith(`${scope.label}-`) && !name.startsWith(`${scope.label}-harness`), this.#clientNode);
  }

  async memoryAlarm(on: boolean): Promise<void> {
    await this.cluster.memoryAlarm(on, this.#clientNode);
  }

  /** A policy of length 0 with `reject-publish` on the scope's error queue: the broker nacks every error-queue copy until it is cleared. */
  async refuseSettlements(scope: Scope, on: boolean): Promise<void> {
    const policy = `${scope.label}-refuse`;
    if (!on) {
      await this.cluster.ctl(this.#clientNode, 'clear_policy', policy);
      return;
    }
    const pattern = `^${scope.errorQueue.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`;
    const definition = JSON.stringify({ 'max-length': 0, overflow: 'reject-publish' });
    await this.cluster.ctl(this.#clientNode, 'set_policy', policy, pattern, definition, '--apply-to', 'queues', '--priority', '10');
  }

  async deleteQueueIfEmpty(queue: string): Promise<boolean> {
    return this.#withChannel(this.#clientNode, async (channel) => {
      await channel.deleteQueue(queue, { ifEmpty: true });
      return true;
    }).catch(() => false);
  }

  async readyCount(queue: string): Promise<number> {
    return this.#withChannel(this.#clientNode, async (channel) => (await channel.checkQueue(queue)).messageCount).catch(() => 0);
  }

  async killQueueLeader(scope: Scope): Promise<() => Promise<void>> {
    const leader = await this.cluster.leaderOf(scope.queue);
    if (leader === this.#clientNode) throw new Error(`the clients' node ${leader} leads ${scope.queue}: the kill would cut them too`);
    await this.cluster.kill(leader);
    return () => this.cluster.boot(leader);
  }

  /**
   * Moves the leadership of each delay level holding copies it
   * dead-lettered and its target never confirmed to another running node,
   * which starts the level's dead-letter worker afresh: RabbitMQ 3.10's
   * worker does not send such copies again after its target's leader
   * changed (see docs/rabbitmq.md). Says which levels it moved; undefined
   * when none held any.
   */
  async #unstick(levels: readonly string[]): Promise<string | undefined> {
    const held = await this.cluster.deadLetteredUnconfirmed(levels, this.#clientNode);
    const stuck = levels.map((level, i) => ({ level, held: held[i]! })).filter((l) => l.held > 0);
    if (stuck.length === 0) return undefined;
    const running = await this.cluster.running();
    const moved: string[] = [];
    for (const { level, held: copies } of stuck) {
      const from = await this.cluster.leaderOf(level);
      const to = running.find((node) => node !== from);
      if (to === undefined) continue;
      const answer = await this.cluster.transferLeadership(level, from, to);
      moved.push(`${level} (${copies} copies, node ${from} to ${to}: ${answer})`);
    }
    return moved.length > 0 ? `moved the leadership of the delay levels holding dead-lettered copies their target never confirmed: ${moved.join('; ')}` : undefined;
  }

  /**
   * The error queue's ids, ingested into an error store. On a cluster the
   * ingest runs once every node is up and the queue has a leader, and again
   * until a pass finds nothing new: a quorum queue whose leader does not
   * answer within 250 ms counts 0 (RabbitMQ 3.10), which ends an ingest
   * with the queue still full, as happens while a healed partition's nodes
   * restart.
   */
  async #errorIds(harness: RabbitMqTransport, errorQueue: string, storePath: string): Promise<string[]> {
    if (this.#nodes === 1) return ingestErrorIds(harness, errorQueue, storePath);
    const ingestWhenWhole = async () => {
      await until(`every node up and a leader for ${errorQueue}`, 60_000, async () => {
        if ((await this.cluster.running()).length < this.#nodes) return false;
        return this.cluster.leaderOf(errorQueue).then(() => true, () => false);
      }, 500).catch((error: Error) => this.#log(`${error.message}; ingesting anyway`));
      return ingestErrorIds(harness, errorQueue, storePath);
    };
    let ids = await ingestWhenWhole();
    for (let pass = 2; pass <= ERROR_INGEST_PASSES; pass++) {
      const stored = await ingestWhenWhole();
      if (stored.length === ids.length) break;
      this.#log(`${errorQueue}: ingest pass ${pass} found ${stored.length - ids.length} entries the passes before missed`);
      ids = stored;
    }
    return ids;
  }

  /**
   * Reads every message still in the delay `levels` (given in the order
   * copies move through them) or in the `exits` they leave to (the work
   * queue, the unroutable queue) off the broker, destructively, and
   * resolves their ids. Drains everything, then has the broker count the
   * levels in one pass in that same order, ready and mid-hop copies both,
   * until a pass finds none: a copy can only move ahead of such a pass, so
   * a pass that saw none proves that every copy left is in an exit, and the
   * exits are drained once more. Rejects when copies stay mid-hop longer
   * than {@link LEVELS_SETTLE_TIMEOUT_MS}.
   */
  async pendingIdsOf(levels: readonly string[], exits: readonly string[]): Promise<string[]> {
    const ids = await this.#drainIds([...levels, ...exits]);
    const deadline = Date.now() + LEVELS_SETTLE_TIMEOUT_MS;
    for (let left = sum(await this.cluster.messagesIn(levels, this.#clientNode)); left > 0; left = sum(await this.cluster.messagesIn(levels, this.#clientNode))) {
      if (Date.now() > deadline) throw new Error(`${left} copies still in the delay levels (mid-hop) after ${LEVELS_SETTLE_TIMEOUT_MS / 1000} s`);
      ids.push(...(await this.#drainIds([...levels, ...exits])));
    }
    ids.push(...(await this.#drainIds(exits)));
    return ids;
  }

  /** Reads every message of `queues` off the broker (destructively), over one connection, and resolves their ids. */
  async #drainIds(queues: readonly string[]): Promise<string[]> {
    const ids: string[] = [];
    await this.#withConnection(this.#clientNode, async (connection) => {
      for (const queue of queues) {
        const channel = await connection.createChannel();
        channel.on('error', () => undefined);
        try {
          for (let m = await channel.get(queue, { noAck: true }); m; m = await channel.get(queue, { noAck: true })) ids.push(String(m.properties.messageId));
        } catch {
          continue; // A queue that does not exist holds nothing (and its 404 closed the channel).
        }
        await channel.close().catch(() => undefined);
      }
    });
    return ids;
  }

  /**
   * `step`, tried again every 500 ms while it fails, for up to
   * {@link AUTOHEAL_SETTLE_MS} on the namespaced cluster (once elsewhere),
   * where a set-up read or declaration may meet a node's AMQP port closed
   * by autoheal, or no leader named. Logs the first failure; rejects with
   * the last one.
   */
  async #settingUp<T>(what: string, step: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + (this.#networked ? AUTOHEAL_SETTLE_MS : 0);
    for (let tries = 1; ; tries++) {
      try {
        return await step();
      } catch (error) {
        if (Date.now() >= deadline) throw error;
        if (tries === 1) this.#log(`${what}: ${(error as Error).message}; trying again for up to ${AUTOHEAL_SETTLE_MS / 1000} s`);
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  async #withChannel<T>(node: number, use: (channel: amqp.Channel) => Promise<T>): Promise<T> {
    return this.#withConnection(node, async (connection) => {
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      return use(channel);
    });
  }

  async #withConnection<T>(node: number, use: (connection: amqp.ChannelModel) => Promise<T>): Promise<T> {
    const connection = await amqp.connect(this.cluster.url(node));
    connection.on('error', () => undefined);
    try {
      return await use(connection);
    } finally {
      await connection.close().catch(() => undefined);
    }
  }
}

/** Reads queue depths with passive declarations on one reused connection, reconnecting after a broker fault. */
class DepthPeek {
  #connection?: Promise<amqp.ChannelModel>;

  constructor(private readonly url: () => string) {}

  /** Messages ready in `queue`; 0 when it does not exist. */
  async depth(queue: string): Promise<number> {
    const connection = await this.#connect();
    const channel = await connection.createChannel().catch((error: unknown) => {
      this.#connection = undefined;
      throw error;
    });
    channel.on('error', () => undefined);
    try {
      return (await channel.checkQueue(queue)).messageCount;
    } catch {
      return 0; // A passive check of a missing queue closes the channel.
    } finally {
      await channel.close().catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    const connection = await this.#connection?.catch(() => undefined);
    this.#connection = undefined;
    await connection?.close().catch(() => undefined);
  }

  #connect(): Promise<amqp.ChannelModel> {
    this.#connection ??= amqp.connect(this.url()).then((connection) => {
      const forget = () => (this.#connection = undefined);
      connection.on('error', forget);
      connection.on('close', forget);
      return connection;
    });
    const pending = this.#connection;
    pending.catch(() => (this.#connection = undefined));
    return pending;
  }
}
