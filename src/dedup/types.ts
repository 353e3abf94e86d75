/** What {@link DeduplicationStore.begin} found. */
export type DedupClaim =
  /** Nobody handled this id within the window: go ahead. */
  | 'claimed'
  /** A copy with this id was handled within the window: skip it. */
  | 'duplicate'
  /** Another copy with this id is being handled right now: try later. */
  | 'busy';

/**
 * Remembers which message ids were handled, for a window of time, so that a
 * copy sent twice (a producer retry after an unknown outcome, a broker
 * redelivery after a lost ack) is handled once.
 */
export interface DeduplicationStore {
  /** Claims `id` for handling for `leaseMs`. */
  begin(id: string, now: number, leaseMs: number): Promise<DedupClaim>;
  /** The claimed id was handled at `now`. */
  complete(id: string, now: number): Promise<void>;
  /** The claimed id was not handled (it will be retried): release the claim. */
  abandon(id: string): Promise<void>;
}
