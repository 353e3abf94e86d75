import { randomUUID } from 'node:crypto';
import type { StandardSchemaV1 } from '@standard-schema/spec';
import { connectionBackoff } from '../backoff/connection.js';
import type { Backoff } from '../backoff/types.js';
import { jsonCodec, type Codec } from '../codec.js';
import { DEFAULTS } from '../defaults.js';
import { duration, fn, nonEmpty, wholeNumber } from '../util/option-checks.js';
import { sendDueAt, withDelay } from './delay.js';
import { TypedEmitter } from '../events.js';
import { summarizeError } from '../headers/failure.js';
import { HEADER } from '../headers/names.js';
import { expiresAtMs } from '../policy/deadline.js';
import { silentLogger, type Logger } from '../logger.js';
import { check, standardSchema, ValidationError, type Checked } from '../schema/validate.js';
import { systemClock, type Clock } from '../time/clock.js';
import { Deadlines } from '../time/deadlines.js';
import { systemRandom, type Random } from '../time/random.js';
import type { Headers, Transport } from '../transport/types.js';
import { SendFailedError, type SendAttempt } from './errors.js';
import { classifyByBrand, SendTimeoutError, type SendErrorKind } from '../transport/send-errors.js';

/** How sends are retried. */
export interface ProducerRetryOptions {
  /** Attempts in all when sends fail transiently, the first included; retried at once. Default 3 (RocketMQ's 2 retries). */
  maxAttempts?: number;
  /**
   * The wait between throttled attempts, and between attempts that found
   * the broker unavailable (RocketMQ's ConnectWithBackoff). Default
   * `connectionBackoff()`: 1 s, then ×1.6 with ±20 % jitter, at most 120 s
   * (RocketMQ).
   */
  throttleBackoff?: Backoff;
  /** The least time one attempt is given before it counts as failed (RocketMQ MIN_CONNECT_TIMEOUT). Default 20 000 ms. */
  minAttemptTimeoutMs?: number;
  /** The most time one send may take, retries and waits included: the longest an awaited `send` blocks. Default 60 000 ms. */
  timeoutMs?: number;
}

/** Options of a {@link Producer}. */
export interface ProducerOptions<T> {
  /** The broker or store. Required. */
  transport: Transport;
  /** Body codec. Default UTF-8 JSON. */
  codec?: Codec<T>;
  /**
   * Validates each body before it is sent: any Standard Schema (zod,
   * valibot, arktype...), whose input type becomes the type of `send`'s
   * body. A body it refuses is not sent: `send` rejects with a
   * {@link ValidationError} listing each issue's path and message. The body
   * goes out as given, for the consuming endpoint's schema to parse.
   * Default none: bodies are sent unchecked.
   */
  schema?: StandardSchemaV1<T, unknown>;
  /** Makes message ids. Default random UUIDs. */
  newId?: () => string;
  /** Retry settings. */
  retry?: ProducerRetryOptions;
  /** Source of time. Default the system clock. */
  clock?: Clock;
  /** Source of randomness for jitter. Default `Math.random`. */
  random?: Random;
  /** A pino-compatible logger. Default none: silent. */
  logger?: Logger;
}

/** Options of one send. */
export interface SendOptions {
  /** The message id, kept across retries. Default a new id. */
  id?: string;
  /** Application headers. Names starting with `redeliver-` are reserved. */
  headers?: Headers;
  /**
   * Hold the message at least this many milliseconds, counted from the
   * call, before any consumer can receive it: the transport holds it as it
   * holds a delayed retry. From 0 to the transport's `limits.maxDelayMs`.
   * Not with `deliverAt`. Default 0: deliverable at once.
   */
  delayMs?: number;
  /**
   * Hold the message until this time, by the producer's clock: the same
   * as a `delayMs` of the time left. A time already past sends at once. Not
   * with `delayMs`. Default none.
   */
  deliverAt?: Date;
  /**
   * The message's deadline (a Date, or milliseconds since the Unix epoch):
   * an endpoint never handles it at or after this time, and schedules no
   * retry to come back then; it moves it to the error queue with reason
   * `expired` (or discards it, per `recoverability.onExpired`). Carried in
   * the `redeliver-expires-at` header. An invalid Date or number is refused
   * before anything is sent. Default none.
   */
  expiresAt?: Date | number;
}

