import { describe, expect, it } from 'vitest';
import type { Backoff, BackoffStep } from '../../src/backoff/types.js';
import { CONTENTION_STRATEGIES, contentionBackoff, runContention, simulateContention, type ContentionStrategy } from '../../src/simulation/contention.js';
import { normalHop } from '../../src/simulation/network.js';
import { seededRandom } from '../../src/time/random.js';

const fixedHop = () => 10;

describe('normalHop', () => {
  it('draws |Normal(10, 2)| repeatably from the seeded source', () => {
    const draw = normalHop(seededRandom(3));
    const values = Array.from({ length: 20_000 }, draw);
    const mean = values.reduce((a, b) => a + b, 0) / values.length;
    const sd = Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / values.length);
    expect(mean).toBeGreaterThan(9.95);
    expect(mean).toBeLessThan(10.05);
    expect(sd).toBeGreaterThan(1.95);
    expect(sd).toBeLessThan(2.05);
    expect(Math.min(...values)).toBeGreaterThanOrEqual(0);
    const again = normalHop(seededRandom(3));
    expect(Array.from({ length: 20_000 }, again)).toEqual(values);
  });

  it('uses both values of a Box–Muller pair', () => {
    const random = seededRandom(11);
    const [u1, u2] = [random(), random()];
    const radius = Math.sqrt(-2 * Math.log(1 - u1));
    const draw = normalHop(seededRandom(11), 10, 2);
    expect(draw()).toBeCloseTo(Math.abs(10 + 2 * radius * Math.cos(2 * Math.PI * u2)), 12);
    expect(draw()).toBeCloseTo(Math.abs(10 + 2 * radius * Math.sin(2 * Math.PI * u2)), 12);
  });
});

describe('runContention: hand-computed runs', () => {
  it('one client reads and writes once: 2 calls, done after its 4 hops', () => {
    const hops = normalHop(seededRandom(42));
    const fourHops = hops() + hops() + hops() + hops();
    for (const strategy of CONTENTION_STRATEGIES) {
      const run = runContention({ clients: 1, backoff: contentionBackoff(strategy, 5, 2_000), random: seededRandom(42) });
      expect(run.calls).toBe(2);
      expect(run.writes).toBe(1);
      expect(run.completionMs).toBeCloseTo(fourHops, 9);
    }
  });

  it('two clients on a fixed 10 ms network: the second retries once after exactly its strategy\'s delay', () => {
    // Both reads arrive at 10 ms and read version 0; both writes arrive at 30 ms, the first wins.
    // The loser hears of it at 40 ms, waits d, reads at 50 + d, writes at 70 + d, hears of its success at 80 + d.
    const u = seededRandom(7)();
    const expected: Record<ContentionStrategy, number> = {
      none: 0,
      exponential: 10, // min(2000, 5 × 2^1)
      equal: 5 + 5 * u, // 10/2 + U(0, 10/2)
      full: 10 * u, // U(0, 10)
      decorrelated: 5 + (15 - 5) * u, // U(5, 3 × 5)
    };
    for (const strategy of CONTENTION_STRATEGIES) {
      const run = runContention({ clients: 2, backoff: contentionBackoff(strategy, 5, 2_000), random: seededRandom(7), hop: fixedHop });
      expect(run, strategy).toEqual({ calls: 6, writes: 3, completionMs: 80 + expected[strategy] });
    }
  });

  it('gives each client its own attempt count, previous delay and elapsed delay', () => {
    const steps: Omit<BackoffStep, 'random'>[] = [];
    const recording: Backoff = ({ attempt, previousDelayMs, elapsedMs }) => {
      steps.push({ attempt, previousDelayMs, elapsedMs });
      return attempt;
    };
    // Round 1: clients 1 and 2 lose to client 0 (writes at 30 ms) and wait 1 ms.
    // Round 2: both read at 51 ms and write at 71 ms; client 1 wins, client 2 waits 2 ms,
    // reads at 93 ms, writes at 113 ms and hears of its success at 123 ms.
    const run = runContention({ clients: 3, backoff: recording, random: seededRandom(1), hop: fixedHop });
    expect(steps).toEqual([
      { attempt: 1, previousDelayMs: undefined, elapsedMs: 0 },
      { attempt: 1, previousDelayMs: undefined, elapsedMs: 0 },
      { attempt: 2, previousDelayMs: 1, elapsedMs: 1 },
    ]);
    expect(run).toEqual({ calls: 12, writes: 6, completionMs: 123 });
  });

  it('builds the strategies from the capped exponential min(cap, base × 2^n)', () => {
    const step = (attempt: number, u = 0.5): BackoffStep => ({ attempt, previousDelayMs: undefined, elapsedMs: 0, random: () => u });
    const exponential = contentionBackoff('exponential', 5, 2_000);
    expect([1, 2, 3, 8, 9, 30].map((n) => exponential(step(n)))).toEqual([10, 20, 40, 1_280, 2_000, 2_000]);
    expect(contentionBackoff('none', 5, 2_000)(step(7))).toBe(0);
    expect(contentionBackoff('equal', 5, 2_000)(step(3, 0.5))).toBe(30);
    expect(contentionBackoff('full', 5, 2_000)(step(3, 0.5))).toBe(20);
    expect(contentionBackoff('decorrelated', 5, 2_000)({ ...step(4, 0.5), previousDelayMs: 100 })).toBe(152.5);
    expect(contentionBackoff('decorrelated', 5, 2_000)({ ...step(9, 0.9), previousDelayMs: 1_900 })).toBe(2_000);
  });

  it('refuses a backoff that stops', () => {
    expect(() => runContention({ clients: 2, backoff: () => undefined, random: seededRandom(1), hop: fixedHop })).toThrow(/stopped at retry 1/);
  });
});

