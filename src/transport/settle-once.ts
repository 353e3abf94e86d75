/**
 * The settlement state of one delivery, the same on every transport that
 * counts its deliveries against a prefetch: a delivery is held until a
 * settlement takes effect, is settled at most once, and frees its prefetch
 * slot exactly once.
 */

const HELD = 0;
const SETTLING = 1;
const SETTLED = 2;

/** How a {@link SettleOnce} reports to the delivery and the consumer behind it. */
export interface SettleOnceHooks {
  /** Frees the delivery's prefetch slot; called at most once. */
  readonly free: () => void;
  /** The error a second settlement rejects with (an `AlreadySettledError` of the transport). */
  readonly alreadySettled: () => Error;
  /**
   * Called, at most once, when a settlement failed and the delivery is still
   * held; it calls `free` when the slot may go. Default: the slot goes at
   * once.
   */
  readonly heldAfterFailure?: (free: () => void) => void;
}

/**
 * Settles a delivery at most once. A settlement that took effect, or that
 * failed because the delivery is gone (`isGone`), is final and frees the
 * prefetch slot; one that failed otherwise leaves the delivery held, so it
 * can be settled again.
 */
export class SettleOnce {
  readonly #hooks: SettleOnceHooks;
  #state = HELD;
  #freed = false;
  #heldAfterFailure = false;

  constructor(hooks: SettleOnceHooks) {
    this.#hooks = hooks;
  }

  /** Whether a settlement has taken effect, or found the delivery gone. */
  get settled(): boolean {
    return this.#state === SETTLED;
  }

  /**
   * Runs one settlement: rejects with the already-settled error unless the
   * delivery is held, then `prepare`s it and, unless that throws, `act`s on
   * what it prepared. An error of `prepare` for which `isGone` is true
   * settles the delivery without acting; any other leaves it as it was.
   */
  settle<T>(prepare: () => T, act: (prepared: T) => Promise<void>, isGone: (error: unknown) => boolean): Promise<void> {
    if (this.#state !== HELD) return Promise.reject(this.#hooks.alreadySettled());
    let prepared: T;
    try {
      prepared = prepare();
    } catch (error) {
      if (isGone(error)) this.#finish();
      return Promise.reject(error);
    }
    this.#state = SETTLING;
    return act(prepared).then(
      () => this.#finish(),
      (error: unknown) => {
        if (isGone(error)) this.#finish();
        else this.#stillHeld();
        throw error;
      },
    );
  }

  #finish(): void {
    this.#state = SETTLED;
    this.#free();
  }

  #stillHeld(): void {
    this.#state = HELD;
    const { heldAfterFailure } = this.#hooks;
    if (heldAfterFailure === undefined) return this.#free();
    if (this.#heldAfterFailure) return;
    this.#heldAfterFailure = true;
    heldAfterFailure(() => this.#free());
  }

  #free(): void {
    if (this.#freed) return;
    this.#freed = true;
    this.#hooks.free();
  }
}
