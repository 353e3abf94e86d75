/**
 * Where a stored entry may be sent back, and what a retry needs: the
 * destination rules of src/operations/send-back-destination.ts applied to
 * store entries, checked passively (a send-back never creates a queue).
 */
import type { Logger } from '../logger.js';
import { checkDestinationAllowed, noDestination, SendBackRefusedError } from '../operations/send-back-destination.js';
import type { Clock } from '../time/clock.js';
import type { QueueKind } from '../transport/inspection.js';
import type { Transport } from '../transport/types.js';
import type { ErrorStore } from './store.js';
import type { StoredEntryDetail } from './types.js';

/** What a job run and an edit need. */
export interface RetryContext {
  readonly store: ErrorStore;
  readonly transport: Transport;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly maxFailures: number;
  readonly claimMs: number;
  /** How long a job run or an edit holds its job or request id without renewing, ms. */
  readonly leaseMs: number;
}

/**
 * Checks where an entry may go: the destination (the `to` given, or the
 * entry's failure queue) must be allowed and must exist as a work queue.
 * Throws a {@link SendBackRefusedError} (also when the entry names no queue and none was given).
 */
export async function destinationOf(
  transport: Transport,
  entry: StoredEntryDetail,
  to: string | undefined,
  allowedQueues: readonly string[] | undefined,
  kinds: Map<string, QueueKind>,
): Promise<string> {
  const destination = to ?? (entry.originalQueue || undefined);
  if (destination === undefined) throw noDestination(entry.messageId);
  checkDestinationAllowed(destination, entry.errorQueue, entry.messageId, allowedQueues);
  let kind = kinds.get(destination);
  if (kind === undefined) {
    const check = transport.inspection?.queueKinds;
    if (!check) throw new Error(`the ${transport.name} transport cannot check whether '${destination}' exists without creating it; nothing sent`);
    kind = (await check.call(transport.inspection, [destination])).get(destination) ?? 'missing';
    kinds.set(destination, kind);
  }
  if (kind !== 'work') throw new SendBackRefusedError(destination, kind === 'error' ? 'error-queue' : 'missing', entry.messageId);
  return destination;
}
