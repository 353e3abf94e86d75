/** What {@link DeduplicationStore.begin} found. */
export type DedupClaim =
  /** Nobody handled this id within the window: go ahead, and present `token` to `complete` or `abandon`. */
  | { readonly outcome: 'claimed'; readonly token: string }
  /** A copy with this id was handled within the window: skip it. */
  | { readonly outcome: 'duplicate' }
  /** Another copy with this id is being handled right now: try later. */
  | { readonly outcome: 'busy' };

/**
 * Remembers which message ids were handled, for a window of time, so that a
 * copy sent twice (a producer retry after an unknown outcome, a broker
 * redelivery after a lost ack) is handled once.
 *
 * Claims are fenced: `begin` returns a token unique to the claim, and only
 * that token releases it. A copy whose claim expired while its handler ran
 * (a slow handler) cannot release the claim a second copy took since.
 */
export interface DeduplicationStore {
  /** Claims `id` for handling until `now + leaseMs`. */
  begin(id: string, now: number, leaseMs: number): Promise<DedupClaim>;
  /**
   * The claimed id was handled at `now`: it is remembered for the window,
   * whoever holds the claim now (the work is done either way).
   */
  complete(id: string, token: string, now: number): Promise<void>;
  /** The claimed id was not handled (it will be retried): release the claim, if `token` still holds it. */
  abandon(id: string, token: string): Promise<void>;
}
