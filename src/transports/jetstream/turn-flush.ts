/**
 * Confirms what this connection published in one turn of the event loop
 * with a single round trip: the settlements of a turn (`+ACK`, `-NAK`,
 * `+WPI`) are published without a reply each, and one `flush` (a PING the
 * server answers after everything sent before it) confirms they reached the
 * server. Asking the server to answer every ack on its own halves the rate a
 * consumer can settle at; a settlement lost after the flush can only bring
 * its message back once more, never lose it.
 */
import type { NatsConnection } from '@nats-io/transport-node';
import type { Clock } from '../../time/clock.js';

/** The server did not answer a flush in time: what was published may or may not have reached it. */
export class FlushTimeoutError extends Error {
  override readonly name = 'FlushTimeoutError';
  constructor(readonly timeoutMs: number) {
    super(`jetstream: the server did not confirm a settlement within ${timeoutMs} ms (connection down?); it may not have reached the server`);
  }
}

/** The settlement payloads, encoded once rather than at every publish. */
const SETTLEMENTS: ReadonlyMap<string, Uint8Array> = new Map(['+ACK', '-NAK', '+WPI'].map((payload) => [payload, new TextEncoder().encode(payload)]));

/** Why a flush's timeout is called off: given, so that calling it off builds no `DOMException`. */
const ANSWERED = 'answered';

export class TurnFlush {
  #pending: Promise<void> | undefined;

  constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
    private readonly clock: Clock,
  ) {}

  /** Publishes `payload` to `subject` and resolves once a flush sent after it is answered. */
  publish(subject: string, payload: string): Promise<void> {
    try {
      this.nc.publish(subject, SETTLEMENTS.get(payload) ?? payload);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.#afterThisTurn();
  }

  #afterThisTurn(): Promise<void> {
    this.#pending ??= new Promise<void>((resolve, reject) => {
      queueMicrotask(() => {
        this.#pending = undefined;
        const timer = new AbortController();
        this.clock.sleep(this.timeoutMs, timer.signal).then(
          () => reject(new FlushTimeoutError(this.timeoutMs)),
          () => undefined,
        );
        this.nc.flush().then(
          () => {
            timer.abort(ANSWERED);
            resolve();
          },
          (error: unknown) => {
            timer.abort(ANSWERED);
            reject(error);
          },
        );
      });
    });
    return this.#pending;
  }
}
