/**
 * Moves a queue's delayed retries back to the queue when they are due.
 * Each retry is a message in the delay stream, stamped by the server when
 * stored, with its delay in a header. The mover reads the queue's retries
 * as they arrive:
 * - one due in more than {@link HOLD_WITHIN_MS} goes back to the server
 *   (`nak` with a delay) to be offered again half that time before it is
 *   due: the server holds the long wait;
 * - one due sooner is held here, unacked, for the little time it has left:
 *   nats-server 2.9 puts off every pending redelivery of a consumer by
 *   10 ms each time it gets a `nak` with a delay, so at hundreds of retries
 *   a second the server alone would hand due retries back hundreds of
 *   milliseconds late. A held retry that this process never moves (it
 *   died) comes back after the delay consumer's `ack_wait`: late, not lost;
 * - a due one is published to the queue, with a `Nats-Msg-Id` the queue's
 *   stream deduplicates, and only then acked. A retry whose ack was lost is
 *   moved again when it comes back; its second copy is dropped only within
 *   the queue's duplicate window (see docs/jetstream.md), else stored: a
 *   duplicate, never a loss.
 */
import { setMaxListeners } from 'node:events';
import { headers as natsHeaders, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../../logger.js';
import type { Clock } from '../../time/clock.js';
import { parseAckSubject } from './ack-subject.js';
import { DELAY_HEADER, ID_HEADER } from './codec.js';
import type { QueueNames } from './names.js';
import { logStored } from './publish-log.js';
import { Puller } from './puller.js';
import type { ServerClock } from './server-clock.js';
import { DELAY_ACK_WAIT_MS } from './topology.js';

/** Retries a mover reads ahead: each is settled at once, so this bounds only the work in flight. */
export const MOVER_BATCH = 64;
/** Retries due within this many ms are held by the mover until due; later ones are held by the server. */
export const HOLD_WITHIN_MS = 5_000;
/** How long a retry that could not be moved (its queue is full, the server refused) waits before the next try. */
export const MOVE_RETRY_MS = 1_000;
const NS_PER_MS = 1_000_000;

export interface MoverOptions {
  readonly nc: NatsConnection;
  readonly jsm: JetStreamManager;
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
  /** Sends an ack and resolves once the server has it. */
  readonly confirm: (reply: string, payload: string) => Promise<void>;
}

export class DelayMover {
  readonly #o: MoverOptions;
  readonly #puller: Puller;
  #working = 0;
  #holding = 0;
  #closed = false;
  readonly #closing = new AbortController();
  readonly #idle = new Set<Promise<void>>();

  constructor(options: MoverOptions) {
    this.#o = options;
    // Every held retry waits on this signal.
    setMaxListeners(0, this.#closing.signal);
    this.#puller = new Puller({
      nc: options.nc,
      jsm: options.jsm,
      stream: options.delayStream,
      consumer: options.names.delayConsumer,
      expiresMs: options.pullExpiresMs,
      heartbeatMs: options.heartbeatMs,
      ackWaitMs: DELAY_ACK_WAIT_MS,
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
    this.#closing.abort();
    this.#puller.close();
    await Promise.all([...this.#idle]);
  }

  #topUp(): void {
    if (this.#closed) return;
    const want = MOVER_BATCH - this.#puller.outstanding - (this.#working - this.#holding);
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
    const id = msg.headers?.get(ID_HEADER) || `${info.stream}:${info.streamSeq}`;
    const now = await this.#serverNow(id);
    if (now === undefined) {
      this.#nak(msg, MOVE_RETRY_MS);
      return;
    }
    const left = due - now;
    if (left > HOLD_WITHIN_MS) {
      this.#nak(msg, left - HOLD_WITHIN_MS / 2);
      return;
    }
    if (left > 0 && !(await this.#hold(left))) {
      this.#nak(msg, Math.max(1, due - ((await this.#serverNow(id)) ?? now)));
      return;
    }
    const msgID = `${id}|m|${info.streamSeq}`;
    try {
      logStored(this.#o.logger, await this.#o.js.publish(this.#o.names.subject, msg.data, { headers: copyHeaders(msg), msgID, timeout: this.#o.apiTimeoutMs }), msgID);
    } catch (error) {
      this.#o.logger?.warn(
        { queue: this.#o.names.queue, messageId: id, error: String(error) },
        `jetstream: could not move delayed retry of message '${id}' back to ${this.#o.names.queue} (${String(error)}); trying again in ${MOVE_RETRY_MS} ms`,
      );
      this.#nak(msg, MOVE_RETRY_MS);
      return;
    }
    try {
      await this.#o.confirm(msg.reply!, '+ACK');
    } catch (error) {
      // The copy is in the queue; the retry comes back after its ack_wait and its second copy is deduplicated by id within the duplicate window.
      this.#o.logger?.info({ queue: this.#o.names.queue, messageId: id, error: String(error) }, `jetstream: moved retry of message '${id}' was not acked (${String(error)}); the queue drops the copy made when it comes back within its duplicate window`);
    }
  }

  /** The server's time, or undefined (logged) while its clock was never read (`ServerClockUnreadError`): a retry is then not moved, rather than moved early. */
  async #serverNow(id: string): Promise<number | undefined> {
    try {
      return await this.#o.serverClock.now();
    } catch (error) {
      this.#o.logger?.warn(
        { queue: this.#o.names.queue, messageId: id, error: String(error) },
        `jetstream: delayed retry of message '${id}' on ${this.#o.names.queue} waits (${String(error)}); trying again in ${MOVE_RETRY_MS} ms`,
      );
      return undefined;
    }
  }

  /** Waits `ms` without counting against the read-ahead; resolves false when the mover closed meanwhile. */
  async #hold(ms: number): Promise<boolean> {
    this.#holding += 1;
    this.#topUp();
    try {
      await this.#o.clock.sleep(Math.ceil(ms), this.#closing.signal);
      return true;
    } catch {
      return false;
    } finally {
      this.#holding -= 1;
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
