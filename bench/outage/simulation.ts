/**
 * An outage scenario: a downstream with a fixed capacity, a steady load at a
 * share of it, a full outage, then recovery. Runs an endpoint against it and
 * measures the downstream's load during the outage, the time to drain the
 * backlog after recovery, and what ended in the error queue.
 */
import { Endpoint } from '../../src/endpoint/endpoint.js';
import type { FlowControlOptions } from '../../src/flow/options.js';
import type { RecoverabilityOptions } from '../../src/endpoint/options.js';
import { Producer } from '../../src/producer/producer.js';
import type { Clock } from '../../src/time/clock.js';
import type { FakeClock } from '../../src/time/fake-clock.js';
import { seededRandom } from '../../src/time/random.js';
import type { Transport } from '../../src/transport/types.js';

export interface OutageScenario {
  /** Calls per second the downstream serves. */
  capacityPerSec: number;
  /** Steady load as a share of capacity. */
  loadShare: number;
  /** Seconds of normal running before the outage. */
  warmupSec: number;
  /** Seconds the downstream is down. */
  outageSec: number;
  /** Seconds after the outage during which the load keeps arriving. */
  afterSec: number;
  /** Endpoint concurrency. */
  concurrency: number;
  recoverability?: RecoverabilityOptions;
  flowControl?: FlowControlOptions;
}

export interface OutageResult {
  /** Highest downstream calls per second in any 5 s window of the outage, over the baseline rate. */
  peakLoadRatio: number;
  /** Mean downstream calls per second during the outage, over the baseline rate. */
  meanLoadRatio: number;
  /** Seconds from recovery until the backlog is empty. */
  drainSeconds: number;
  /** The drain time the spare capacity allows: backlog ÷ (capacity − load). */
  idealDrainSeconds: number;
  deadLettered: number;
  handled: number;
  sent: number;
  /** Downstream calls during the outage. */
  outageCalls: number;
}

/** Drives time: waits for `ms` and lets the system run, or reports whether `done` holds within `ms`. */
export interface Driver {
  readonly clock: Clock;
  /** Runs until `done()` holds or `limitMs` pass; resolves true when done. */
  runUntil(done: () => boolean, limitMs: number): Promise<boolean>;
}

/** Drives a FakeClock: simulated time, as fast as the machine allows. */
export function fakeDriver(clock: FakeClock): Driver {
  return { clock, runUntil: (done, limitMs) => clock.runUntil(done, limitMs) };
}

/** Real time: polls `done` every 50 ms. */
export function realDriver(clock: Clock): Driver {
  return {
    clock,
    async runUntil(done, limitMs) {
      const end = clock.now() + limitMs;
      while (!done()) {
        if (clock.now() > end) return false;
        await new Promise((r) => setTimeout(r, 50));
      }
      return true;
    },
  };
}

/** A downstream served by one worker: calls queue up and take 1/capacity s each; during the outage they fail at once. */
class Downstream {
  readonly callsPerSecond = new Map<number, number>();
  #busyUntil = 0;

  constructor(
    private readonly clock: Clock,
    private readonly start: number,
    private readonly capacityPerSec: number,
    private readonly outage: { from: number; to: number },
  ) {}

  async call(): Promise<void> {
    const now = this.clock.now();
    const second = Math.floor((now - this.start) / 1000);
    this.callsPerSecond.set(second, (this.callsPerSecond.get(second) ?? 0) + 1);
    if (now >= this.outage.from && now < this.outage.to) throw new Error('ECONNREFUSED downstream is down');
    const serviceMs = 1000 / this.capacityPerSec;
    this.#busyUntil = Math.max(now, this.#busyUntil) + serviceMs;
    await this.clock.sleep(this.#busyUntil - now);
  }
}

export async function runOutage(transport: Transport, driver: Driver, scenario: OutageScenario, queue = 'outage'): Promise<OutageResult> {
  const { clock } = driver;
  const start = clock.now();
  const outage = { from: start + scenario.warmupSec * 1000, to: start + (scenario.warmupSec + scenario.outageSec) * 1000 };
  const downstream = new Downstream(clock, start, scenario.capacityPerSec, outage);
  const endpoint = new Endpoint<number>({
    name: queue,
    transport,
    clock,
    random: seededRandom(11),
    concurrency: scenario.concurrency,
    recoverability: scenario.recoverability,
    flowControl: scenario.flowControl,
    handler: () => downstream.call(),
  });
  const producer = new Producer<number>({ transport });
  await endpoint.start();

  const ratePerSec = scenario.capacityPerSec * scenario.loadShare;
  const tickMs = 100;
  const perTick = ratePerSec * (tickMs / 1000);
  const endOfLoad = outage.to + scenario.afterSec * 1000;
  let sent = 0;
  let owed = 0;
  let producing = true;
  let drainedAt: number | undefined;
  const settled = () => endpoint.stats.handled + endpoint.stats.deadLettered;
  const producerLoop = (async () => {
    while (clock.now() < endOfLoad) {
      owed += perTick;
      while (owed >= 1) {
        await producer.send(queue, sent, { id: `m${sent}` });
        sent++;
        owed--;
      }
      await clock.sleep(tickMs);
      // The backlog is drained when no more than one tick's arrivals and the in-flight messages wait.
      if (drainedAt === undefined && clock.now() > outage.to && sent - settled() <= Math.ceil(perTick) + scenario.concurrency) drainedAt = clock.now();
    }
    producing = false;
  })();

  const finished = () => !producing && settled() >= sent;
  await driver.runUntil(finished, (scenario.warmupSec + scenario.outageSec + scenario.afterSec) * 1000 + 3_600_000);
  await producerLoop;
  drainedAt ??= clock.now();
  await endpoint.stop();

  const baseline = ratePerSec;
  const outageSeconds: number[] = [];
  for (let s = scenario.warmupSec; s < scenario.warmupSec + scenario.outageSec; s++) outageSeconds.push(downstream.callsPerSecond.get(s) ?? 0);
  let peak = 0;
  for (let i = 0; i + 5 <= outageSeconds.length; i++) {
    peak = Math.max(peak, outageSeconds.slice(i, i + 5).reduce((a, b) => a + b, 0) / 5);
  }
  const outageCalls = outageSeconds.reduce((a, b) => a + b, 0);
  const backlog = ratePerSec * scenario.outageSec;
  const spare = scenario.capacityPerSec - ratePerSec;
  return {
    peakLoadRatio: peak / baseline,
    meanLoadRatio: outageCalls / scenario.outageSec / baseline,
    drainSeconds: (drainedAt - outage.to) / 1000,
    idealDrainSeconds: backlog / spare,
    deadLettered: endpoint.stats.deadLettered,
    handled: endpoint.stats.handled,
    sent,
    outageCalls,
  };
}
