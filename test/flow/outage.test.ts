import { describe, expect, it } from 'vitest';
import { fakeDriver, runOutage, type OutageScenario, type OutageSetting } from '../../src/simulation/outage.js';
import { HEADER } from '../../src/headers/names.js';
import { FakeClock } from '../../src/time/fake-clock.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { drain } from '../support/engine-harness.js';

const scenario: OutageScenario = {
  capacityPerSec: 20,
  loadShare: 0.8,
  warmupSec: 10,
  outageSec: 90,
  afterSec: 600,
  concurrency: 4,
};

async function simulate(flowControl: OutageSetting['flowControl']) {
  const clock = new FakeClock(0);
  const transport = new MemoryTransport({ clock });
  const result = await runOutage(transport, fakeDriver(clock), { ...scenario, flowControl });
  const dead = await drain(transport, 'error', clock, result.deadLettered);
  await transport.close();
  return { result, dead };
}

describe('flow control through a downstream outage (fake clock, memory transport)', () => {
  it('without flow control the downstream is hammered and messages die in the outage', async () => {
    const { result, dead } = await simulate(undefined);
    expect(result.peakLoadRatio).toBeGreaterThan(3);
    expect(result.deadLettered).toBeGreaterThan(0);
    expect(dead.every((d) => d.headers[HEADER.failureReason] === 'retries-exhausted')).toBe(true);
    expect(result.handled + result.deadLettered).toBe(result.sent);
  });

  it('with consumer backoff, rate limiting and the retry budget the downstream sees at most 1.1× its normal load, nothing dies, and the backlog drains', async () => {
    const { result } = await simulate({
      consumerBackoff: true,
      rateLimit: { consecutiveFailures: 20, waitMs: 1_000 },
      retryBudget: true,
    });
    expect(result.peakLoadRatio).toBeLessThanOrEqual(1.1);
    expect(result.deadLettered).toBe(0);
    expect(result.handled).toBe(result.sent);
    expect(result.drainSeconds).toBeLessThanOrEqual(1.5 * result.idealDrainSeconds);
  });

  it('consumer backoff alone stops consuming during the outage and probes one message at a time', async () => {
    const clock = new FakeClock(0);
    const transport = new MemoryTransport({ clock });
    const result = await runOutage(transport, fakeDriver(clock), { ...scenario, flowControl: { consumerBackoff: true } });
    expect(result.meanLoadRatio).toBeLessThan(0.5);
    expect(result.deadLettered).toBe(0);
    await transport.close();
  });
});
