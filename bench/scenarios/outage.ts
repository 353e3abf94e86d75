/**
 * `npm run bench -- outage`: a downstream with a fixed capacity, a steady
 * load at 80 % of it, a full outage, then recovery. Compares no flow control,
 * consumer backoff, rate limiting, the retry budget and all three together,
 * in simulated time on the memory transport, then runs the combined setting
 * once in real time on SQLite.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OUTAGE_SETTINGS, runOutage, simulateOutage, type OutageResult, type OutageScenario } from '../../src/simulation/outage.js';
import { systemClock } from '../../src/time/clock.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { realDriver } from '../outage/real-driver.js';
import { printJson, printTable, roundTo } from '../report.js';

const simulated: OutageScenario = { capacityPerSec: 100, loadShare: 0.8, warmupSec: 30, outageSec: 90, afterSec: 900, concurrency: 8 };
const real: OutageScenario = { capacityPerSec: 100, loadShare: 0.8, warmupSec: 5, outageSec: 15, afterSec: 120, concurrency: 8 };

export async function run(): Promise<void> {
  const results: Record<string, OutageResult> = {};
  for (const [name, setting] of Object.entries(OUTAGE_SETTINGS)) results[name] = await simulateOutage(simulated, setting);
  const dir = mkdtempSync(join(tmpdir(), 'redeliver-outage-'));
  const sqlite = new SqliteTransport({ path: join(dir, 'outage.db') });
  const realCombined = await runOutage(sqlite, realDriver(systemClock), { ...real, ...OUTAGE_SETTINGS.combined });
  await sqlite.close();
  rmSync(dir, { recursive: true, force: true });

  const row = (name: string, r: OutageResult) => ({
    setting: name,
    peakLoadRatio: roundTo(r.peakLoadRatio, 2),
    meanLoadRatio: roundTo(r.meanLoadRatio, 2),
    drainSeconds: roundTo(r.drainSeconds, 2),
    idealDrainSeconds: roundTo(r.idealDrainSeconds, 2),
    drainRatio: roundTo(r.drainSeconds / r.idealDrainSeconds, 2),
    deadLettered: r.deadLettered,
    handled: r.handled,
  });
  printTable(
    `simulated: capacity ${simulated.capacityPerSec}/s, load ${simulated.loadShare * 100} %, outage ${simulated.outageSec} s (memory transport, fake clock)`,
    Object.entries(results).map(([name, r]) => row(name, r)),
  );
  printTable(`real time on SQLite: capacity ${real.capacityPerSec}/s, load ${real.loadShare * 100} %, outage ${real.outageSec} s`, [row('combined', realCombined)]);
  printJson({
    scenario: 'outage',
    simulated: Object.fromEntries(
      Object.entries(results).map(([name, r]) => [name, { peakLoadRatio: roundTo(r.peakLoadRatio, 2), drainSeconds: roundTo(r.drainSeconds, 2), deadLettered: r.deadLettered }]),
    ),
    idealDrainSeconds: roundTo(results['none']!.idealDrainSeconds, 2),
    sqliteCombined: { peakLoadRatio: roundTo(realCombined.peakLoadRatio, 2), drainSeconds: roundTo(realCombined.drainSeconds, 2), idealDrainSeconds: roundTo(realCombined.idealDrainSeconds, 2), deadLettered: realCombined.deadLettered },
  });
}

