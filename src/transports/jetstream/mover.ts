/**
 * Moves a queue's delayed retries back to the queue when they are due.
 * Each retry is a message in the delay stream, stamped by the server when
 * stored, with its delay in a header. The mover reads the queue's retries
 * as they arrive: one not yet due goes back to the server with the time it
 * has left (`nak` with a delay, so the server holds it and offers it again
 * when due); a due one is published to the queue, with a `Nats-Msg-Id` the
 * queue's stream deduplicates, and only then acked.
 */
import { headers as natsHeaders, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient } from '@nats-io/jetstream';
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import { parseAckSubject } from './ack-subject.js';
import { DELAY_HEADER, ID_HEADER } from './codec.js';
import type { QueueNames } from './names.js';
import { Puller } from './puller.js';
import type { ServerClock } from './server-clock.js';

/** Retries a mover reads ahead: each is settled at once, so this bounds only the work in flight. */
export const MOVER_BATCH = 64;
/** How long a retry that could not be moved (its queue is full, the server refused) waits before the next try. */
export const MOVE_RETRY_MS = 1_000;
const NS_PER_MS = 1_000_000;

export interface MoverOptions {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly names: QueueNames;
  readonly delayStream: string;
  readonly serverClock: ServerClock;
  readonly apiTimeoutMs: number;
  readonly pullExpiresMs: number;
  readonly heartbeatMs: number;
  readonly clock: Clock;
  readonly logger: Logger | undefined;
  /** The delay consumer is gone: the owner makes it again and starts a new mover. */
  readonly onGone: (reason: string) => void;
}

export class DelayMover {
  readonly #o: MoverOptions;
  readonly #puller: Puller;
  #working = 0;
  #closed = false;
  readonly #idle = new Set<Promise<void>>();

  constructor(options: MoverOptions) {
    this.#o = options;
    this.#puller = new Puller({
      nc: options.nc,
      stream: options.delayStream,
      consumer: options.names.delayConsumer,
      expiresMs: options.pullExpiresMs,
      heartbeatMs: options.heartbeatMs,
      clock: options.clock,
      logger: options.logger,
      owner: {
        onMessage: (msg) => this.#take(msg),
        onRoom: () => this.#topUp(),
        onGone: (reason) => options.onGone(reason),
      },
    });
    this.#topUp();
  }

  /** Pull requests were lost with the connection: ask again. */
  reconnected(): void {
    this.#puller.forget();
    this.#topUp();
  }

  /** Stops reading; waits for the moves under way. Retries it holds come back to another mover after their `ack_wait`. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#puller.close();
    await Promise.all([...this.#idle]);
  }

  #topUp(): void {
    if (this.#closed) return;
    const want = MOVER_BATCH - this.#puller.outstanding - this.#working;
    if (want >= MOVER_BATCH / 2 || (want > 0 && this.#puller.outstanding === 0)) this.#puller.request(want);
  }

  #take(msg: Msg): void {
    this.#working += 1;
    const done = this.#handle(msg).finally(() => {
      this.#working -= 1;
      this.#idle.delete(done);
      this.#topUp();
    });
    this.#idle.add(done);
  }

  async #handle(msg: Msg): Promise<void> {
    const info = parseAckSubject(msg.reply);
    if (info === undefined) return;
    const delayMs = Number(msg.headers?.get(DELAY_HEADER) ?? 0);
    const due = info.storedAtMs + (Number.isFinite(delayMs) && delayMs > 0 ? delayMs : 0);
    const left = due - (await this.#o.serverClock.now());
    if (left > 0) {
      this.#nak(msg, left);
      return;
    }
    const id = msg.headers?.get(ID_HEADER) || `${info.stream}:${info.streamSeq}`;
    try {
      await this.#o.js.publish(this.#o.names.subject, msg.data, { headers: copyHeaders(msg), msgID: `${id}|m|${info.streamSeq}`, timeout: this.#o.apiTimeoutMs });
    } catch (error) {
      this.#o.logger?.warn(
        { queue: this.#o.names.queue, messageId: id, error: String(error) },
        `jetstream: could not move delayed retry of message '${id}' back to ${this.#o.names.queue} (${String(error)}); trying again in ${MOVE_RETRY_MS} ms`,
      );
      this.#nak(msg, MOVE_RETRY_MS);
      return;
    }
    try {
      await this.#o.nc.request(msg.reply!, '+ACK', { timeout: this.#o.apiTimeoutMs });
    } catch (error) {
      // The copy is in the queue; the retry comes back after its ack_wait and its second copy is deduplicated by id.
      this.#o.logger?.info({ queue: this.#o.names.queue, messageId: id, error: String(error) }, `jetstream: moved retry of message '${id}' was not acked (${String(error)}); the queue drops the copy made when it comes back`);
    }
  }

  #nak(msg: Msg, delayMs: number): void {
    try {
      msg.respond(`-NAK ${JSON.stringify({ delay: Math.ceil(delayMs) * NS_PER_MS })}`);
    } catch (error) {
      this.#o.logger?.debug?.({ error: String(error) }, `jetstream: could not hand a delayed retry back to the server: ${String(error)}`);
    }
  }
}

/** The retry's headers for its copy in the queue: all but the delay and the server's own. */
function copyHeaders(msg: Msg) {
  const out = natsHeaders();
  const hdrs = msg.headers;
  if (hdrs === undefined) return out;
  for (const name of hdrs.keys()) {
    if (name === DELAY_HEADER || /^nats-/i.test(name)) continue;
    out.set(name, hdrs.get(name));
  }
  return out;
}
