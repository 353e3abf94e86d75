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
 */
import amqp from 'amqplib';
import { join } from 'node:path';
import { DELAY_LEVELS, RabbitMqTransport } from '../../../src/transports/rabbitmq/index.js';
import { RabbitCluster } from '../../support/rabbit-node.js';
import { openSpec, type TransportSpec } from '../transport-spec.js';
import { ingestErrorIds } from './error-ids.js';
import type { FaultAdapter, Scope, ScopeOptions } from './types.js';

/** Options of {@link RabbitMqFaultAdapter}. */
export interface RabbitMqFaultAdapterOptions {
  /** 1 for a single node with classic queues, 3 for a cluster with quorum queues. Default 1. */
  readonly nodes?: number;
  /** Progress lines. Default silent. */
  readonly log?: (line: string) => void;
}

const SINGLE_NODE_SKIPS: Record<string, string> = {
  'cluster-leader-kill': 'needs the three-node cluster adapter',
};

/** How long the end-of-run read waits for the delay levels to hand on every copy: past the 180 s retry of a hop left unconfirmed by a broker fault. */
const LEVELS_SETTLE_TIMEOUT_MS = 200_000;

const sum = (counts: readonly number[]) => counts.reduce((total, count) => total + count, 0);

/** The RabbitMQ adapter, on nodes of its own. */
export class RabbitMqFaultAdapter implements FaultAdapter {
  readonly transport: string;
  #cluster?: RabbitCluster;
  readonly #nodes: number;
  readonly #log: (line: string) => void;
  /** The node clients connect to: in a cluster, one that does not lead the work queue, so a leader kill does not cut them. */
  #clientNode = 1;

  constructor(options: RabbitMqFaultAdapterOptions = {}) {
    this.#nodes = options.nodes ?? 1;
    this.#log = options.log ?? (() => undefined);
    this.transport = this.#nodes === 1 ? 'rabbitmq' : `rabbitmq-${this.#nodes}-node`;
  }

  skipReason(scenario: string): string | undefined {
    if (this.#nodes === 1) return SINGLE_NODE_SKIPS[scenario];
    return scenario === 'cluster-leader-kill' ? undefined : 'the cluster runs the leader-kill scenario only';
  }

  get cluster(): RabbitCluster {
    if (!this.#cluster) throw new Error('RabbitMqFaultAdapter: start() first');
    return this.#cluster;
  }

  async start(): Promise<void> {
    this.#cluster = await RabbitCluster.start({ nodes: this.#nodes, namePrefix: 'rmqfault', log: this.#log });
  }

  async stop(): Promise<void> {
    await this.#cluster?.stop();
  }

  async scope(label: string, dir: string, options: ScopeOptions = {}): Promise<Scope> {
    const queue = label;
    const errorQueue = `${label}.error`;
    const topologyPrefix = `${label}.t`;
    const queueType = this.#nodes === 1 ? 'classic' : 'quorum';
    if (this.#nodes > 1) {
      // Declare the work queue first, then connect clients to a node that does not lead it.
      await this.#withChannel(1, (channel) => channel.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } }));
      const leader = await this.cluster.leaderOf(queue);
      this.#clientNode = this.cluster.nodes.find((node) => node !== leader)!;
      this.#log(`${queue}: leader node ${leader}, clients on node ${this.#clientNode}`);
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
      url: this.cluster.url(this.#clientNode),
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
    return {
      label,
      queue,
      errorQueue,
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
      errorIds: () => ingestErrorIds(harness, errorQueue, join(dir, 'error-store.db')),
      pendingIds: () => this.pendingIdsOf(levels, exits),
      cleanup: async () => {
        await peek.close();
        await harness.close();
        await this.#withChannel(this.#clientNode, async (channel) => {
          for (const q of [...exits, errorQueue, ...levels]) await channel.deleteQueue(q);
        }).catch(() => undefined);
      },
    };
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
