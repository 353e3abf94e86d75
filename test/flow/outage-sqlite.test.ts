import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { realDriver, runOutage } from '../../bench/outage/simulation.js';
import { systemClock } from '../../src/time/clock.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';

describe('flow control through a real outage on SQLite', () => {
  it('keeps the dependency near its normal load during the outage and handles every message after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'redeliver-flow-'));
    const transport = new SqliteTransport({ path: join(dir, 'flow.db') });
    try {
      const result = await runOutage(transport, realDriver(systemClock), {
        capacityPerSec: 100,
        loadShare: 0.8,
        warmupSec: 2,
        outageSec: 6,
        afterSec: 8,
        concurrency: 8,
        flowControl: { consumerBackoff: { maxMs: 4_000 }, rateLimit: { consecutiveFailures: 20, waitMs: 500 }, retryBudget: true },
      });
      // During the outage the dependency sees a trickle of probes, not a flood of retries.
      expect(result.outageCalls).toBeGreaterThan(0);
      expect(result.peakLoadRatio).toBeLessThanOrEqual(1.1);
      expect(result.deadLettered).toBe(0);
      expect(result.handled).toBe(result.sent);
    } finally {
      await transport.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
