import { expect } from 'vitest';
import { realDriver } from '../../bench/outage/real-driver.js';
import { runOutage, type OutageScenario, type OutageSetting } from '../../src/simulation/outage.js';
import { systemClock } from '../../src/time/clock.js';
import type { Transport } from '../../src/transport/types.js';

/** A short real-time outage: 2 s of normal load, 6 s down, 8 s after, with all three flow-control mechanisms on. */
const SCENARIO: OutageScenario & OutageSetting = {
  capacityPerSec: 100,
  loadShare: 0.8,
  warmupSec: 2,
  outageSec: 6,
  afterSec: 8,
  concurrency: 8,
  flowControl: { consumerBackoff: { maxMs: 4_000 }, rateLimit: { consecutiveFailures: 20, waitMs: 500 }, retryBudget: true },
};

/**
 * Runs the outage on a real transport and checks that the dependency saw a
 * trickle of probes, not a flood of retries, and that every message was
 * handled after it.
 */
export async function expectOutageRidden(transport: Transport, queue: string, errorQueue: string): Promise<void> {
  const result = await runOutage(transport, realDriver(systemClock), { ...SCENARIO, recoverability: { errorQueue } }, queue);
  expect(result.outageCalls).toBeGreaterThan(0);
  expect(result.peakLoadRatio).toBeLessThanOrEqual(1.1);
  expect(result.deadLettered).toBe(0);
  expect(result.handled).toBe(result.sent);
}