describe('runContention: invariants', () => {
  it('every client succeeds exactly once, and every read is followed by one write', () => {
    for (const strategy of CONTENTION_STRATEGIES) {
      for (const seed of [1, 2, 3]) {
        for (const clients of [1, 2, 7, 30]) {
          const inner = contentionBackoff(strategy, 5, 2_000);
          let failures = 0;
          const counting: Backoff = (step) => {
            failures++;
            return inner(step);
          };
          const run = runContention({ clients, backoff: counting, random: seededRandom(seed) });
          expect(run.writes - failures).toBe(clients);
          expect(run.writes).toBeGreaterThanOrEqual(clients);
          expect(run.calls).toBe(2 * run.writes);
          expect(run.completionMs).toBeGreaterThan(0);
        }
      }
    }
  });
});

describe('simulateContention', () => {
  const small = { clients: [5, 15], runs: 4 } as const;

  it('gives the same rows for the same seed and different rows for another', () => {
    const first = simulateContention({ ...small, seed: 9 });
    expect(simulateContention({ ...small, seed: 9 })).toEqual(first);
    expect(first.rows.map((r) => [r.strategy, r.clients])).toEqual(CONTENTION_STRATEGIES.flatMap((s) => [[s, 5], [s, 15]]));
    const other = simulateContention({ ...small, seed: 10 });
    expect(other.rows.map((r) => r.completionMs)).not.toEqual(first.rows.map((r) => r.completionMs));
    for (const row of first.rows) expect(row.calls).toBe(2 * row.writes);
  });

  it('gives a point the same runs whichever other points are simulated', () => {
    const all = simulateContention({ ...small, seed: 4 });
    const alone = simulateContention({ strategies: ['full'], clients: [15], runs: 4, seed: 4 });
    expect(alone.rows).toEqual(all.rows.filter((r) => r.strategy === 'full' && r.clients === 15));
  });

  it('refuses bad options', () => {
    expect(() => simulateContention({ runs: 0 })).toThrow(RangeError);
    expect(() => simulateContention({ clients: [10, 2.5] })).toThrow(/clients/);
    expect(() => simulateContention({ strategies: ['linear' as ContentionStrategy] })).toThrow(/unknown strategy/);
    expect(() => simulateContention({ baseMs: -1 })).toThrow(/baseMs/);
    expect(() => simulateContention({ seed: 1.5 })).toThrow(/seed/);
  });

  it('reproduces the study at 50 clients: jitter cuts the calls, exponential finishes last, full and decorrelated are close', () => {
    const { rows } = simulateContention({ clients: [50], runs: 20, seed: 1 });
    const by = Object.fromEntries(rows.map((r) => [r.strategy, r])) as Record<ContentionStrategy, (typeof rows)[number]>;
    // Observed with seed 1: none 1374 calls, exponential 1244, equal 697, full 665, decorrelated 751.
    const unjittered = Math.min(by.none.calls, by.exponential.calls);
    for (const jittered of ['equal', 'full', 'decorrelated'] as const) expect(by[jittered].calls).toBeLessThan(0.7 * unjittered);
    // Observed: exponential 35.4 s; the others at most 4.2 s.
    for (const other of ['none', 'equal', 'full', 'decorrelated'] as const) expect(by.exponential.completionMs).toBeGreaterThan(5 * by[other].completionMs);
    // Observed: decorrelated / full is 1.13 for calls and 0.75 for completion time.
    expect(by.decorrelated.calls / by.full.calls).toBeGreaterThan(2 / 3);
    expect(by.decorrelated.calls / by.full.calls).toBeLessThan(1.5);
    expect(by.decorrelated.completionMs / by.full.completionMs).toBeGreaterThan(2 / 3);
    expect(by.decorrelated.completionMs / by.full.completionMs).toBeLessThan(1.5);
  });
});
