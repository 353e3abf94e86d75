/**
 * Where an error-queue entry may be sent back. The queue an entry names in
 * its `redeliver-failure-queue` header is only as trustworthy as whoever put
 * the entry there: a broker dead-letter exchange, a shovel or anyone who can
 * publish to the error queue can name any queue. So a send-back goes only to
 * a queue that already exists, is not an error queue, and (when the operator
 * gives a list) is on the operator's list. A send-back never creates a queue.
 */

/**
 * Why a destination was refused; `unknown`: the entry names no queue (no
 * `redeliver-failure-queue` header: something other than redeliver put it
 * in the error queue) and none was given.
 */
export type SendBackRefusal = 'error-queue' | 'not-allowed' | 'missing' | 'unknown';

/**
 * A send-back refused because of its destination. Nothing was sent and the
 * entry stays in the error queue.
 */
export class SendBackRefusedError extends Error {
  override readonly name = 'SendBackRefusedError';
  constructor(
    /** The queue the message would have gone to; empty when `reason` is `unknown`. */
    readonly queue: string,
    readonly reason: SendBackRefusal,
    messageId: string,
  ) {
    super(`refused to send message ${messageId} back${reason === 'unknown' ? '' : ` to '${queue}'`}: ${explain(queue, reason)}; the entry stays in the error queue`);
  }
}

/** The refusal of an entry that names no queue to go back to, when none was given. */
export function noDestination(messageId: string): SendBackRefusedError {
  return new SendBackRefusedError('', 'unknown', messageId);
}

function explain(queue: string, reason: SendBackRefusal): string {
  switch (reason) {
    case 'error-queue':
      return `'${queue}' is an error queue; send the message to a work queue`;
    case 'not-allowed':
      return `'${queue}' is not one of the queues allowed as a destination`;
    case 'missing':
      return `no queue '${queue}' exists, and a send-back does not create queues; name an existing queue`;
    case 'unknown':
      return 'it does not say which queue it failed on (it has no redeliver failure headers, so redeliver did not put it there); name the queue to send it to';
  }
}

/** Whether `error` is a {@link SendBackRefusedError}, by name, so it classifies across package copies. */
export function isSendBackRefused(error: unknown): error is SendBackRefusedError {
  return error instanceof Error && error.name === 'SendBackRefusedError';
}

/**
 * The checks that need no broker: the destination is not the error queue
 * being read, and is on `allowedQueues` when that is given. Throws a
 * {@link SendBackRefusedError}.
 */
export function checkDestinationAllowed(destination: string, errorQueue: string, messageId: string, allowedQueues: readonly string[] | undefined): void {
  if (destination === errorQueue) throw new SendBackRefusedError(destination, 'error-queue', messageId);
  if (allowedQueues !== undefined && !allowedQueues.includes(destination)) throw new SendBackRefusedError(destination, 'not-allowed', messageId);
}
