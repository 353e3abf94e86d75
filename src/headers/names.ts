/**
 * The header format, the same on every transport. All values are strings.
 * Retry state travels with the message in these headers, so a delayed retry
 * picked up by another process or after a restart continues the count.
 */
export const HEADER = {
  /** Handler attempts made before this delivery, across every round. */
  attempts: 'redeliver-attempts',
  /** Delayed retries already taken. */
  delayedAttempts: 'redeliver-delayed-attempts',
  /** The delay before this delivery, in milliseconds (what a backoff that depends on the previous delay reads). */
  lastDelay: 'redeliver-last-delay-ms',
  /** The sum of the delayed-retry delays so far, in milliseconds. */
  delayedElapsed: 'redeliver-delayed-elapsed-ms',
  /** JSON array of the most recent failures, oldest first, at most {@link LIMITS.historyEntries}. */
  history: 'redeliver-history',
  /** `true` when a producer re-sent the message after an attempt whose outcome it did not know: the broker may hold two copies. */
  possibleDuplicate: 'redeliver-possible-duplicate',
  /** How many times an operator sent the message back from an error queue. */
  replayCount: 'redeliver-replay-count',
  /** When it was last sent back from an error queue, ISO 8601. */
  replayedAt: 'redeliver-replayed-at',
  /** Why the message is in the error queue: retries-exhausted, unrecoverable, deserialization, validation, requeue-limit, policy, unrecoverable-predicate, backoff, expired, copy-too-large, or a custom reason. */
  failureReason: 'redeliver-failure-reason',
  /** `name` of the last error. */
  failureErrorName: 'redeliver-failure-error-name',
  /** `message` of the last error, at most {@link LIMITS.messageChars} characters. */
  failureMessage: 'redeliver-failure-message',
  /** Stack of the last error, at most {@link LIMITS.stackChars} characters. */
  failureStack: 'redeliver-failure-stack',
  /** When the message moved to the error queue, ISO 8601. */
  failureTime: 'redeliver-failure-time',
  /** The queue the message failed on: where a replay sends it back. */
  failureQueue: 'redeliver-failure-queue',
  /** The endpoint that moved it. */
  failureEndpoint: 'redeliver-failure-endpoint',
  /** The host the endpoint ran on. */
  failureHost: 'redeliver-failure-host',
  /** Handler attempts in the last round of immediate retries. */
  failureImmediateAttempts: 'redeliver-failure-immediate-attempts',
  /** Delayed retries taken. */
  failureDelayedAttempts: 'redeliver-failure-delayed-attempts',
  /** Handler attempts in all. */
  failureAttempts: 'redeliver-failure-attempts',
  /**
   * A unique id (a UUID) of one error-queue copy, written by transports whose
   * broker gives entries no key of their own (RabbitMQ): the entry's key for
   * `errors show`, `retry` and `delete`. A new copy gets a new id.
   */
  entryId: 'redeliver-entry-id',
  /**
   * On an outcome record an endpoint sends after handling a replayed message
   * (see `replayOutcomeQueue`): what became of it, such as `handled`.
   */
  outcome: 'redeliver-outcome',
  /**
   * On the error-queue copy of a body its endpoint's schema refused: JSON
   * `{ "issues": [{ "path": [...], "message": "..." }], "dropped": n }`,
   * the first issues within {@link LIMITS.validationIssues} and
   * {@link LIMITS.validationIssuesBytes}, and how many did not fit.
   */
  validationIssues: 'redeliver-validation-issues',
  /**
   * The sender's deadline (`send(…, { expiresAt })`), milliseconds since the
   * Unix epoch: the message is never handled at or after it.
   */
  expiresAt: 'redeliver-expires-at',
  /**
   * The message's deadline as an endpoint fixed it on its first retry or
   * deferral, milliseconds since the Unix epoch: the earlier of
   * `redeliver-expires-at` and the first attempt plus the endpoint's
   * `recoverability.deadlineMs`. Retry and error-queue copies carry it, so
   * every later round and process keeps the same deadline.
   */
  deadlineAt: 'redeliver-deadline-at',
} as const;

/** Every header name redeliver writes starts with this. */
export const HEADER_PREFIX = 'redeliver-';

/** Bounds that keep headers small whatever happens. */
export const LIMITS = {
  /** Entries kept in the failure history. */
  historyEntries: 10,
  /**
   * UTF-8 bytes of the history header: the oldest entries are dropped until it
   * fits, so no transport's value bound (RabbitMQ: 8 KiB) cuts it into JSON
   * that no longer parses.
   */
  historyBytes: 8 * 1024,
  /** Characters of an error message kept in a history entry. */
  historyMessageChars: 500,
  /** Characters of the last error message. */
  messageChars: 4_096,
  /** Characters of the last error's stack. */
  stackChars: 16_384,
  /** Schema issues kept in the validation-issues header. */
  validationIssues: 20,
  /** UTF-8 bytes of the validation-issues header: the last issues kept are dropped until it fits. */
  validationIssuesBytes: 4 * 1024,
  /** Characters of one schema issue's message. */
  validationIssueMessageChars: 300,
  /** Segments of one schema issue's path (the outermost are kept), each at most 100 characters. */
  validationIssuePathSegments: 16,
} as const;
