/**
 * Contention for one row, after the AWS "Exponential Backoff And Jitter"
 * study (2015): clients read a row's version and write it back
 * conditionally; a write whose version is no longer current fails, and its
 * client backs off before reading again. A discrete-event simulation in
 * simulated time, with the library's own backoff strategies.
 *
 * The model, per client: the read request crosses to the server (one hop);
 * the server answers with the row's current version (one hop); the client
 * sends a write carrying that version (one hop); the server applies it when
 * the version is still current, incrementing it, and answers success or
 * failure (one hop). After a failure the client waits the backoff's delay
 * for its retry n (1 for the first) and reads again; after a success it is
 * done. The server handles each request when it arrives, in time order.
 */
import { constant } from '../backoff/constant.js';
import { exponential } from '../backoff/exponential.js';
import { decorrelatedJitter, equalJitter, fullJitter } from '../backoff/jitter.js';
import type { Backoff } from '../backoff/types.js';
import { checkDelay, checkMax, checkWholeNumber } from '../backoff/validate.js';
import { seededRandom, type Random } from '../time/random.js';
import { MinHeap } from '../util/min-heap.js';
import { normalHop, type HopDelay } from './network.js';

/** The backoff strategies compared. */
export const CONTENTION_STRATEGIES = ['none', 'exponential', 'equal', 'full', 'decorrelated'] as const;

/** One of {@link CONTENTION_STRATEGIES}. */
export type ContentionStrategy = (typeof CONTENTION_STRATEGIES)[number];

/**
 * The backoff of `strategy`, where `e(n) = min(capMs, baseMs × 2^n)` is the
 * capped exponential delay before retry n:
 * - `none`: no wait, `0`;
 * - `exponential`: `e(n)`;
 * - `equal`: equal jitter on `e(n)`, `e(n)/2 + U(0, e(n)/2)`;
 * - `full`: full jitter on `e(n)`, `U(0, e(n))`;
 * - `decorrelated`: `min(capMs, U(baseMs, 3 × previous delay))`, the previous delay being `baseMs` before the first retry.
 * @param strategy the strategy (required).
 * @param baseMs the base delay in milliseconds (required).
 * @param capMs the largest delay in milliseconds (required).
 */
export function contentionBackoff(strategy: ContentionStrategy, baseMs: number, capMs: number): Backoff {
  // exponential(2 × base, 2, cap) gives min(cap, 2 × base × 2^(n-1)) = min(cap, base × 2^n).
  const capped = () => exponential(baseMs * 2, 2, capMs);
  switch (strategy) {
    case 'none':
      return constant(0);
    case 'exponential':
      return capped();
    case 'equal':
      return equalJitter(capped());
    case 'full':
      return fullJitter(capped());
    case 'decorrelated':
      return decorrelatedJitter(baseMs, capMs);
  }
}

/** Options of {@link runContention}: one run of the model. */
export interface ContentionRunOptions {
  /** How many clients write the row, all starting at time 0; a whole number >= 1 (required). */
  readonly clients: number;
  /** Each client's delay before its retry n; every client keeps its own attempt count and previous delay (required). */
  readonly backoff: Backoff;
  /** The uniform source of the backoff's jitter and of the default network (required). */
  readonly random: Random;
  /** The one-way network delay of each hop. Default `normalHop(random)`: |Normal(10 ms, 2 ms)|. */
  readonly hop?: HopDelay;
}

/** What one run measured. */
export interface ContentionRun {
  /** Requests the server received: reads plus writes. */
  readonly calls: number;
  /** Conditional writes the server received, successful or not. */
  readonly writes: number;
  /** When the last client learned that its write succeeded, in milliseconds from the start. */
  readonly completionMs: number;
}

/** Runs the model once until every client has written the row. */
export function runContention(options: ContentionRunOptions): ContentionRun {
  const { clients, backoff, random } = options;
  checkWholeNumber('runContention', 'clients', clients, 1);
  const hop = options.hop ?? normalHop(random);
  // Each client has exactly one request on its way to the server at a time, so the
  // event queue holds client numbers and these arrays describe each client's request.
  const arrival = new Float64Array(clients);
  const sent = new Float64Array(clients);
  const writing = new Uint8Array(clients);
  const versionRead = new Float64Array(clients);
  // Each client's backoff state: retries so far, the last delay, the sum of the delays.
  const retries = new Float64Array(clients);
  const previousDelay = new Float64Array(clients);
  const delayed = new Float64Array(clients);
  const queue = new MinHeap<number>((a, b) => arrival[a]! < arrival[b]! || (arrival[a] === arrival[b] && sent[a]! < sent[b]!));
  let order = 0;
  for (let c = 0; c < clients; c++) {
    arrival[c] = hop();
    sent[c] = order++;
    queue.push(c);
  }
  let version = 0;
  let calls = 0;
  let writes = 0;
  let completionMs = 0;
  while (queue.size > 0) {
    const c = queue.pop()!;
    const now = arrival[c]!;
    calls++;
    if (writing[c] === 0) {
      // A read: the reply crosses back, and the client sends its write as soon as it arrives.
      versionRead[c] = version;
      writing[c] = 1;
      arrival[c] = now + hop() + hop();
    } else {
      writes++;
      writing[c] = 0;
      if (versionRead[c] === version) {
        version++;
        completionMs = Math.max(completionMs, now + hop());
        continue;
      }
      // The failure crosses back, the client backs off, then its next read crosses.
      const attempt = retries[c]! + 1;
      const delay = backoff({ attempt, previousDelayMs: attempt === 1 ? undefined : previousDelay[c], elapsedMs: delayed[c]!, random });
      if (delay === undefined) throw new RangeError(`runContention: the backoff stopped at retry ${attempt}; every client must retry until its write succeeds`);
      retries[c] = attempt;
      previousDelay[c] = delay;
      delayed[c] = delayed[c]! + delay;
      arrival[c] = now + hop() + delay + hop();
    }
    sent[c] = order++;
    queue.push(c);
  }
  return { calls, writes, completionMs };
}