/** The events a producer emits, each with one arguments object. */
export interface ProducerEvents {
  /** A send reached the broker. */
  sent: { queue: string; messageId: string; attempts: number; durationMs: number };
  /** An attempt failed and another follows after `delayMs` (0 for transient errors; the backoff for throttled and unavailable). */
  sendRetry: { queue: string; messageId: string; attempt: number; kind: SendErrorKind; error: unknown; delayMs: number };
  /** A send failed for good. */
  sendFailed: { queue: string; messageId: string; error: SendFailedError };
}

/** Counters a producer keeps. */
export interface ProducerStats {
  sent: number;
  retries: number;
  /** Attempts the broker throttled. */
  throttled: number;
  /** Attempts that found the broker unavailable (refused, closed, restarting). */
  unavailable: number;
  failed: number;
}

/**
 * Sends messages with a stable id, retrying as the broker's answer calls
 * for: transient errors at once, throttling and an unavailable broker with
 * jittered backoff (until the send's `timeoutMs`), fatal errors not at
 * all. A retried send keeps its id and carries
 * `redeliver-possible-duplicate` when an earlier attempt may have reached
 * the broker.
 */
export class Producer<T = unknown> extends TypedEmitter<ProducerEvents> {
  readonly #transport: Transport;
  readonly #codec: Codec<T>;
  readonly #schema: StandardSchemaV1<T, unknown> | undefined;
  readonly #newId: () => string;
  readonly #maxAttempts: number;
  readonly #throttleBackoff: Backoff;
  readonly #minAttemptTimeoutMs: number;
  readonly #timeoutMs: number;
  readonly #clock: Clock;
  readonly #random: Random;
  readonly #logger: Logger;
  readonly #stats: ProducerStats = { sent: 0, retries: 0, throttled: 0, unavailable: 0, failed: 0 };
  readonly #deadlines: Deadlines;

