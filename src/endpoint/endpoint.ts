import { setMaxListeners } from 'node:events';
import { connectionBackoff } from '../backoff/connection.js';
import { DEFAULTS } from '../defaults.js';
import { summarizeError, deadLetterHeaders } from '../headers/failure.js';
import { fitHeaders, minimalDeadLetterHeaders } from '../headers/fit.js';
import { appendFailure, readRetryState, withRetryState, type FailureRecord, type RetryState } from '../headers/retry-state.js';
import { TypedEmitter } from '../events.js';
import { HEADER } from '../headers/names.js';
import { encodeReplayOutcome } from '../operations/replay-outcome.js';
import { FlowController, type DeferReason, type FlowState } from '../flow/controller.js';
import type { FailureContext } from '../policy/context.js';
import type { Decision } from '../policy/decision.js';
import { nextDelayedRetry } from '../policy/default-policy.js';
import { DeadlineExpiredError, expiredDecision, isPastDeadline, messageDeadline, readDeadlineHeaders } from '../policy/deadline.js';
import { recoverabilityPolicy, type RecoverabilityPolicy } from '../policy/recoverability-policy.js';
import { DeserializationError } from '../policy/errors.js';
import { validateBody, ValidationError } from '../schema/validate.js';
import type { DedupClaim } from '../dedup/types.js';
import { isDeliveryGone } from '../transport/delivery-gone.js';
import { isMessageTooLarge } from '../transport/errors.js';
import type { Delivery, Headers, Subscription, Transport } from '../transport/types.js';
import { Admission } from './admission.js';
import { resolveEndpointConfig, type EndpointConfig } from './config.js';
import type { MessageContext, RequeueOptions } from './context.js';
import type { EndpointEvents, FailureEvent, SettlementOutcome } from './events.js';
import type { EndpointOptions } from './options.js';
import { guardedLogger, UserPartError } from '../policy/guard.js';
import { duration } from '../util/option-checks.js';
import { isInstance, readProperty } from '../util/thrown.js';
import { MAX_TIMER_MS } from '../time/clock.js';
import type { Logger } from '../logger.js';
import type { DefaultPolicySettings } from '../policy/default-policy.js';

/** Counters an endpoint keeps since it started. */
export interface EndpointStats {
  handled: number;
  immediateRetries: number;
  delayedRetries: number;
  requeued: number;
  deferred: number;
  duplicates: number;
  deadLettered: number;
  discarded: number;
  /** Settlement tries that failed (each try counts). */
  settlementFailures: number;
  /** Deliveries the endpoint holds: running, waiting for a slot, or waiting for a copy with their id to finish. */
  inFlight: number;
}

type State = 'idle' | 'running' | 'stopping' | 'stopped';

/** Options of {@link Endpoint.stop}. */
export interface StopOptions {
  /**
   * How long running handlers may take to finish after their `signal`
   * aborts. Deliveries whose handler has not finished by then are released
   * back to their queue (a handler that finishes later cannot settle them),
   * and `stop` resolves. Default 30 000 ms.
   */
  timeoutMs?: number;
}

/**
 * The consume loop: takes messages from a queue, runs the handler, and when
 * it fails asks the recoverability policy what to do: retry at once, retry
 * later (the broker holds the delay), move to the error queue, or discard.
 */