/** Options of {@link simulateContention}. */
export interface ContentionOptions {
  /** The strategies compared, in the order of the rows. Default all of {@link CONTENTION_STRATEGIES}. */
  readonly strategies?: readonly ContentionStrategy[];
  /** The numbers of clients, each a whole number >= 1. Default `[10, 20, 50, 100]`. */
  readonly clients?: readonly number[];
  /** Runs per strategy and number of clients, a whole number >= 1. Default 100. */
  readonly runs?: number;
  /** The seed every run's random source is derived from, with the strategy, the number of clients and the run. Default 1. */
  readonly seed?: number;
  /** The base delay `baseMs` of every strategy, in milliseconds. Default 5. */
  readonly baseMs?: number;
  /** The largest delay `capMs` of every strategy, in milliseconds. Default 2000. */
  readonly capMs?: number;
}

/** The means over the runs of one strategy with one number of clients. */
export interface ContentionRow {
  readonly strategy: ContentionStrategy;
  readonly clients: number;
  /** Mean requests the server received per run: reads plus writes. */
  readonly calls: number;
  /** Mean conditional writes per run. */
  readonly writes: number;
  /** Mean time until the last client's write succeeded, in milliseconds. */
  readonly completionMs: number;
}

/** What {@link simulateContention} measured: one row per strategy and number of clients, strategy by strategy. */
export interface ContentionResult {
  readonly rows: readonly ContentionRow[];
}

/**
 * Runs the contention model `runs` times for every strategy and number of
 * clients, each run with its own random source seeded from `seed`, the
 * strategy, the number of clients and the run: the same options give the
 * same rows on every run.
 */
export function simulateContention(options: ContentionOptions = {}): ContentionResult {
  const strategies = options.strategies ?? CONTENTION_STRATEGIES;
  const clientCounts = options.clients ?? [10, 20, 50, 100];
  const runs = options.runs ?? 100;
  const seed = options.seed ?? 1;
  const baseMs = options.baseMs ?? 5;
  const capMs = options.capMs ?? 2_000;
  checkWholeNumber('simulateContention', 'runs', runs, 1);
  if (!Number.isSafeInteger(seed)) throw new RangeError(`simulateContention: seed must be a whole number, got ${String(seed)}`);
  checkDelay('simulateContention', 'baseMs', baseMs);
  checkMax('simulateContention', 'capMs', capMs);
  for (const clients of clientCounts) checkWholeNumber('simulateContention', 'clients', clients, 1);
  for (const strategy of strategies) {
    if (!CONTENTION_STRATEGIES.includes(strategy)) throw new RangeError(`simulateContention: unknown strategy ${String(strategy)} (expected one of ${CONTENTION_STRATEGIES.join(', ')})`);
  }
  const rows: ContentionRow[] = [];
  for (const strategy of strategies) {
    const backoff = contentionBackoff(strategy, baseMs, capMs);
    for (const clients of clientCounts) {
      let calls = 0;
      let writes = 0;
      let completionMs = 0;
      for (let run = 0; run < runs; run++) {
        const result = runContention({ clients, backoff, random: seededRandom(runSeed(seed, strategy, clients, run)) });
        calls += result.calls;
        writes += result.writes;
        completionMs += result.completionMs;
      }
      rows.push({ strategy, clients, calls: calls / runs, writes: writes / runs, completionMs: completionMs / runs });
    }
  }
  return { rows };
}

/**
 * The seed of one run: a 32-bit FNV-1a hash of the seed, the strategy, the
 * number of clients and the run, so a point's runs do not depend on which
 * other strategies or numbers of clients are simulated.
 */
export function runSeed(seed: number, strategy: ContentionStrategy, clients: number, run: number): number {
  const text = `${seed}/${strategy}/${clients}/${run}`;
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  return hash >>> 0;
}
