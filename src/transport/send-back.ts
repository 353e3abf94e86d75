/**
 * Where a send-back of one error-queue entry goes, checked the same way on
 * every transport before anything is written (see
 * `operations/send-back-destination.ts` for why).
 */
import { failureQueueOf } from '../headers/replay.js';
import { checkDestinationAllowed, noDestination, SendBackRefusedError } from '../operations/send-back-destination.js';
import type { SendBackOptions } from './error-queue.js';
import type { QueueKind } from './inspection.js';
import type { Headers } from './types.js';

/**
 * The queue an entry of `errorQueue` goes back to: `options.queue`, else the
 * queue its headers say it failed on. Throws a `SendBackRefusedError` when
 * there is none, or it is the error queue itself or not on
 * `options.allowedQueues`.
 */
export function sendBackDestination(errorQueue: string, messageId: string, headers: Readonly<Headers>, options: SendBackOptions): string {
  const destination = options.queue ?? failureQueueOf(headers);
  if (!destination) throw noDestination(messageId);
  checkDestinationAllowed(destination, errorQueue, messageId, options.allowedQueues);
  return destination;
}

/** Throws a `SendBackRefusedError` unless `destination`, of `kind`, is a work queue. */
export function checkWorkQueue(destination: string, kind: QueueKind | undefined, messageId: string): void {
  if (kind !== 'work') throw new SendBackRefusedError(destination, kind === 'error' ? 'error-queue' : 'missing', messageId);
}
