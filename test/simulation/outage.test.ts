import { describe, expect, it } from 'vitest';
import { exponential, fullJitter } from '../../src/backoff/index.js';
import { outageChart } from '../../src/simulation/outage-chart.js';
import { checkOutageScenario, OUTAGE_SETTINGS, simulateOutage, type OutageResult, type OutageScenario, type OutageSetting } from '../../src/simulation/outage.js';

/**
 * A small outage: 16 messages/s on a downstream serving 20/s, down for 90 s.
 * The default recoverability retries for 60 s (delayed retries of 10, 20 and
 * 30 s), so without flow control the messages of the outage's first 30 s run
 * out of retries while it is still down: 16 × 30 = 480 of them.
 */
const scenario: OutageScenario = { capacityPerSec: 20, loadShare: 0.8, warmupSec: 5, outageSec: 90, afterSec: 480, concurrency: 4 };
const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

function expectNothingLost(result: OutageResult): void {
  expect(result.handled + result.deadLettered).toBe(result.sent);
  expect(sum(result.perSecond.handled)).toBe(result.handled);
  expect(sum(result.perSecond.deadLettered)).toBe(result.deadLettered);
  expect(result.perSecond.calls.length).toBe(result.perSecond.handled.length);
  expect(result.perSecond.calls.length).toBe(result.perSecond.deadLettered.length);
}

describe('the outage simulation', () => {
  it('puts far more load on the downstream without flow control than with consumer backoff or the retry budget, and loses nothing', async () => {
    const none = await simulateOutage(scenario, OUTAGE_SETTINGS.none);
    const consumerBackoff = await simulateOutage(scenario, OUTAGE_SETTINGS.consumerBackoff);
    const retryBudget = await simulateOutage(scenario, OUTAGE_SETTINGS.retryBudget);

    // Six attempts per message at concurrency 4: 24× the normal 16 calls/s over every 5 s of the outage.
    expect(none.peakLoadRatio).toBeCloseTo(24, 6);
    expect(none.meanLoadRatio).toBeGreaterThan(15);
    expect(none.deadLettered).toBe(480);
    // The budget lets first attempts through and about 10 % more as retries, plus 1/s.
    expect(retryBudget.peakLoadRatio).toBeGreaterThan(1);
    expect(retryBudget.peakLoadRatio).toBeLessThan(1.4);
    expect(retryBudget.deadLettered).toBe(0);
    // Consumer backoff stops consuming and probes one message at a time.
    expect(consumerBackoff.peakLoadRatio).toBeLessThan(0.5);
    expect(consumerBackoff.meanLoadRatio).toBeLessThan(0.1);
    expect(consumerBackoff.deadLettered).toBe(0);
    expect(none.peakLoadRatio).toBeGreaterThan(10 * retryBudget.peakLoadRatio);
    expect(retryBudget.peakLoadRatio).toBeGreaterThan(consumerBackoff.peakLoadRatio);

    for (const result of [none, consumerBackoff, retryBudget]) {
      expectNothingLost(result);
      expect(result.sent).toBe(16 * (5 + 90 + 480));
      expect(result.idealDrainSeconds).toBe(360);
    }
    // The retry budget drains at the pace the spare capacity allows; consumer backoff is still backing off when the downstream recovers.
    expect(retryBudget.drainSeconds).toBeLessThanOrEqual(360);
    expect(consumerBackoff.drainSeconds).toBeGreaterThan(400);
  });

  it('counts the calls of every second: the normal load before the outage, the retries during it, capacity while draining', async () => {
    const none = await simulateOutage({ ...scenario, afterSec: 60 }, OUTAGE_SETTINGS.none);
    const calls = none.perSecond.calls;
    expect(calls.slice(0, 5)).toEqual([16, 16, 16, 16, 16]);
    expect(sum(calls.slice(5, 95))).toBe(none.outageCalls);
    // Right after recovery the backlog is served at the downstream's capacity.
    expect(calls.slice(100, 150).every((n) => n === 20)).toBe(true);
    expect(sum(calls)).toBeGreaterThan(none.sent);
  });

  it('with no retries at all, every message sent during the outage is dead-lettered at once', async () => {
    const result = await simulateOutage({ ...scenario, outageSec: 30, afterSec: 120 }, { recoverability: { immediateRetries: 0, delayedRetries: 0 } });
    expect(result.deadLettered).toBe(16 * 30);
    expect(result.peakLoadRatio).toBe(1);
    expectNothingLost(result);
  });

  it('gives the same result for the same seed, and another for another seed, when the policy draws random numbers', async () => {
    const jittered: OutageSetting = {
      recoverability: { immediateRetries: 1, delayedRetries: 4, delayedBackoff: fullJitter(exponential(1_000, 2, 30_000)) },
      flowControl: { consumerBackoff: { strategy: 'full-jitter' } },
    };
    const short = { ...scenario, outageSec: 40, afterSec: 180, seed: 7 };
    const first = await simulateOutage(short, jittered);
    const again = await simulateOutage(short, jittered);
    const other = await simulateOutage({ ...short, seed: 8 }, jittered);
    expect(again).toEqual(first);
    expect(other.perSecond.calls).not.toEqual(first.perSecond.calls);
    expectNothingLost(first);
    expectNothingLost(other);
  });

  it('refuses a scenario out of range, naming the input', () => {
    expect(() => checkOutageScenario({ ...scenario, capacityPerSec: 0 })).toThrow(/capacity must be above 0/);
    expect(() => checkOutageScenario({ ...scenario, loadShare: 1 })).toThrow(/load share must be between 0 and 1/);
    expect(() => checkOutageScenario({ ...scenario, outageSec: 0 })).toThrow(/outage must be a whole number of seconds, 1 or more/);
    expect(() => checkOutageScenario({ ...scenario, warmupSec: 1.5 })).toThrow(/warm-up must be a whole number/);
    expect(() => checkOutageScenario({ ...scenario, concurrency: 0 })).toThrow(/concurrency/);
    expect(() => checkOutageScenario(scenario)).not.toThrow();
  });

  it('draws the load over time, one line per setting, and a panel cut off at 3× the normal load when a line goes above it', () => {
    const flat = Array.from({ length: 600 }, () => 16);
    const spike = flat.map((n, i) => (i >= 5 && i < 95 ? 384 : n));
    const svg = outageChart(scenario, [
      { setting: 'none', callsPerSecond: spike },
      { setting: 'retryBudget', callsPerSecond: flat },
    ]);
    expect(svg).toContain('outage from 5 s to 95 s');
    expect(svg).toContain('calls per second (mean over 2 s)');
    expect(svg).toContain('cut off at 3× the normal load');
    expect(svg).toContain('>retryBudget<');
    expect(outageChart(scenario, [{ setting: 'retryBudget', callsPerSecond: flat }])).not.toContain('cut off');
  });
});