export class Endpoint<T = unknown> extends TypedEmitter<EndpointEvents> {
  readonly config: EndpointConfig<T>;
  readonly #policy: RecoverabilityPolicy;
  /** The retry settings with the user's predicate and backoff guarded: their failures are marked as theirs. */
  readonly #retry: DefaultPolicySettings;
  /** The user's logger, unable to throw. */
  readonly #logger: Logger;
  /** Deliveries whose handler is running, to release if it outlives the stop timeout. */
  readonly #running = new Set<Delivery>();
  /** Every handler run and every hand-back under way, for a graceful stop. */
  readonly #tasks = new Set<Promise<void>>();
  readonly #admission: Admission<Delivery>;
  readonly #settlementBackoff = connectionBackoff();
  readonly #stopping = new AbortController();
  readonly #flow: FlowController;
  /** Outcome records being sent, to name in the log when the stop timeout leaves some behind. */
  #outcomeSends = 0;
  #subscription: Promise<Subscription> | undefined;
  #state: State = 'idle';
  #stopped: Promise<void> | undefined;
  readonly #stats: EndpointStats = {
    handled: 0,
    immediateRetries: 0,
    delayedRetries: 0,
    requeued: 0,
    deferred: 0,
    duplicates: 0,
    deadLettered: 0,
    discarded: 0,
    settlementFailures: 0,
    inFlight: 0,
  };

  constructor(options: EndpointOptions<T>) {
    super((error, event) => this.#logger.error({ err: error, event: String(event) }, 'redeliver: an event listener threw'));
    this.config = resolveEndpointConfig(options);
    // Every settlement waiting to be tried again listens on the stop signal: as many as the concurrency, not a leak.
    setMaxListeners(0, this.#stopping.signal);
    const { config } = this;
    this.#logger = guardedLogger(config.logger);
    this.#admission = new Admission(config.concurrency, (delivery) => this.#launch(delivery));
    this.#policy = recoverabilityPolicy(config, config.random, () => delayPrecision(config.transport));
    this.#retry = this.#policy.settings;
    this.#flow = new FlowController(
      config.flow,
      config.concurrency,
      config.clock,
      config.random,
      this.#logger,
      (event, args) => this.emit(event, args as EndpointEvents[typeof event]),
      (limit) => this.#admission.setLimit(limit),
    );
  }

  /** Consumer backoff, rate limiting and retry budget state. */
  get flowState(): FlowState {
    return this.#flow.state;
  }

  /** A snapshot of the counters. */
  get stats(): EndpointStats {
    return { ...this.#stats, inFlight: this.#admission.held };
  }

  /** Whether the endpoint is consuming. */
  get running(): boolean {
    return this.#state === 'running';
  }

  /**
   * Starts consuming. When `signal` aborts, the endpoint stops as with
   * {@link stop}.
   */
  async start(signal?: AbortSignal): Promise<void> {
    if (this.#state !== 'idle') throw new Error(`endpoint ${this.config.name} was already started`);
    this.#state = 'running';
    const { transport } = this.config;
    const consume = () => transport.consume(this.config.queue, (d) => this.#accept(d), { prefetch: this.config.concurrency, leaseMs: this.config.leaseMs });
    // The error queue first, where the broker needs it declared: it exists before the first failure.
    const preparing = transport.prepareErrorQueue?.(this.config.errorQueue);
    this.#subscription = preparing ? preparing.then(consume) : consume();
    try {
      this.#flow.attach(await this.#subscription);
    } catch (error) {
      this.#state = 'stopped';
      throw error;
    }
    if (signal) {
      if (signal.aborted) await this.stop();
      else signal.addEventListener('abort', () => void this.stop(), { once: true });
    }
  }

  /**
   * Stops taking messages, hands back at once the deliveries waiting for a
   * slot, aborts the handlers' `signal`, lets running handlers finish and
   * settle within `timeoutMs` (then releases the deliveries of those that
   * did not), and leaves every other message in the store. A subscription
   * that cannot be paused or closed is logged and does not stop the stop.
   * Only the first call's options count.
   */
  stop(options: StopOptions = {}): Promise<void> {
    if (!this.#stopped) {
      let timeoutMs: number;
      try {
        timeoutMs = duration('stop timeoutMs', options.timeoutMs ?? DEFAULTS.stopTimeoutMs);
      } catch (error) {
        return Promise.reject(error);
      }
      this.#stopped = this.#stop(timeoutMs);
    }
    return this.#stopped;
  }

  async #stop(timeoutMs: number): Promise<void> {
    if (this.#state === 'idle') {
      this.#state = 'stopped';
      return;
    }
    this.#state = 'stopping';
    this.#flow.stop();
    const subscription = await this.#subscription?.catch(() => undefined);
    try {
      await subscription?.pause();
    } catch (error) {
      this.#logger.error({ err: error, queue: this.config.queue }, `redeliver: could not pause consumption of queue '${this.config.queue}' while stopping; stopping anyway`);
    }
    for (const delivery of this.#admission.takeWaiting()) {
      this.#track(this.#settle(delivery, 'release', () => delivery.release()).then(() => this.#admission.left()));
    }
    this.#stopping.abort(new Error(`endpoint ${this.config.name} is stopping`));
    if (!(await this.#drain(timeoutMs))) {
      if (this.#outcomeSends > 0) {
        this.#logger.warn({ outcomeQueue: this.config.replayOutcomeQueue, pending: this.#outcomeSends, timeoutMs }, `redeliver: ${this.#outcomeSends} outcome record(s) were still being sent to queue '${this.config.replayOutcomeQueue}' when the stop timeout of ${formatDelay(timeoutMs)} passed; stopping without waiting for them`);
      }
      await this.#releaseUnfinished(timeoutMs);
    }
    try {
      await subscription?.close();
    } catch (error) {
      this.#logger.error({ err: error, queue: this.config.queue }, `redeliver: could not close the subscription to queue '${this.config.queue}'`);
    }
    this.#state = 'stopped';
  }

  /** Waits for every task to end, for at most `timeoutMs`; resolves whether they all did. */
  async #drain(timeoutMs: number): Promise<boolean> {
    const timer = new AbortController();
    const timedOut = this.config.clock.sleep(timeoutMs, timer.signal).then(
      () => true,
      () => false,
    );
    const drained = (async () => {
      while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
      return true;
    })();
    const finished = await Promise.race([drained, timedOut.then((expired) => !expired)]);
    timer.abort();
    return finished;
  }

  /** The stop timeout passed: hands back every delivery whose handler is still running. */
  async #releaseUnfinished(timeoutMs: number): Promise<void> {
    const releases = [...this.#running].map(async (delivery) => {
      this.#logger.error(
        { messageId: delivery.id, queue: delivery.queue, timeoutMs },
        `redeliver: the handler of message '${delivery.id}' did not finish within the stop timeout of ${formatDelay(timeoutMs)}; releasing it to queue '${delivery.queue}'`,
      );
      await this.#settle(delivery, 'release', () => delivery.release());
    });
    await Promise.allSettled(releases);
  }

  #accept(delivery: Delivery): void {
    if (this.#state !== 'running') {
      // A delivery that raced with stop: hand it back once consumption is paused (or could not be).
      void this.#subscription
        ?.then((s) => s.pause())
        .catch(() => undefined)
        .then(() => delivery.release())
        .catch(() => undefined);
      return;
    }
    this.#admission.admit(delivery);
  }

  /**
   * Runs a delivery the admission let through. One the stop overtook goes
   * back at once, and so does one whose lease ran out while it waited:
   * another consumer may be handling it already.
   */
  #launch(delivery: Delivery): void {
    this.#running.add(delivery);
    const run =
      this.#state === 'running' && !this.#leaseRanOut(delivery, 'while it waited for a slot; releasing it without running the handler')
        ? this.#process(delivery)
        : this.#settle(delivery, 'release', () => delivery.release());
    this.#track(
      run.then(
        () => undefined,
        (error: unknown) => this.#rescue(delivery, error),
      ),
      () => {
        this.#running.delete(delivery);
        this.#admission.finished(delivery);
      },
    );
  }

  /**
   * Whether the delivery's lease ran out (on transports that lease; on
   * RabbitMQ, its channel closed), logged with `what` happened then when it
   * did: another consumer may be handling the message already, so its
   * handler must not run again here.
   */
  #leaseRanOut(delivery: Delivery, what: string): boolean {
    if (!delivery.leaseExpired?.()) return false;
    this.#logger.warn({ messageId: delivery.id, queue: delivery.queue }, `redeliver: the lease of message '${delivery.id}' ran out ${what}`);
    return true;
  }

  #track(work: Promise<unknown>, after?: () => void): void {
    const task = work.then(() => {
      this.#tasks.delete(task);
      after?.();
    });
    this.#tasks.add(task);
  }

  /**
   * Something threw outside the handler. A user-supplied part (the
   * unrecoverable predicate, the delayed backoff) will fail again for this
   * message, so it goes to the error queue with the part as its reason;
   * anything else (a transport or store fault) releases the delivery to be
   * tried again. One already settled refuses, and is left as it is.
   */
  async #rescue(delivery: Delivery, error: unknown): Promise<void> {
    if (isInstance(error, UserPartError)) {
      this.#logger.error({ err: error, messageId: delivery.id, queue: delivery.queue, part: error.part }, `redeliver: ${error.message}; message '${delivery.id}' goes to the error queue`);
      const state = readRetryState(delivery.headers);
      await this.#deadLetter(delivery, this.#failureContext(delivery, error, state, 0, state.attempts, state.history), error.part);
      return;
    }
    try {
      await delivery.release();
    } catch (releaseError) {
      if (isDeliveryGone(releaseError)) return;
      this.#logger.error({ err: error, releaseErr: releaseError, messageId: delivery.id, queue: delivery.queue }, `redeliver: handling message '${delivery.id}' failed outside the handler, and it could not be released; the broker will deliver it again`);
      return;
    }
    this.#logger.error({ err: error, messageId: delivery.id, queue: delivery.queue }, `redeliver: handling message '${delivery.id}' failed outside the handler; released it to be delivered again`);
  }

  async #process(delivery: Delivery): Promise<void> {
    const { config } = this;
    const state = readRetryState(delivery.headers);
    let message: T;
    try {
      message = config.codec.decode(delivery.body);
    } catch (error) {
      const failure = isInstance(error, DeserializationError) ? error : new DeserializationError(summarizeError(error).message, { cause: error });
      const context = this.#failureContext(delivery, failure, state, 0, state.attempts, state.history);
      await this.#deadLetter(delivery, context, 'deserialization');
      return;
    }
    if (config.schema) {
      const checked = await validateBody(config.schema, message);
      if ('error' in checked) {
        await this.#deadLetter(delivery, this.#failureContext(delivery, checked.error, state, 0, state.attempts, state.history), 'validation');
        return;
      }
      message = checked.value;
    }

    const dedup = config.deduplication;
    let token: string | undefined;
    if (dedup) {
      token = await this.#claim(delivery, state);
      if (token === undefined) return;
    }
    let completed = false;
    try {
      completed = await this.#run(delivery, message, state, token);
    } finally {
      if (dedup && !completed) {
        await Promise.resolve()
          .then(() => dedup.abandon(delivery.id, token!))
          .catch((error: unknown) => this.#logger.error({ err: error, messageId: delivery.id }, 'redeliver: could not release a deduplication claim'));
      }
    }
  }

  /**
   * Records a handled (or discarded) id in the deduplication store. The
   * message's work is done, so a store that fails here (busy, full disk)
   * does not stop its settlement: the failure is logged, and a later copy of
   * the id may be handled again.
   */
  async #recordHandled(delivery: Delivery, token: string | undefined): Promise<void> {
    const dedup = this.config.deduplication;
    if (!dedup || token === undefined) return;
    try {
      await dedup.complete(delivery.id, token, this.config.clock.now());
    } catch (error) {
      this.#logger.error({ err: error, messageId: delivery.id, queue: delivery.queue }, `redeliver: the deduplication store could not record message '${delivery.id}' as handled; settling it anyway, and a later copy may be handled again`);
    }
  }

  /**
   * Claims the message id in the deduplication store. A copy handled within
   * the window is acknowledged without running the handler; a copy that
   * another consumer is handling right now waits in the broker. Resolves
   * the claim's token, or undefined when the handler must not run.
   */
  async #claim(delivery: Delivery, state: RetryState): Promise<string | undefined> {
    const { config } = this;
    let claim: DedupClaim;
    try {
      claim = await config.deduplication!.begin(delivery.id, config.clock.now(), config.leaseMs);
      if (!['claimed', 'busy', 'duplicate'].includes(claim?.outcome) || (claim.outcome === 'claimed' && typeof claim.token !== 'string')) {
        throw new TypeError(`the deduplication store's begin returned ${JSON.stringify(claim)}, not a DedupClaim`);
      }
    } catch (error) {
      this.#logger.error({ err: error, messageId: delivery.id }, `redeliver: the deduplication store failed; message '${delivery.id}' goes back to the broker`);
      await this.#settle(delivery, 'release', () => delivery.release());
      return undefined;
    }
    if (claim.outcome === 'claimed') return claim.token;
    if (claim.outcome === 'busy') {
      const context = this.#failureContext(delivery, new Error('another copy is being handled'), state, 0, state.attempts, state.history);
      await this.#defer(delivery, context, DEFAULTS.dedupBusyRetryMs, 'in-progress', false);
      return undefined;
    }
    if (await this.#settle(delivery, 'ack', () => delivery.ack())) {
      this.#stats.duplicates++;
      this.#logger.info({ messageId: delivery.id, queue: delivery.queue }, `Skipping message '${delivery.id}': a copy was already handled`);
      this.emit('duplicate', { messageId: delivery.id, queue: delivery.queue });
    }
    return undefined;
  }


  /** Runs the handler with immediate retries; resolves true when the message was handled or discarded. */
  async #run(delivery: Delivery, message: T, state: RetryState, dedupToken: string | undefined): Promise<boolean> {
    const { config } = this;
    const deadlineAt = this.#deadlineOf(delivery);
    if (isPastDeadline(deadlineAt, config.clock.now())) {
      const context = this.#failureContext(delivery, new DeadlineExpiredError(deadlineAt!), state, 0, state.attempts, state.history, deadlineAt);
      return this.#expire(delivery, context, dedupToken);
    }
    if (state.attempts > 0 && !this.#flow.allowRedelivery()) {
      // A retried message is a retry for the budget too: with none left it waits again, untouched.
      const context = this.#failureContext(delivery, new Error('retry budget spent'), state, 0, state.attempts, state.history, deadlineAt);
      const deferMs = this.#flow.budgetDeferMs(nextDelayedRetry(this.#retry, context));
      if (isPastDeadline(deadlineAt, context.failedAt + deferMs)) return this.#expire(delivery, context, dedupToken);
      await this.#defer(delivery, context, deferMs, 'budget', false);
      return false;
    }
    let attempts = state.attempts;
    let history: readonly FailureRecord[] = state.history;
    for (let immediateAttempt = 1; ; immediateAttempt++) {
      attempts++;
      let requeue: RequeueOptions | undefined;
      const context: MessageContext = {
        messageId: delivery.id,
        queue: delivery.queue,
        headers: delivery.headers,
        immediateAttempt,
        delayedAttempt: state.delayedAttempts,
        attempt: attempts,
        deliveryCount: delivery.deliveryCount,
        deadline: deadlineAt === undefined ? undefined : new Date(deadlineAt),
        signal: this.#stopping.signal,
        requeue: (options = {}) => {
          requeue = requeueOptions(options);
        },
        extendLease: (ms) => delivery.extendLease?.(ms) ?? Promise.resolve(),
        leaseExpired: () => delivery.leaseExpired?.() ?? false,
      };
      const startedAt = config.clock.monotonic();
      if (attempts === 1) this.#flow.onFirstAttempt();
      try {
        await config.handler(message, context);
      } catch (error) {
        history = appendFailure(history, this.#record(error, immediateAttempt, state.delayedAttempts));
        const failure = this.#failureContext(delivery, error, state, immediateAttempt, attempts, history, deadlineAt);
        if (!this.#unrecoverable(error)) this.#flow.onAttemptFailed();
        const decision = this.#decide(failure);
        if (decision.kind === 'retry-now' && this.#state === 'running' && !this.#leaseRanOut(delivery, 'during its handler; not retrying it at once')) {
          const verdict = this.#flow.immediateRetryVerdict(nextDelayedRetry(this.#retry, failure));
          if (verdict) {
            if (isPastDeadline(deadlineAt, failure.failedAt + verdict.deferMs)) return this.#expire(delivery, failure, dedupToken);
            await this.#defer(delivery, failure, verdict.deferMs, verdict.reason);
            return false;
          }
          this.#stats.immediateRetries++;
          this.#logFailure('info', failure, `Immediate retry is going to retry message '${delivery.id}' because of an exception`);
          this.emit('immediateRetry', failureEvent(failure));
          continue;
        }
        if (decision.kind === 'discard') await this.#recordHandled(delivery, dedupToken);
        await this.#carryOut(delivery, failure, decision);
        return decision.kind === 'discard';
      }
      if (requeue) return this.#requeue(delivery, state, attempts, history, requeue, deadlineAt, dedupToken);
      await this.#recordHandled(delivery, dedupToken);
      // Before the ack: the ack frees the slot, and the next message's outcome must not reach flow control first.
      this.#flow.onSuccess(attempts > 1);
      if (await this.#settle(delivery, 'ack', () => delivery.ack())) {
        this.#stats.handled++;
        this.emit('handled', { messageId: delivery.id, queue: delivery.queue, attempt: attempts, durationMs: config.clock.monotonic() - startedAt });
        this.#reportReplayOutcome(delivery);
      }
      return true;
    }
  }

  /**
   * After a replayed message was acknowledged: when `replayOutcomeQueue` is
   * set, sends its outcome record there, once, without holding the
   * message's slot. A send that fails is logged and emitted; the message
   * stays handled. `stop` waits for the sends under way, within its timeout.
   */
  #reportReplayOutcome(delivery: Delivery): void {
    const outcomeQueue = this.config.replayOutcomeQueue;
    if (outcomeQueue === undefined || !Object.prototype.hasOwnProperty.call(delivery.headers, HEADER.replayCount)) return;
    const { id: messageId, queue } = delivery;
    const replayCount = replayCountOf(delivery.headers[HEADER.replayCount]);
    if (replayCount === undefined) {
      this.#logger.warn(
        { messageId, queue, outcomeQueue },
        `redeliver: message '${messageId}' has a malformed ${HEADER.replayCount} header (${JSON.stringify(String(delivery.headers[HEADER.replayCount]).slice(0, 40))}); no outcome record sent`,
      );
      return;
    }
    const send = async () => {
      try {
        const record = encodeReplayOutcome({ kind: 'handled', messageId, replayCount, queue, endpoint: this.config.name, at: new Date(this.config.clock.now()).toISOString() });
        await this.config.transport.send(outcomeQueue, record);
      } catch (error) {
        const summary = summarizeError(error);
        this.#logger.warn(
          { err: error, messageId, queue, outcomeQueue, replayCount },
          `redeliver: could not send the outcome record of replayed message '${messageId}' to queue '${outcomeQueue}': ${summary.name}: ${summary.message}; the message was handled, the record is not sent again`,
        );
        this.emit('replayOutcomeFailed', { messageId, queue, outcomeQueue, replayCount, error });
      }
    };
    this.#outcomeSends++;
    this.#track(send(), () => this.#outcomeSends--);
  }

  /** Whether flow control should not count the error as a failure; a predicate that throws counts as unrecoverable (the policy sends the message to the error queue). */
  #unrecoverable(error: unknown): boolean {
    try {
      return this.#retry.isUnrecoverable(error);
    } catch {
      return true;
    }
  }

  /**
   * Runs the policy. A policy, unrecoverable predicate or backoff that throws
   * or answers nonsense sends the message to the error queue, with the
   * failing part as the reason.
   */
  #decide(failure: FailureContext): Decision {
    const { decision, fault } = this.#policy.decide(failure);
    if (fault) {
      const what = fault.part === 'policy' ? 'recoverability policy' : fault.part;
      this.#logger.error({ err: fault.error, messageId: failure.messageId, part: fault.part }, `redeliver: the ${what} failed; moving message '${failure.messageId}' to the error queue`);
    }
    return decision;
  }

  async #carryOut(delivery: Delivery, failure: FailureContext, decision: Decision): Promise<void> {
    switch (decision.kind) {
      case 'retry-now':
        // Only reached while stopping, or when the lease ran out: hand the message back for another consumer.
        await this.#settle(delivery, 'release', () => delivery.release());
        return;
      case 'retry-later': {
        const delayMs = Math.min(decision.delayMs, this.config.maxDelayMs);
        const headers = this.#fit(withRetryState(delivery.headers, nextRound(failure, delayMs)));
        this.#flow.onMessageFailed();
        if (await this.#retryLater(delivery, failure, delayMs, headers)) {
          this.#stats.delayedRetries++;
          this.#logFailure('warn', failure, `Delayed retry will reschedule message '${delivery.id}' after a delay of ${formatDelay(delayMs)} because of an exception`, { delayMs });
          this.emit('delayedRetry', { ...failureEvent(failure), delayMs });
        }
        return;
      }
      case 'dead-letter':
        if (decision.reason === 'retries-exhausted') this.#flow.onMessageFailed();
        await this.#deadLetter(delivery, failure, decision.reason);
        return;
      case 'discard':
        if (await this.#settle(delivery, 'ack', () => delivery.ack())) {
          this.#stats.discarded++;
          this.#logFailure('warn', failure, `Discarding message '${delivery.id}': ${decision.reason}`);
          this.emit('discarded', { ...failureEvent(failure), reason: decision.reason });
        }
        return;
    }
  }

  /** Carries out a requeue the handler asked for; resolves true when the message was discarded (its deadline would pass first). */
  async #requeue(
    delivery: Delivery,
    state: RetryState,
    attempts: number,
    history: readonly FailureRecord[],
    options: RequeueOptions,
    deadlineAt: number | undefined,
    dedupToken: string | undefined,
  ): Promise<boolean> {
    const { config } = this;
    const base = { delayedAttempt: state.delayedAttempts, lastDelayMs: state.lastDelayMs, delayedElapsedMs: state.delayedElapsedMs };
    const requested = options.delayMs ?? nextDelayedRetry(this.#retry, base);
    const failure = this.#failureContext(delivery, new Error('requeued by the handler'), state, 1, attempts, history, deadlineAt);
    if (state.delayedAttempts >= config.delayedRetries || requested === undefined) {
      await this.#deadLetter(delivery, failure, 'requeue-limit');
      return false;
    }
    const delayMs = Math.min(requested, config.maxDelayMs);
    if (isPastDeadline(deadlineAt, failure.failedAt + delayMs)) return this.#expire(delivery, failure, dedupToken);
    const headers = this.#fit(withRetryState(delivery.headers, nextRound(failure, delayMs)));
    const backoff = options.backoff ?? true;
    if (backoff) this.#flow.onMessageFailed();
    if (await this.#retryLater(delivery, failure, delayMs, headers)) {
      this.#stats.requeued++;
      this.#logger.info({ messageId: delivery.id, queue: delivery.queue, delayMs, backoff }, `Requeued message '${delivery.id}' for ${formatDelay(delayMs)}`);
      this.emit('requeued', { messageId: delivery.id, queue: delivery.queue, delayMs, backoff });
    }
    return false;
  }

  /**
   * The message's deadline for this delivery (see `messageDeadline`), its
   * policy part counted from now, the first attempt of this delivery. A
   * deadline header that is not a time reads as absent, with a warning.
   */
  #deadlineOf(delivery: Delivery): number | undefined {
    const headers = readDeadlineHeaders(delivery.headers);
    for (const name of headers.malformed) {
      const shown = JSON.stringify(String(delivery.headers[name]).slice(0, 40));
      this.#logger.warn({ messageId: delivery.id, queue: delivery.queue, header: name }, `redeliver: message '${delivery.id}' has a malformed ${name} header (${shown}); handling it as if it had none`);
    }
    return messageDeadline({ headers, deadlineMs: this.config.deadlineMs, firstAttemptAt: this.config.clock.now() });
  }

  /**
   * The message is past its deadline, or its next retry or deferral would
   * come back at or after it: it moves to the error queue with reason
   * `expired`, or is discarded, per `onExpired`. Resolves true when discarded.
   */
  async #expire(delivery: Delivery, failure: FailureContext, dedupToken: string | undefined): Promise<boolean> {
    const decision = expiredDecision(this.config.onExpired);
    if (decision.kind === 'discard') await this.#recordHandled(delivery, dedupToken);
    await this.#carryOut(delivery, failure, decision);
    return decision.kind === 'discard';
  }

  /** Hands a message back for `delayMs` without counting a delayed retry. */
  async #defer(delivery: Delivery, failure: FailureContext, delayMs: number, reason: DeferReason, failed = true): Promise<void> {
    if (failed && reason === 'budget') this.#flow.onMessageFailed();
    const headers = this.#fit(
      withRetryState(delivery.headers, retryStateOf(failure)),
    );
    if (await this.#retryLater(delivery, failure, delayMs, headers)) {
      this.#stats.deferred++;
      this.#logFailure('info', failure, `Deferring message '${delivery.id}' for ${formatDelay(delayMs)} (${reason}) instead of retrying it at once`, { delayMs, reason });
      this.emit('deferred', { messageId: delivery.id, queue: delivery.queue, delayMs, reason });
    }
  }

  async #deadLetter(delivery: Delivery, failure: FailureContext, reason: string): Promise<void> {
    const { config } = this;
    const headers = this.#fit(
      deadLetterHeaders(delivery.headers, {
        reason,
        error: summarizeError(failure.error),
        at: new Date(config.clock.now()),
        queue: delivery.queue,
        endpoint: config.name,
        host: config.host,
        immediateAttempts: failure.immediateAttempt,
        state: retryStateOf(failure),
        ...(isInstance(failure.error, ValidationError) ? { validationIssues: failure.error.issues } : {}),
      }),
    );
    const settled = await this.#settle(
      delivery,
      'deadLetter',
      () => delivery.deadLetter(config.errorQueue, headers),
      () => delivery.deadLetter(config.errorQueue, minimalDeadLetterHeaders(headers)),
    );
    if (settled) {
      this.#stats.deadLettered++;
      const why = reason === 'expired' && failure.deadlineAt !== undefined ? `its deadline ${new Date(failure.deadlineAt!).toISOString()} passed or would pass before its next attempt` : 'processing failed due to an exception';
      this.#logFailure('error', failure, `Moving message '${delivery.id}' to the error queue '${config.errorQueue}' because ${why}`, { reason });
      this.emit('deadLettered', { ...failureEvent(failure), errorQueue: config.errorQueue, reason });
    }
  }

  /**
   * Schedules a retry copy; resolves whether it was scheduled. A copy the
   * broker cannot take however often it is tried (a \`MessageTooLargeError\`:
   * too large even with its headers cut) would leave the message failing
   * on its first retry state for good: it moves to the error queue instead,
   * reason \`copy-too-large\`.
   */
  async #retryLater(delivery: Delivery, failure: FailureContext, delayMs: number, headers: Headers): Promise<boolean> {
    let tooLarge: unknown;
    const settled = await this.#settle(delivery, 'retryLater', async () => {
      try {
        await delivery.retryLater(delayMs, headers);
      } catch (error) {
        if (!isMessageTooLarge(error)) throw error;
        tooLarge = error;
      }
    });
    if (tooLarge === undefined) return settled;
    this.#logger.error({ messageId: delivery.id, queue: delivery.queue, delayMs }, `redeliver: the retry copy of message '${delivery.id}' is larger than its broker takes, even with its headers cut (${String(readProperty(tooLarge, 'message'))}); moving it to the error queue instead`);
    await this.#deadLetter(delivery, failure, 'copy-too-large');
    return false;
  }

  /** Headers of a copy cut to the transport's header budget (see `fitHeaders`). */
  #fit(headers: Headers): Headers {
    return fitHeaders(headers, this.config.transport.limits ?? {});
  }

  /**
   * Runs a settlement. When it fails and the delivery is still held, it is
   * tried again after the connection backoff, up to `settlementRetries`
   * times, then the message is released; while stopping it is released at
   * once. A delivery that is gone is left to the broker's redelivery.
   * When the tries are spent, `fallback` (an error-queue copy without its
   * failure history and stack, which the broker may take where it refused
   * the full one) is tried once before the release. Resolves whether the
   * settlement, or its fallback, took effect.
   */
  async #settle(delivery: Delivery, action: string, settle: () => Promise<void>, fallback?: () => Promise<void>): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      try {
        await settle();
        return true;
      } catch (error) {
        this.#stats.settlementFailures++;
        if (action === 'release' || isDeliveryGone(error)) {
          this.#settlementFailed(delivery, action, error, attempt, 'redelivered');
          return false;
        }
        const retryInMs = this.#state === 'running' && attempt <= this.config.settlementRetries ? this.#settlementDelay(attempt) : undefined;
        if (retryInMs === undefined) {
          if (fallback && this.#state === 'running' && (await this.#fallBack(delivery, action, fallback))) return true;
          await this.#releaseAfterFailure(delivery, action, error, attempt);
          return false;
        }
        this.#settlementFailed(delivery, action, error, attempt, 'retrying', retryInMs);
        try {
          await this.config.clock.sleep(retryInMs, this.#stopping.signal);
        } catch {
          await this.#releaseAfterFailure(delivery, action, error, attempt);
          return false;
        }
      }
    }
  }

  /** Tries a settlement's fallback once; resolves whether it took effect. */
  async #fallBack(delivery: Delivery, action: string, fallback: () => Promise<void>): Promise<boolean> {
    try {
      await fallback();
    } catch {
      return false;
    }
    this.#logger.warn({ messageId: delivery.id, queue: delivery.queue, action }, `redeliver: message '${delivery.id}' could not ${action} with its full headers; it went with a minimal copy, without its failure history and stack`);
    return true;
  }

  #settlementDelay(attempt: number): number {
    const delay = this.#settlementBackoff({ attempt, previousDelayMs: undefined, elapsedMs: 0, random: this.config.random }) ?? 0;
    return Math.min(Math.max(0, Math.round(delay)), MAX_TIMER_MS);
  }

  async #releaseAfterFailure(delivery: Delivery, action: string, error: unknown, attempt: number): Promise<void> {
    try {
      await delivery.release();
    } catch (releaseError) {
      this.#settlementFailed(delivery, action, error, attempt, 'redelivered', undefined, releaseError);
      return;
    }
    this.#settlementFailed(delivery, action, error, attempt, 'released');
  }

  #settlementFailed(delivery: Delivery, action: string, error: unknown, attempt: number, outcome: SettlementOutcome, retryInMs?: number, releaseError?: unknown): void {
    const { id, queue } = delivery;
    const summary = summarizeError(error);
    const what = `Could not ${action} message '${id}' (attempt ${attempt}): ${summary.name}: ${summary.message}`;
    const fields = { err: error, messageId: id, queue, action, attempt, outcome };
    if (outcome === 'retrying') this.#logger.warn({ ...fields, retryInMs }, `${what}; trying again in ${formatDelay(retryInMs!)}`);
    else if (outcome === 'released') this.#logger.error(fields, `${what}; released it to queue '${queue}' to be delivered again`);
    else if (releaseError !== undefined) {
      this.#logger.error({ ...fields, releaseErr: releaseError }, `${what}; nor could it be released: the broker will deliver it again once its lease ends or its channel closes`);
    } else this.#logger.error(fields, `${what}; the broker will deliver it again`);
    this.emit('settlementFailed', { messageId: id, queue, action, error, attempt, outcome, ...(retryInMs === undefined ? {} : { retryInMs }) });
  }

  #record(error: unknown, immediateAttempt: number, delayedAttempt: number): FailureRecord {
    const summary = summarizeError(error);
    return {
      at: new Date(this.config.clock.now()).toISOString(),
      errorName: summary.name,
      message: summary.message,
      immediateAttempt,
      delayedAttempt,
    };
  }

  #failureContext(
    delivery: Delivery,
    error: unknown,
    state: RetryState,
    immediateAttempt: number,
    attempts: number,
    history: readonly FailureRecord[],
    deadlineAt = state.deadlineAt,
  ): FailureContext {
    return {
      error,
      messageId: delivery.id,
      queue: delivery.queue,
      headers: delivery.headers,
      immediateAttempt,
      delayedAttempt: state.delayedAttempts,
      attempts,
      lastDelayMs: state.lastDelayMs,
      delayedElapsedMs: state.delayedElapsedMs,
      history,
      deadlineAt,
      failedAt: this.config.clock.now(),
    };
  }

  #logFailure(level: 'info' | 'warn' | 'error', failure: FailureContext, text: string, extra: object = {}): void {
    const summary = summarizeError(failure.error);
    this.#logger[level](
      {
        messageId: failure.messageId,
        queue: failure.queue,
        endpoint: this.config.name,
        immediateAttempt: failure.immediateAttempt,
        delayedAttempt: failure.delayedAttempt,
        attempt: failure.attempts,
        err: { name: summary.name, message: summary.message, stack: summary.stack },
        ...extra,
      },
      `${text}: ${summary.name}: ${summary.message}`,
    );
  }
}

