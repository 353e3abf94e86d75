/**
 * Quorum queues can carry a delivery limit (`x-delivery-limit`): a message
 * returned to the queue more than `limit` times (nacked with requeue, or
 * in flight on a channel that closed) is dropped or dead-lettered by the
 * broker. RabbitMQ counts broker deliveries, not handler attempts: immediate
 * retries run in the process on one delivery, and each delayed retry is a
 * new message with a fresh count. These functions say, before any message is
 * lost, whether a limit is too low for a retry policy.
 */

/** A recoverability policy's retry counts. */
export interface RetryBudget {
  /** Immediate retries per round. */
  readonly immediateRetries: number;
  /** Delayed retries. */
  readonly delayedRetries: number;
  /**
   * Whether immediate retries run in this process on the same delivery, as
   * the Endpoint does (true), or by releasing the message to the broker each
   * time (false). Default true.
   */
  readonly immediateRetriesInProcess?: boolean;
}

function checkCount(name: string, value: number): void {
  if (!(Number.isInteger(value) && value >= 0)) throw new RangeError(`${name} must be a whole number >= 0, got ${value}`);
}

/** Handler attempts the policy allows: `(immediate + 1) × (delayed + 1)` (NServiceBus recoverability). */
export function totalAttempts(budget: RetryBudget): number {
  checkCount('immediateRetries', budget.immediateRetries);
  checkCount('delayedRetries', budget.delayedRetries);
  return (budget.immediateRetries + 1) * (budget.delayedRetries + 1);
}

/**
 * Broker deliveries one copy of a message needs when every attempt fails: 1
 * when immediate retries run in the process, `immediate + 1` when each one
 * goes back through the broker. Delayed retries do not add to it: each is a
 * new copy whose count starts at zero.
 */
export function expectedBrokerDeliveries(budget: RetryBudget): number {
  checkCount('immediateRetries', budget.immediateRetries);
  return budget.immediateRetriesInProcess === false ? budget.immediateRetries + 1 : 1;
}

/** Inputs of {@link expectedDeliveriesWarning}. */
export interface DeliveryLimitCheck {
  /** The queue, for the message. */
  readonly queue: string;
  /** Broker deliveries one copy may need (see {@link expectedBrokerDeliveries}). */
  readonly expectedDeliveries: number;
  /** The queue's `x-delivery-limit`; undefined for none, `unknown` when it could not be read. */
  readonly deliveryLimit: number | undefined | 'unknown';
}

/**
 * A warning when the queue's delivery limit is too low for the expected
 * deliveries, or undefined when it is not. A limit `L` allows `L + 1`
 * deliveries of one copy. Also warns when there is no spare delivery: then a
 * single connection loss while the message is in flight makes the broker
 * drop it.
 */
export function expectedDeliveriesWarning({ queue, expectedDeliveries, deliveryLimit }: DeliveryLimitCheck): string | undefined {
  if (!(Number.isInteger(expectedDeliveries) && expectedDeliveries >= 1)) {
    throw new RangeError(`expectedDeliveries must be a whole number >= 1, got ${expectedDeliveries}`);
  }
  if (deliveryLimit === undefined) return undefined;
  if (deliveryLimit === 'unknown') {
    return `queue '${queue}' was declared elsewhere with arguments this transport could not read; check that its delivery limit allows ${expectedDeliveries} deliveries per message`;
  }
  const allowed = deliveryLimit + 1;
  if (expectedDeliveries > allowed) {
    return (
      `queue '${queue}' has x-delivery-limit ${deliveryLimit} (${allowed} deliveries per message) but a message may need ` +
      `${expectedDeliveries}: the broker will drop or dead-letter messages the retry policy still means to retry; ` +
      `raise the limit to at least ${expectedDeliveries} or remove it`
    );
  }
  if (expectedDeliveries === allowed) {
    return (
      `queue '${queue}' has x-delivery-limit ${deliveryLimit}, exactly the ${expectedDeliveries} deliveries a message may need: ` +
      `a connection loss or release while a message is in flight uses one up, and the broker then drops the message; ` +
      `raise the limit to at least ${expectedDeliveries} for headroom`
    );
  }
  return undefined;
}

/**
 * A warning when a queue's delivery limit is too low for a retry policy,
 * or undefined when it is not. Counts broker deliveries, not handler
 * attempts: with the default in-process immediate retries, one copy needs
 * one delivery however many immediate retries there are.
 * @param budget the policy's retry counts (required).
 * @param deliveryLimit the queue's `x-delivery-limit`; undefined for none (required).
 * @param queue the queue, for the message (default `'the queue'`).
 */
