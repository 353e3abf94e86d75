import type { RedisKeys, QueueKeys } from './keys.js';
import { GROUP, SETTLED_RECORD_MS } from './keys.js';
import { replicaMark, waitForReplicas, type ReplicaMark, type ReplicaWait } from './replicas.js';
import type { ScriptRunner } from './scripts/runner.js';
import { EXTEND } from './scripts/extend.js';
import { SETTLE, SETTLE_ACKS } from './scripts/settle.js';

/** One settlement of a delivery, as {@link Settler} sends it. */
export type SettleOp =
  | { readonly kind: 'a'; readonly entryId: string; readonly count: number }
  | { readonly kind: 'r'; readonly entryId: string; readonly count: number; readonly delayMs: number; readonly headers: string }
  | { readonly kind: 'd'; readonly entryId: string; readonly count: number; readonly errorQueue: string; readonly headers: string }
  | { readonly kind: 'l'; readonly entryId: string; readonly count: number; readonly inherit: number };

/** What the server did with one settlement: 1 done (now, or by this consumer before), 0 gone, or its error text. */
export type SettleResult = 1 | 0 | string;

/** The most settlements one script call carries. */
export const SETTLE_BATCH = 256;

interface Pending {
  readonly op: SettleOp;
  resolve(result: SettleResult): void;
  reject(error: unknown): void;
}

/**
 * Settles the deliveries of one queue, and extends their leases. Settlements
 * asked for in the same turn of the event loop go to the server in one
 * script call (each still applies on its own), so a consumer handling fifty
 * messages at once pays one round trip for their acks, not fifty. `scripts`
 * runs on the transport's settlement connection, which carries nothing
 * else: an answer never waits behind sends or a consumer's upkeep, and a
 * delivery's lease extensions and settlement reach the server in the order
 * they were asked for. With `replicaWait`, a call that wrote a copy (any
 * settlement but an ack) waits for the replicas before its settlements
 * resolve; when they fall short, its acks resolve and the others reject
 * with a `ReplicasBehindError` (their copies stand on the primary).
 */
export class Settler {
  readonly #keys: QueueKeys;
  #pending: Pending[] = [];
  #scheduled = false;
  readonly #inflight = new Set<Promise<void>>();

  constructor(
    private readonly scripts: ScriptRunner,
    private readonly redisKeys: RedisKeys,
    private readonly queue: string,
    private readonly consumer: string,
    private readonly replicaWait: ReplicaWait = { replicas: 0, timeoutMs: 0 },
  ) {
    this.#keys = redisKeys.of(queue);
  }

  /** Queues `op` for the next call; resolves what the server did with it. */
  settle(op: SettleOp): Promise<SettleResult> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ op, resolve, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      queueMicrotask(() => this.#flush());
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const all = this.#pending;
    this.#pending = [];
    for (let i = 0; i < all.length; i += SETTLE_BATCH) {
      const sent = this.#send(all.slice(i, i + SETTLE_BATCH));
      this.#inflight.add(sent);
      void sent.finally(() => this.#inflight.delete(sent));
    }
  }

  /** Extends the lease of `entryId` to `ms` from now (never shorter); resolves whether this consumer still held it. */
  async extend(entryId: string, count: number, ms: number, leaseMs: number): Promise<boolean> {
    const k = this.#keys;
    const reply = await this.scripts.run(EXTEND, [k.stream, k.leases], [GROUP, this.consumer, entryId, count, ms, leaseMs]);
    return reply === 1;
  }

  /** Resolves once every settlement asked for so far has its answer. */
  async idle(): Promise<void> {
    while (this.#pending.length > 0 || this.#inflight.size > 0) {
      if (this.#pending.length > 0) await Promise.resolve();
      else await Promise.all(this.#inflight);
    }
  }

  /** Resolves the error of a `WAIT` that fell short (or failed), undefined once the replicas have every write so far. */
  async #waitForReplicas(settlements: number, mark: ReplicaMark | undefined): Promise<unknown> {
    try {
      await waitForReplicas(this.scripts.client, this.#keys.stream, this.replicaWait, settlements === 1 ? 'a settlement' : `a call of ${settlements} settlements`, mark);
      return undefined;
    } catch (error) {
      return error;
    }
  }

  async #send(batch: readonly Pending[]): Promise<void> {
    const k = this.#keys;
    const keys = [k.stream, k.delayed, k.delayedData, k.leases, this.redisKeys.queues, this.redisKeys.seq];
    const errorKeyIndex = new Map<string, number>();
    const args: (string | number)[] = [GROUP, this.consumer, SETTLED_RECORD_MS];
    for (const { op } of batch) {
      keys.push(this.redisKeys.settlement(this.queue, op.entryId, op.count));
      const record = keys.length;
      switch (op.kind) {
        case 'a':
          args.push('a', op.entryId, op.count, record, '', '', '');
          break;
        case 'r':
          args.push('r', op.entryId, op.count, record, Math.max(0, Math.ceil(op.delayMs)), op.headers, '');
          break;
        case 'd': {
          let index = errorKeyIndex.get(op.errorQueue);
          if (index === undefined) {
            keys.push(this.redisKeys.stream(op.errorQueue));
            index = keys.length;
            errorKeyIndex.set(op.errorQueue, index);
          }
          args.push('d', op.entryId, op.count, record, index, op.headers, op.errorQueue);
          break;
        }
        case 'l':
          args.push('l', op.entryId, op.count, record, op.inherit, '', '');
          break;
      }
    }
    try {
      const acksOnly = batch.every((p) => p.op.kind === 'a');
      // Only a call that wrote a copy waits, and only when replicas are asked for.
      const waits = !acksOnly && this.replicaWait.replicas > 0;
      const mark = waits ? replicaMark(this.scripts.client, this.#keys.stream, this.replicaWait) : undefined;
      const reply = (await this.scripts.run(acksOnly ? SETTLE_ACKS : SETTLE, keys, args)) as unknown[];
      const behind = waits ? await this.#waitForReplicas(batch.length, mark) : undefined;
      batch.forEach((p, i) => {
        const result = reply[i];
        if (behind !== undefined && p.op.kind !== 'a') p.reject(behind);
        else p.resolve(result === 1 || result === 0 ? result : String(result));
      });
    } catch (error) {
      for (const p of batch) p.reject(error);
    }
  }
}
