import type { Random } from '../time/random.js';

/** Draws the time, in milliseconds, one message takes to cross the network one way. */
export type HopDelay = () => number;

/**
 * One-way network delays `|Normal(meanMs, sdMs)|`, drawn from `random` by the
 * Box–Muller transform: each pair of uniform draws gives two normal values,
 * the second kept for the next hop. The absolute value keeps a delay from
 * going below zero.
 * @param random the seeded uniform source (required, no default).
 * @param meanMs the mean delay in milliseconds (default 10).
 * @param sdMs the standard deviation in milliseconds (default 2).
 */
export function normalHop(random: Random, meanMs = 10, sdMs = 2): HopDelay {
  let spare: number | undefined;
  return () => {
    let z: number;
    if (spare === undefined) {
      // 1 - u lies in (0, 1]: the logarithm stays finite.
      const radius = Math.sqrt(-2 * Math.log(1 - random()));
      const angle = 2 * Math.PI * random();
      z = radius * Math.cos(angle);
      spare = radius * Math.sin(angle);
    } else {
      z = spare;
      spare = undefined;
    }
    return Math.abs(meanMs + sdMs * z);
  };
}