export function deliveryLimitWarning(budget: RetryBudget, deliveryLimit: number | undefined, queue = 'the queue'): string | undefined {
  const attempts = totalAttempts(budget);
  const expectedDeliveries = expectedBrokerDeliveries(budget);
  const warning = expectedDeliveriesWarning({ queue, expectedDeliveries, deliveryLimit });
  if (!warning) return undefined;
  return (
    `${warning} (policy: ${budget.immediateRetries} immediate × ${budget.delayedRetries} delayed retries = ${attempts} handler attempts ` +
    `over ${budget.delayedRetries + 1} copies, ${expectedDeliveries} broker ${expectedDeliveries === 1 ? 'delivery' : 'deliveries'} per copy)`
  );
}

/**
 * The delivery limit RabbitMQ 4.0 and later give a quorum queue declared
 * without `x-delivery-limit` (3.x gives none). Source: the RabbitMQ 4.0
 * release notes, "quorum queues now have a default delivery limit of 20".
 */
export const QUORUM_DEFAULT_DELIVERY_LIMIT_4X = 20;

/** The major version in the broker's `version` server property (`'3.10.8'` → 3), or undefined when it cannot be read. */
export function brokerMajorVersion(version: unknown): number | undefined {
  const text = typeof version === 'string' ? version : Buffer.isBuffer(version) ? version.toString('utf8') : undefined;
  const match = text === undefined ? null : /^\s*(\d+)\./.exec(text);
  return match ? Number(match[1]) : undefined;
}

/**
 * The `x-delivery-limit` to declare on an error queue, so that no read of
 * it (a browse gives every message back, and a quorum queue counts that as a
 * delivery) can ever make the broker drop an entry: `-1` (no limit) for a
 * quorum queue on RabbitMQ 4 and later, whose default is
 * {@link QUORUM_DEFAULT_DELIVERY_LIMIT_4X}; none otherwise. RabbitMQ 3.x has
 * no default, and there `-1` is a limit below any count: a quorum queue
 * declared with it drops a message the first time it is given back (checked
 * on 3.10), so it is never declared on a broker whose version is unknown.
 * @param queueType the error queue's type (required).
 * @param brokerMajor the broker's major version, undefined when unknown (required).
 */
export function errorQueueDeliveryLimit(queueType: 'classic' | 'quorum', brokerMajor: number | undefined): number | undefined {
  return queueType === 'quorum' && brokerMajor !== undefined && brokerMajor >= 4 ? -1 : undefined;
}

/**
 * The delivery limit that applies to a queue, from its declared
 * `x-delivery-limit`: undefined for none. A quorum queue declared without
 * one has {@link QUORUM_DEFAULT_DELIVERY_LIMIT_4X} on RabbitMQ 4 and later;
 * there a negative limit means none.
 * @param queueType the queue's type, `unknown` when it could not be read (required).
 * @param declared the queue's `x-delivery-limit`, undefined for none, `unknown` when it could not be read (required).
 * @param brokerMajor the broker's major version, undefined when unknown (required).
 */
export function effectiveDeliveryLimit(
  queueType: 'classic' | 'quorum' | 'unknown',
  declared: number | undefined | 'unknown',
  brokerMajor: number | undefined,
): number | undefined | 'unknown' {
  if (queueType === 'classic') return undefined;
  const modern = brokerMajor !== undefined && brokerMajor >= 4;
  if (declared === undefined) return queueType === 'quorum' && modern ? QUORUM_DEFAULT_DELIVERY_LIMIT_4X : undefined;
  if (declared === 'unknown') return 'unknown';
  return modern && declared < 0 ? undefined : declared;
}

/**
 * A warning for an error queue that has a delivery limit, or undefined when
 * it has none: every read of an error queue by the CLI or the dashboard
 * gives the messages back, which a quorum queue counts as a delivery, so
 * browsing alone makes the broker drop entries once they reach the limit.
 */
export function errorQueueLimitWarning(queue: string, deliveryLimit: number | undefined | 'unknown'): string | undefined {
  if (deliveryLimit === undefined || deliveryLimit === 'unknown') return undefined;
  return (
    `error queue '${queue}' has a delivery limit of ${deliveryLimit}: every browse of it (CLI, dashboard) gives its messages back, ` +
    'which the broker counts as a delivery, so entries that are browsed often enough will be dropped; ' +
    'redeclare it without x-delivery-limit (RabbitMQ 4: with x-delivery-limit -1), or use a classic error queue'
  );
}