  constructor(options: ProducerOptions<T>) {
    super((error) => this.#logger.error({ err: error }, 'redeliver: a producer event listener threw'));
    const retry = options.retry ?? {};
    this.#transport = options.transport;
    this.#codec = (options.codec ?? jsonCodec) as Codec<T>;
    this.#schema = options.schema === undefined ? undefined : standardSchema('schema', options.schema);
    this.#newId = options.newId === undefined ? randomUUID : fn('newId', options.newId);
    this.#maxAttempts = wholeNumber('retry.maxAttempts', retry.maxAttempts ?? DEFAULTS.sendMaxAttempts, 1, 1_000);
    this.#throttleBackoff = retry.throttleBackoff === undefined ? connectionBackoff() : fn('retry.throttleBackoff', retry.throttleBackoff);
    this.#minAttemptTimeoutMs = duration('retry.minAttemptTimeoutMs', retry.minAttemptTimeoutMs ?? DEFAULTS.connectionBackoff.minConnectTimeoutMs, 1);
    this.#timeoutMs = duration('retry.timeoutMs', retry.timeoutMs ?? DEFAULTS.sendTimeoutMs, 1);
    this.#clock = options.clock ?? systemClock;
    this.#deadlines = new Deadlines(this.#clock);
    this.#random = options.random ?? systemRandom;
    this.#logger = options.logger ?? silentLogger;
  }

  get stats(): ProducerStats {
    return { ...this.#stats };
  }

  /**
   * Sends `body` to `queue` and waits until the broker has it, retrying as
   * needed; resolves with the message id, or rejects with a
   * {@link SendFailedError} that lists every attempt. With a `schema`, a
   * body it refuses rejects with a {@link ValidationError}, and one whose
   * validator throws with that error; nothing is sent.
   */
  async send(queue: string, body: T, options: SendOptions = {}): Promise<string> {
    nonEmpty('queue', queue);
    const headers = outgoingHeaders(options);
    const dueAt = sendDueAt(options, this.#transport, this.#clock);
    if (this.#schema) refuseInvalid(await check(this.#schema, body));
    const id = options.id ?? this.#newId();
    const payload = this.#codec.encode(body);
    await this.#sendWithRetry(queue, id, payload, headers, dueAt);
    return id;
  }

  /**
   * Sends without waiting: returns the message id at once; the outcome
   * arrives as a `sent` or `sendFailed` event, and to `callback` if given.
   * With a `schema` that answers at once, a body it refuses throws a
   * {@link ValidationError} here. With one that answers with a promise, the
   * send waits for it, and a refusal goes to `callback` (and the log) as a
   * {@link ValidationError}; a validator that rejects is reported the same
   * way, as a single issue whose `cause` is its error. Nothing is sent.
   */
  sendInBackground(queue: string, body: T, options: SendOptions = {}, callback?: (error: SendFailedError | ValidationError | undefined, id: string) => void): string {
    nonEmpty('queue', queue);
    const headers = outgoingHeaders(options);
    const dueAt = sendDueAt(options, this.#transport, this.#clock);
    const id = options.id ?? this.#newId();
    const checked = this.#schema ? check(this.#schema, body) : undefined;
    if (checked && !(checked instanceof Promise)) refuseInvalid(checked);
    const payload = this.#codec.encode(body);
    const send = () =>
      this.#sendWithRetry(queue, id, payload, headers, dueAt).then(
        () => callback?.(undefined, id),
        (error: SendFailedError) => callback?.(error, id),
      );
    if (!(checked instanceof Promise)) {
      void send();
      return id;
    }
    checked.then(refuseInvalid).then(send, (error: unknown) => {
      const refusal = error instanceof ValidationError ? error : validatorFailure(error);
      this.#logger.error({ queue, messageId: id, err: refusal }, `Message '${id}' to '${queue}' was not sent: ${refusal.message}`);
      callback?.(refusal, id);
    });
    return id;
  }

  /**
   * The first attempt, and the retries only if it fails: nearly every send
   * succeeds at once, and the retry loop's state (attempt history,
   * counters, backoff deadlines) is then never built.
   */
  async #sendWithRetry(queue: string, id: string, body: Uint8Array, headers: Headers, dueAt: number | undefined): Promise<void> {
    const start = this.#clock.monotonic();
    // RocketMQ's ConnectWithBackoff: each attempt gets until its deadline, but at least the minimum attempt time.
    const deadline = start + this.#throttleDelay(1);
    const timeout = Math.min(Math.max(deadline - start, this.#minAttemptTimeoutMs), this.#timeoutMs);
    try {
      await this.#attempt(queue, { id, body, headers }, timeout, dueAt);
    } catch (error) {
      await this.#retry(queue, id, body, headers, dueAt, start, deadline, error);
      return;
    }
    this.#sent(queue, id, 1, start);
  }

  /** Attempts 2 and on, after the first failed with `firstError`. */
  async #retry(queue: string, id: string, body: Uint8Array, headers: Headers, dueAt: number | undefined, start: number, firstDeadline: number, firstError: unknown): Promise<void> {
    const clock = this.#clock;
    const giveUpAt = start + this.#timeoutMs;
    const attempts: SendAttempt[] = [];
    let transientFailures = 0;
    // Throttled and unavailable attempts share one backoff: RocketMQ's ConnectWithBackoff.
    let backedOff = 0;
    let possibleDuplicate = false;
    let deadline = firstDeadline;
    let error = firstError;
    for (let attempt = 1; ; attempt++) {
      if (attempt > 1) {
        const now = clock.monotonic();
        const attemptTimeout = Math.min(Math.max(deadline - now, this.#minAttemptTimeoutMs), giveUpAt - now);
        const sendHeaders = possibleDuplicate ? { ...headers, [HEADER.possibleDuplicate]: 'true' } : headers;
        try {
          await this.#attempt(queue, { id, body, headers: sendHeaders }, attemptTimeout, dueAt);
          this.#sent(queue, id, attempt, start);
          return;
        } catch (failure) {
          error = failure;
        }
      }
      const kind: SendErrorKind = error instanceof SendTimeoutError ? 'transient' : this.#classify(error);
      attempts.push({ attempt, kind, error, atMs: clock.monotonic() - start });
      if (kind === 'fatal') throw this.#fail(queue, id, attempts, 'fatal');
      if (kind === 'transient') {
        possibleDuplicate = true;
        transientFailures++;
        if (transientFailures >= this.#maxAttempts) throw this.#fail(queue, id, attempts, 'attempts-exhausted');
        if (clock.monotonic() >= giveUpAt) throw this.#fail(queue, id, attempts, 'timeout');
        this.#retrying(queue, id, attempt, kind, error, 0, 'info');
        continue;
      }
      // A connection lost mid-send may have delivered the message; a throttled one was refused.
      if (kind === 'unavailable') possibleDuplicate = true;
      backedOff++;
      this.#stats[kind]++;
      const wait = Math.max(0, deadline - clock.monotonic());
      if (clock.monotonic() + wait >= giveUpAt) throw this.#fail(queue, id, attempts, 'timeout');
      this.#retrying(queue, id, attempt, kind, error, wait, 'warn');
      if (wait > 0) await clock.sleep(wait);
      deadline = clock.monotonic() + this.#throttleDelay(backedOff + 1);
    }
  }

  #sent(queue: string, messageId: string, attempts: number, start: number): void {
    this.#stats.sent++;
    if (this.has('sent')) this.emit('sent', { queue, messageId, attempts, durationMs: this.#clock.monotonic() - start });
  }

  /**
   * One attempt, bounded by `timeoutMs`. A transport that bounds its own
   * sends within that time (`transport.sendTimeoutMs`, such as RabbitMQ's
   * confirm timeout) needs nothing more. Otherwise the bound is an entry in
   * the producer's shared {@link Deadlines}, not a timer per attempt: at tens
   * of thousands of sends per second a timer, an AbortController and its
   * abort cost more than the send itself (see the `producer` benchmark).
   * A delayed send carries the delay left until `dueAt` (monotonic), so a
   * retried attempt is due when the first one would have been.
   */
  #attempt(queue: string, message: { id: string; body: Uint8Array; headers: Headers }, timeoutMs: number, dueAt: number | undefined): Promise<void> {
    let sending: Promise<void>;
    try {
      sending = this.#transport.send(queue, dueAt === undefined ? message : withDelay(message, dueAt - this.#clock.monotonic()));
    } catch (error) {
      return Promise.reject(error);
    }
    const ms = Math.max(0, timeoutMs);
    const bound = this.#transport.sendTimeoutMs;
    if (bound !== undefined && bound <= ms) return sending;
    return this.#deadlines.race(sending, ms, () => new SendTimeoutError(`no answer from the broker within ${Math.round(ms)} ms`));
  }

  #throttleDelay(attempt: number): number {
    return Math.max(0, this.#throttleBackoff({ attempt, previousDelayMs: undefined, elapsedMs: 0, random: this.#random }) ?? 0);
  }

  #classify(error: unknown): SendErrorKind {
    try {
      return this.#transport.classifySendError?.(error) ?? classifyByBrand(error);
    } catch {
      return classifyByBrand(error);
    }
  }

  #retrying(queue: string, messageId: string, attempt: number, kind: SendErrorKind, error: unknown, delayMs: number, level: 'info' | 'warn'): void {
    this.#stats.retries++;
    const message =
      kind === 'throttled'
        ? `Send of message '${messageId}' to '${queue}' was throttled; retrying in ${Math.round(delayMs)} ms`
        : kind === 'unavailable'
          ? `Send of message '${messageId}' to '${queue}' found the broker unavailable; retrying in ${Math.round(delayMs)} ms`
          : `Send of message '${messageId}' to '${queue}' failed; retrying at once`;
    this.#logger[level]({ queue, messageId, attempt, kind, delayMs, err: error }, message);
    this.emit('sendRetry', { queue, messageId, attempt, kind, error, delayMs });
  }

  #fail(queue: string, messageId: string, attempts: SendAttempt[], reason: SendFailedError['reason']): SendFailedError {
    const error = new SendFailedError(queue, messageId, attempts, reason);
    this.#stats.failed++;
    this.#logger.error({ queue, messageId, attempts: attempts.length, reason, err: error }, error.message);
    this.emit('sendFailed', { queue, messageId, error });
    return error;
  }
}

/** The headers of a send: the application's, then the deadline's when `expiresAt` is set (validated first, so a bad one sends nothing). */
function outgoingHeaders(options: SendOptions): Headers {
  const headers: Headers = { ...options.headers };
  if (options.expiresAt !== undefined) headers[HEADER.expiresAt] = String(expiresAtMs(options.expiresAt));
  return headers;
}

/** Throws the {@link ValidationError} of a refused body. */
function refuseInvalid(checked: Checked<unknown>): void {
  if (checked.issues) throw new ValidationError(checked.issues);
}

/** A validator that rejected, as a refusal of the body: one issue naming its error, which is the `cause`. */
function validatorFailure(error: unknown): ValidationError {
  const summary = summarizeError(error);
  return new ValidationError([{ path: [], message: `the validator failed: ${summary.name}: ${summary.message}` }], { cause: error });
}
