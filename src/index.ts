/**
 * redeliver: recoverability for message handlers. Immediate retries,
 * broker-held delayed retries, an error queue with the story of each
 * failure, on any transport. Transports are subpath exports:
 * `redeliver/sqlite` (the embedded default), `redeliver/memory`,
 * `redeliver/rabbitmq`. A Nest module is `redeliver/nestjs`.
 */
export { Endpoint, formatDelay, type EndpointStats, type StopOptions } from './endpoint/endpoint.js';
export type { EndpointOptions, RecoverabilityOptions, Handler, CustomPolicy } from './endpoint/options.js';
export type { MessageContext, RequeueOptions } from './endpoint/context.js';
export type { EndpointEvents, FailureEvent, SettlementFailedEvent, SettlementOutcome } from './endpoint/events.js';
export { OptionError } from './util/option-checks.js';
export { Producer, type ProducerOptions, type ProducerRetryOptions, type SendOptions, type ProducerEvents, type ProducerStats } from './producer/producer.js';
export { SendFailedError, type SendAttempt } from './producer/errors.js';
export { ThrottledError, FatalSendError, SendTimeoutError, type SendErrorKind } from './transport/send-errors.js';
export { ValidationError, formatPath, type ValidationIssue } from './schema/validate.js';
export type { StandardSchemaV1 } from '@standard-schema/spec';
export type { FlowControlOptions, ConsumerBackoffOptions, RateLimitOptions, RetryBudgetOptions } from './flow/options.js';
export type { FlowState, DeferReason } from './flow/controller.js';
export type { DeduplicationStore, DedupClaim } from './dedup/types.js';
export { MemoryDeduplicationStore } from './dedup/memory-store.js';

export * from './backoff/index.js';

export { retryNow, retryLater, deadLetter, discard, type Decision, type FailureReason } from './policy/decision.js';
export type { FailureContext } from './policy/context.js';
export { UnrecoverableError, RetryLaterError, DeserializationError, isUnrecoverableError } from './policy/errors.js';
export type { ErrorClass, UnrecoverablePredicate } from './policy/classify.js';
export { defaultPolicy, type DefaultPolicySettings } from './policy/default-policy.js';
export { DeadlineExpiredError, type OnExpired } from './policy/deadline.js';

export { HEADER, LIMITS } from './headers/names.js';
export { readRetryState, type RetryState, type FailureRecord } from './headers/retry-state.js';
export { readFailureFacts, type FailureFacts } from './headers/failure.js';

export { jsonCodec, bytesCodec, type Codec } from './codec.js';
export type { Logger } from './logger.js';
export { DEFAULTS } from './defaults.js';

export { systemClock, MAX_TIMER_MS, type Clock } from './time/clock.js';
export { systemRandom, seededRandom, type Random } from './time/random.js';
export { FakeClock } from './time/fake-clock.js';

export type {
  Transport,
  TransportCapabilities,
  TransportLimits,
  Delivery,
  Subscription,
  ConsumeOptions,
  DeliveryListener,
  OutgoingMessage,
  Headers,
} from './transport/types.js';
export { isDeliveryGone, type DeliveryGone } from './transport/delivery-gone.js';
export type { ErrorEntry, ErrorQueueOperations, SendBackOptions, BrowseOptions, ScanOptions, BulkOptions, BulkSendBackOptions, BulkSummary } from './transport/error-queue.js';
export { SendBackRefusedError, isSendBackRefused, type SendBackRefusal } from './operations/send-back-destination.js';
export {
  encodeReplayOutcome,
  decodeReplayOutcome,
  replayOutcomeId,
  ReplayOutcomeError,
  REPLAY_OUTCOME_LIMITS,
  type ReplayOutcome,
  type ReplayOutcomeSource,
} from './operations/replay-outcome.js';
