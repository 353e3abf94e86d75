/**
 * Design (b): a failed delivery is copied, with its new retry state in its
 * headers, into a delay stream, and the original is acked once the copy is
 * stored. A mover reads the delay stream: a copy not yet due is `nak`ed
 * with the time left, so the server holds it; a due one is published to
 * the work stream (with a `Nats-Msg-Id`, so a second move is dropped) and
 * then acked. The time a copy is due is its stream timestamp plus its
 * delay; this benchmark runs on the server's machine and reads the local
 * clock for "now".
 *
 * With `holdWithinMs`, a copy due within that horizon is not `nak`ed: the
 * mover keeps it (its `ack_wait` is far longer) and moves it when due on a
 * timer of its own; a copy due later is `nak`ed to come back half the
 * horizon before it is due. The server then times only coarse returns:
 * on 2.9 every delayed `nak` pushes the consumer's redelivery check 10 ms
 * out, so while `nak`s arrive more often than that, due copies wait.
 */
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { RetentionPolicy, StorageType, DiscardPolicy, type JetStreamClient, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { DELAY_HEADER, decodeNatsHeaders, encodeNatsHeaders } from '../../../src/transports/jetstream/codec.js';
import { HEADER } from '../../../src/headers/names.js';
import type { Headers } from '../../../src/transport/types.js';
import { addPullConsumer } from '../server.js';
import { consumeEach, type Reading } from './consume.js';
import { OperationTimes, type CaseNames, type DelayDesign } from './design.js';

const MOVER = 'mover';
/** Messages per pull of the mover. */
const MOVER_PREFETCH = 1_000;

export interface DelayStreamOptions {
  /** Copies due within this many ms are held by the mover instead of `nak`ed. Default 0: every copy not yet due is `nak`ed. */
  readonly holdWithinMs?: number;
}

export class DelayStreamDesign implements DelayDesign {
  readonly costs = new OperationTimes();
  /** How many times copies were `nak`ed because they were not yet due. */
  holds = 0;
  /** How many copies the mover kept on a timer of its own until due. */
  timed = 0;
  readonly #holdWithinMs: number;
  /** Ends the timers of held copies when the design stops: the copies stay in the delay stream. */
  readonly #stopping = new AbortController();
  readonly #delayStream: string;
  readonly #delaySubject: string;
  #mover: Reading | undefined;

  constructor(
    private readonly js: JetStreamClient,
    private readonly jsm: JetStreamManager,
    private readonly names: CaseNames,
    options: DelayStreamOptions = {},
  ) {
    this.#holdWithinMs = options.holdWithinMs ?? 0;
    // One listener per held copy.
    setMaxListeners(0, this.#stopping.signal);
    this.#delayStream = `${names.streamPrefix}_DELAYS`;
    this.#delaySubject = `${names.subjectPrefix}.delays`;
  }

  async start(): Promise<void> {
    await this.jsm.streams.add({
      name: this.#delayStream,
      subjects: [this.#delaySubject],
      retention: RetentionPolicy.Workqueue,
      discard: DiscardPolicy.New,
      storage: StorageType.File,
      num_replicas: 1,
      duplicate_window: nanos(120_000),
    });
    await addPullConsumer(this.jsm, this.#delayStream, MOVER, -1);
    this.#mover = await consumeEach(this.js, this.#delayStream, MOVER, MOVER_PREFETCH, (copy) => this.#move(copy));
  }

  /** Stores the copy with the retry state and its delay, then acks the original with the server's confirmation. */
  async retryLater(message: JsMsg, id: string, delayMs: number, headers: Headers): Promise<void> {
    await this.costs.time('copy: publish + ack', async () => {
      await this.js.publish(this.#delaySubject, message.data, {
        msgID: `${id}|r|${message.seq}`,
        headers: encodeNatsHeaders(id, headers, { [DELAY_HEADER]: String(delayMs) }),
      });
      await message.ackAck();
    });
  }

  /** The state is in the delivery's own headers. */
  async retryState(message: JsMsg): Promise<Headers | undefined> {
    const { headers } = decodeNatsHeaders(message.headers);
    return headers[HEADER.attempts] === undefined ? undefined : headers;
  }

  async stop(): Promise<void> {
    this.#stopping.abort();
    await this.#mover?.stop();
  }

  async #move(copy: JsMsg): Promise<void> {
    const { id, headers, delayMs } = decodeNatsHeaders(copy.headers);
    if (id === undefined || delayMs === undefined) throw new Error(`delay copy ${copy.seq} lacks its id or delay`);
    const dueAt = copy.info.timestampNanos / 1e6 + delayMs;
    const left = dueAt - Date.now();
    if (left > this.#holdWithinMs) {
      this.holds++;
      // Whole milliseconds: the server ignores a delay that is not a whole number of nanoseconds and redelivers at once.
      copy.nak(Math.ceil(left - this.#holdWithinMs / 2));
      return;
    }
    if (left > 0) {
      this.timed++;
      const due = await sleep(Math.ceil(left), undefined, { signal: this.#stopping.signal }).then(
        () => true,
        () => false,
      );
      if (!due) return;
    }
    await this.costs.time('move: publish + ack', async () => {
      await this.js.publish(this.names.workSubject, copy.data, { msgID: `${id}|m|${copy.seq}`, headers: encodeNatsHeaders(id, headers) });
      await copy.ackAck();
    });
  }
}
