/**
 * The nsqd nodes a transport talks to, each once: its HTTP API, its limits
 * (read once), its publishing connection, and the topics whose consumer
 * channel it has made sure of. Nodes are the `nsqd` option's, and the ones
 * nsqlookupd lists.
 */
import type { Clock } from '../../time/clock.js';
import { NsqdHttpApi, NsqLookupdHttpApi, producerAddresses } from './http-api.js';
import { readNodeLimits, type NodeLimits } from './limits.js';
import { httpAddressOf, type ResolvedNsqOptions } from './options.js';
import { Publisher } from './publisher.js';

/**
 * How long after a channel is made nsqd v1.3.0 may take to start scanning
 * its deferred queue, in ms: its queue scan works from a list of channels
 * refreshed every 5 s (a fixed interval, not a setting), then looks at
 * them every 100 ms. Until then no deferred message of the channel comes
 * due.
 */
export const QUEUE_SCAN_START_MS = 5_000 + 100;

/** One nsqd. */
export class NsqNode {
  readonly http: NsqdHttpApi;
  readonly publisher: Publisher;
  #limits: Promise<NodeLimits> | undefined;
  readonly #channels = new Map<string, Promise<void>>();
  /** Per channel this node made for the transport: when nsqd's queue scan takes it in, on the monotonic clock. */
  readonly #scannedFrom = new Map<string, number>();
  readonly #clock: Clock;

  constructor(
    readonly address: string,
    httpAddress: string,
    options: ResolvedNsqOptions,
  ) {
    this.http = new NsqdHttpApi(httpAddress, { timeoutMs: options.publishTimeoutMs });
    this.#clock = options.clock;
    this.publisher = new Publisher({
      address,
      connectionName: options.connectionName,
      heartbeatMs: options.heartbeatMs,
      publishTimeoutMs: options.publishTimeoutMs,
      backoff: options.connectionBackoff,
      clock: options.clock,
      random: options.random,
      logger: options.logger,
    });
  }

  /** The node's limits, read on first use (and again after a failed read). */
  limits(): Promise<NodeLimits> {
    if (this.#limits === undefined) {
      const pending = readNodeLimits(this.http);
      this.#limits = pending;
      pending.catch(() => {
        if (this.#limits === pending) this.#limits = undefined;
      });
    }
    return this.#limits;
  }

  /**
   * Makes sure `topic` has `channel` on this node, once, so messages
   * published before any consumer wait in it. A channel made here is
   * remembered as new until nsqd's queue scan takes it in (see
   * {@link scanStartsIn}).
   */
  ensureChannel(topic: string, channel: string): Promise<void> {
    const key = `${topic}\n${channel}`;
    let pending = this.#channels.get(key);
    if (pending === undefined) {
      pending = this.#makeChannel(topic, channel, key);
      this.#channels.set(key, pending);
      pending.catch(() => this.#channels.delete(key));
    }
    return pending;
  }

  /**
   * In how many ms nsqd starts handing out the deferred messages of
   * `topic`'s `channel` on this node: more than 0 only for a channel this
   * node made less than {@link QUEUE_SCAN_START_MS} ago; 0 for one that
   * was there before.
   */
  scanStartsIn(topic: string, channel: string): number {
    const from = this.#scannedFrom.get(`${topic}\n${channel}`);
    return from === undefined ? 0 : Math.max(0, from - this.#clock.monotonic());
  }

  /** Forgets the channels made sure of for `topic` (after the topic was deleted). */
  forget(topic: string): void {
    for (const key of this.#channels.keys()) if (key.startsWith(`${topic}\n`)) this.#channels.delete(key);
    for (const key of this.#scannedFrom.keys()) if (key.startsWith(`${topic}\n`)) this.#scannedFrom.delete(key);
  }

  async #makeChannel(topic: string, channel: string, key: string): Promise<void> {
    const existed = (await this.http.channelStats(topic, channel)) !== undefined;
    await this.http.createChannel(topic, channel);
    if (!existed) this.#scannedFrom.set(key, this.#clock.monotonic() + QUEUE_SCAN_START_MS);
  }
}

export class NsqNodes {
  readonly #options: ResolvedNsqOptions;
  readonly #nodes = new Map<string, NsqNode>();
  readonly #lookupd: NsqLookupdHttpApi[];
  #next = 0;

  constructor(options: ResolvedNsqOptions) {
    this.#options = options;
    this.#lookupd = options.lookupd.map((address) => new NsqLookupdHttpApi(address, { timeoutMs: options.publishTimeoutMs }));
  }

  /** The node at TCP `address` (its HTTP address `httpAddress`, or the one the options give it). */
  node(address: string, httpAddress?: string): NsqNode {
    let node = this.#nodes.get(address);
    if (node === undefined) {
      node = new NsqNode(address, httpAddress ?? httpAddressOf(address, this.#options.httpAddresses), this.#options);
      this.#nodes.set(address, node);
    }
    return node;
  }

  /** Every node known so far. */
  all(): NsqNode[] {
    return [...this.#nodes.values()];
  }

  /**
   * The nodes a consumer of `topic` reads from: the `nsqd` option's and
   * every node an nsqlookupd lists for the topic (a lookupd that does not
   * answer is skipped).
   */
  async forTopic(topic: string): Promise<NsqNode[]> {
    const found = new Map(this.#options.nsqd.map((a) => [a, this.node(a)]));
    const answers = await Promise.allSettled(this.#lookupd.map((l) => l.lookup(topic)));
    for (const answer of answers) {
      if (answer.status !== 'fulfilled') continue;
      for (const producer of answer.value) {
        const { tcp, http } = producerAddresses(producer);
        found.set(tcp, this.node(tcp, http));
      }
    }
    return [...found.values()];
  }

  /** Every node: the `nsqd` option's, and every node an nsqlookupd lists. */
  async known(): Promise<NsqNode[]> {
    const found = new Set(this.#options.nsqd.map((a) => this.node(a)));
    const answers = await Promise.allSettled(this.#lookupd.map((l) => l.nodes()));
    for (const answer of answers) {
      if (answer.status !== 'fulfilled') continue;
      for (const producer of answer.value) {
        const { tcp, http } = producerAddresses(producer);
        found.add(this.node(tcp, http));
      }
    }
    return [...found];
  }

  /** The node the next send goes to: the `nsqd` option's in turn, else the nodes nsqlookupd knows in turn. */
  async forSend(): Promise<NsqNode> {
    let candidates = this.#options.nsqd.map((a) => this.node(a));
    if (candidates.length === 0) {
      const answers = await Promise.allSettled(this.#lookupd.map((l) => l.nodes()));
      for (const answer of answers) {
        if (answer.status !== 'fulfilled') continue;
        for (const producer of answer.value) {
          const { tcp, http } = producerAddresses(producer);
          candidates.push(this.node(tcp, http));
        }
      }
      candidates = [...new Set(candidates)];
    }
    if (candidates.length === 0) throw new Error(`nsq: no nsqd to send to (nsqlookupd ${this.#options.lookupd.join(', ')} lists none)`);
    return candidates[this.#next++ % candidates.length]!;
  }

  close(): void {
    for (const node of this.#nodes.values()) node.publisher.close();
  }
}
