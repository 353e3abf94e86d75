/** A source of uniform numbers in [0, 1). Inject one to make jitter repeatable. */
export type Random = () => number;

/** The default random source. */
export const systemRandom: Random = Math.random;

/**
 * A repeatable random source (mulberry32) for tests and benchmarks: the same
 * seed yields the same sequence on every machine.
 */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
