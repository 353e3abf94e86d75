/**
 * Which attempts of a message the fault suite's handler fails, decided by a
 * seeded hash of the message id, so every worker process (a restarted one
 * too) fails the same messages the same way.
 */

/** How a message's handler behaves. */
export type Behaviour =
  /** Succeeds at the first attempt. */
  | 'ok'
  /** Fails the first attempt only: one immediate retry. */
  | 'once'
  /** Fails every attempt of the first round: a delayed retry is pending, then it succeeds. */
  | 'round'
  /** Always fails: it ends in the error queue. */
  | 'always'
  /** Fails until an operator sends it back from the error queue (`errors retry`). */
  | 'until-replayed';

/** Shares of each behaviour, summing to at most 1; the rest is `ok`. */
export type FailureMix = Partial<Record<Exclude<Behaviour, 'ok'>, number>>;

/** The default mix: most succeed, some retry at once, some wait for a delayed retry, a few reach the error queue. */
export const DEFAULT_MIX: FailureMix = { once: 0.15, round: 0.1, always: 0.05 };

/** A number in [0, 1) from the id and seed (FNV-1a, then a murmur3 finaliser). */
export function idFraction(id: string, seed: number): number {
  let h = 0x811c9dc5 ^ seed;
  for (let i = 0; i < id.length; i++) h = Math.imul(h ^ id.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 2 ** 32;
}

/** The behaviour of message `id` under `mix` and `seed`. */
export function behaviourOf(id: string, mix: FailureMix, seed: number): Behaviour {
  let x = idFraction(id, seed);
  for (const behaviour of ['once', 'round', 'always', 'until-replayed'] as const) {
    const share = mix[behaviour] ?? 0;
    if (x < share) return behaviour;
    x -= share;
  }
  return 'ok';
}

/** What the handler knows of an attempt. */
export interface AttemptFacts {
  readonly attempt: number;
  readonly delayedAttempt: number;
  readonly replayed: boolean;
}

/** Whether this attempt of a message with `behaviour` fails. */
export function attemptFails(behaviour: Behaviour, facts: AttemptFacts): boolean {
  switch (behaviour) {
    case 'ok':
      return false;
    case 'once':
      return facts.attempt === 1;
    case 'round':
      return facts.delayedAttempt === 0;
    case 'always':
      return true;
    case 'until-replayed':
      return !facts.replayed;
  }
}
