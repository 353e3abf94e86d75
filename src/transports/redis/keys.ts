/**
 * Where a queue lives in Redis. Every key of one transport carries the same
 * hash tag, `{<prefix>}`, so on Redis Cluster they all hash to one slot and
 * a settlement that touches two queues (a dead-letter moves a message from
 * its work queue to an error queue) is still one script. Deployments that
 * want their queues spread over a cluster give each group of queues, with
 * its error queue, a prefix of its own.
 *
 * For a queue `q` under prefix `p`:
 * - `{p}:q:<q>`  the stream of ready and leased messages (consumer group `redeliver`);
 * - `{p}:d:<q>`  the sorted set of delayed retries, by due time in server milliseconds;
 * - `{p}:dm:<q>` the hash holding each delayed retry's fields (`<token>:i`, `:h`, `:b`);
 * - `{p}:l:<q>`  the hash of leases extended past the consumer's `leaseMs` (entry id → until);
 * - `{p}:queues` the hash of every queue the prefix knows: name → `work` or `error`;
 * - `{p}:seq`    a counter that names delayed retries;
 * - `{p}:s:<entry id>:<count>:<q>` the record of one settlement that took
 *   effect (its consumer), kept {@link SETTLED_RECORD_MS} so the same
 *   settlement sent again finds itself done.
 */

/** The consumer group every consumer of a queue joins: they compete for its entries. */
export const GROUP = 'redeliver';

/** How long the record of a settlement that took effect is kept: a repeat within it answers done. */
export const SETTLED_RECORD_MS = 300_000;

/** The kind of a queue, as `{p}:queues` records it. */
export type RedisQueueKind = 'work' | 'error';

/** The keys of one queue. */
export interface QueueKeys {
  readonly stream: string;
  readonly delayed: string;
  readonly delayedData: string;
  readonly leases: string;
}

/** The key names of one prefix. */
export class RedisKeys {
  readonly #tag: string;
  /** Every queue of the prefix and its kind. */
  readonly queues: string;
  /** The counter that names delayed retries. */
  readonly seq: string;

  constructor(readonly prefix: string) {
    if (typeof prefix !== 'string' || prefix.length === 0 || /[{}]/.test(prefix)) {
      throw new RangeError(`RedisTransport: keyPrefix must be a non-empty string without braces, got ${JSON.stringify(prefix)}`);
    }
    this.#tag = `{${prefix}}`;
    this.queues = `${this.#tag}:queues`;
    this.seq = `${this.#tag}:seq`;
  }

  /** The stream of `queue`. */
  stream(queue: string): string {
    return `${this.#tag}:q:${queue}`;
  }

  /** The record of the settlement of `queue`'s entry `entryId` delivered with pending count `count`. */
  settlement(queue: string, entryId: string, count: number): string {
    return `${this.#tag}:s:${entryId}:${count}:${queue}`;
  }

  /** Every key of `queue`. */
  of(queue: string): QueueKeys {
    return {
      stream: `${this.#tag}:q:${queue}`,
      delayed: `${this.#tag}:d:${queue}`,
      delayedData: `${this.#tag}:dm:${queue}`,
      leases: `${this.#tag}:l:${queue}`,
    };
  }
}