/** Checks `ctx.requeue` options when the handler calls it: a bad one throws a RangeError into the handler. */
function requeueOptions(options: unknown): RequeueOptions {
  if (typeof options !== 'object' || options === null) throw new RangeError(`requeue: options must be an object, got ${options === null ? 'null' : typeof options}`);
  const { delayMs, backoff } = options as RequeueOptions;
  if (delayMs !== undefined && (typeof delayMs !== 'number' || !Number.isFinite(delayMs) || delayMs < 0 || delayMs > MAX_TIMER_MS)) {
    throw new RangeError(`requeue: delayMs must be a finite number of milliseconds from 0 to ${MAX_TIMER_MS} (2^31-1), got ${String(delayMs)}`);
  }
  if (backoff !== undefined && typeof backoff !== 'boolean') throw new RangeError(`requeue: backoff must be a boolean, got ${typeof backoff}`);
  return { ...(delayMs === undefined ? {} : { delayMs }), ...(backoff === undefined ? {} : { backoff }) };
}

/** A `redeliver-replay-count` value as a whole number of at least 1, or undefined when it is not one. */
function replayCountOf(value: string | undefined): number | undefined {
  if (typeof value !== 'string' || !/^[0-9]{1,15}$/.test(value)) return undefined;
  const count = Number(value);
  return count >= 1 ? count : undefined;
}

