/**
 * The nsqd nodes a transport talks to, each once: its HTTP API, its limits
 * (read once), its publishing connection, and the topics whose consumer
 * channel it has made sure of. Nodes are the `nsqd` option's, and the ones
 * nsqlookupd lists.
 */
import { NsqdHttpApi, NsqLookupdHttpApi, producerAddresses } from './http-api.js';
import { readNodeLimits, type NodeLimits } from './limits.js';
import { httpAddressOf, type ResolvedNsqOptions } from './options.js';
import { Publisher } from './publisher.js';

/** One nsqd. */
export class NsqNode {
  readonly http: NsqdHttpApi;
  readonly publisher: Publisher;
  #limits: Promise<NodeLimits> | undefined;
  readonly #channels = new Map<string, Promise<void>>();

  constructor(
    readonly address: string,
    httpAddress: string,
    options: ResolvedNsqOptions,
  ) {
    this.http = new NsqdHttpApi(httpAddress, { timeoutMs: options.publishTimeoutMs });
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

  /** Makes sure `topic` has `channel` on this node, once, so messages published before any consumer wait in it. */
  ensureChannel(topic: string, channel: string): Promise<void> {
    const key = `${topic}\n${channel}`;
    let pending = this.#channels.get(key);
    if (pending === undefined) {
      pending = this.http.createChannel(topic, channel);
      this.#channels.set(key, pending);
      pending.catch(() => this.#channels.delete(key));
    }
    return pending;
  }

  /** Forgets the channels made sure of for `topic` (after the topic was deleted). */
  forget(topic: string): void {
    for (const key of this.#channels.keys()) if (key.startsWith(`${topic}\n`)) this.#channels.delete(key);
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
