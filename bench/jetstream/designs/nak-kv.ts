/**
 * Design (a): the failed delivery stays where it is and is `nak`ed with
 * the delay, so the server redelivers it when due; the retry state, which
 * a `nak` cannot write into the message, goes to a key-value bucket keyed
 * by message id and is read back when the delivery count says it is a
 * redelivery.
 *
 * The bucket is laid out as the NATS key-value client lays one out (one
 * stream, one message per key, entries expiring after a TTL, read with a
 * direct get) and used with the same two calls: a put is a publish
 * confirmed by the server, a get a direct get of the key's last message.
 */
import { DiscardPolicy, StorageType, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import type { Headers } from '../../../src/transport/types.js';
import { OperationTimes, type CaseNames, type DelayDesign } from './design.js';

/** How long an entry of the bucket lives: longer than any delay of the benchmark. */
const ENTRY_TTL_MS = 10 * 60_000;

export class NakKvDesign implements DelayDesign {
  readonly costs = new OperationTimes();
  readonly #bucketStream: string;
  readonly #keyPrefix: string;

  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    names: CaseNames,
  ) {
    this.#bucketStream = `${names.streamPrefix}_KV`;
    this.#keyPrefix = `${names.subjectPrefix}.kv`;
  }

  async start(): Promise<void> {
    await this.jsm.streams.add({
      name: this.#bucketStream,
      subjects: [`${this.#keyPrefix}.>`],
      max_msgs_per_subject: 1,
      max_age: nanos(ENTRY_TTL_MS),
      discard: DiscardPolicy.New,
      storage: StorageType.File,
      num_replicas: 1,
      allow_rollup_hdrs: true,
      deny_delete: true,
      allow_direct: true,
      duplicate_window: nanos(120_000),
    });
  }

  /** Puts the retry state under the message id, then `nak`s the delivery with the delay. */
  async retryLater(message: JsMsg, id: string, delayMs: number, headers: Headers): Promise<void> {
    await this.costs.time('kv put', () => this.js.publish(`${this.#keyPrefix}.${id}`, JSON.stringify(headers)));
    message.nak(delayMs);
  }

  /** A first delivery has no state; a redelivery reads it from the bucket. */
  async retryState(message: JsMsg, id: string): Promise<Headers | undefined> {
    if (message.info.deliveryCount === 1) return undefined;
    const stored = await this.costs.time('kv get', () => this.jsm.direct.getMessage(this.#bucketStream, { last_by_subj: `${this.#keyPrefix}.${id}` }));
    if (stored === null) throw new Error(`no retry state for redelivered message ${id}`);
    return stored.json<Headers>();
  }

  async stop(): Promise<void> {}
}