function nextRound(failure: FailureContext, delayMs: number): RetryState {
  return {
    attempts: failure.attempts,
    delayedAttempts: failure.delayedAttempt + 1,
    lastDelayMs: delayMs,
    delayedElapsedMs: failure.delayedElapsedMs + delayMs,
    history: failure.history,
    deadlineAt: failure.deadlineAt,
  };
}

function failureEvent(failure: FailureContext): FailureEvent {
  return {
    messageId: failure.messageId,
    queue: failure.queue,
    error: failure.error,
    immediateAttempt: failure.immediateAttempt,
    delayedAttempt: failure.delayedAttempt,
    attempt: failure.attempts,
  };
}

/** HH:MM:SS, or milliseconds below a second, as in the log lines. */
export function formatDelay(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const total = Math.round(ms / 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${pad(Math.floor(total / 3600))}:${pad(Math.floor((total % 3600) / 60))}:${pad(total % 60)}`;
}

/** The retry state a copy of a failed message carries: where its failure left it. */
function retryStateOf(failure: FailureContext): RetryState {
  return {
    attempts: failure.attempts,
    delayedAttempts: failure.delayedAttempt,
    lastDelayMs: failure.lastDelayMs,
    delayedElapsedMs: failure.delayedElapsedMs,
    history: failure.history,
    deadlineAt: failure.deadlineAt,
  };
}

/** How late the transport may bring a delayed retry back (its `limits.delayPrecisionMs`): 0 unless it declares a finite, non-negative number. */
function delayPrecision(transport: Transport): number {
  const ms = transport.limits?.delayPrecisionMs;
  return typeof ms === 'number' && Number.isFinite(ms) && ms > 0 ? ms : 0;
}
