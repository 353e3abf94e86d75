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
