/**
 * The outage model: a downstream with a fixed capacity, a steady load at a
 * share of it, a full outage, then recovery. A real endpoint (the library's
 * own recoverability, flow-control and retry-budget code) consumes the load
 * and calls the downstream for each message. Measures the downstream's load
 * during the outage, the time to drain the backlog after recovery, and what
 * ended in the error queue.
 *
 * {@link simulateOutage} runs it in simulated time (memory transport on a
 * {@link FakeClock}, seeded random source): the same inputs give the same
 * result, as fast as the machine allows. {@link runOutage} runs it on any
 * transport and {@link Driver}, for real-time runs on a real broker.
 */
import { resolveRecoverabilityConfig } from '../endpoint/config.js';
import { Endpoint } from '../endpoint/endpoint.js';
import type { RecoverabilityOptions } from '../endpoint/options.js';
import { resolveFlowConfig } from '../flow/config.js';
import type { FlowControlOptions } from '../flow/options.js';
import { Producer } from '../producer/producer.js';
import type { Clock } from '../time/clock.js';
import { FakeClock } from '../time/fake-clock.js';
import { seededRandom } from '../time/random.js';
import type { Transport } from '../transport/types.js';
import { MemoryTransport } from '../transports/memory/index.js';

/** The world an endpoint runs in: the downstream, its outage, and the load. */
export interface OutageScenario {
  /** Calls per second the downstream serves (above 0). Required. */
  capacityPerSec: number;
  /** Steady load as a share of capacity, between 0 and 1 exclusive. Required. */
  loadShare: number;
  /** Whole seconds of normal running before the outage (0 or more). Required. */
  warmupSec: number;
  /** Whole seconds the downstream is down (1 or more). Required. */
  outageSec: number;
  /** Whole seconds after the outage during which the load keeps arriving (0 or more). Required. */
  afterSec: number;
  /** Messages the endpoint handles at once (1 or more). Required. */
  concurrency: number;
  /** Seed of the endpoint's random source (jitter, full-jitter consumer backoff). Default 11. */
  seed?: number;
}

/** What is compared through the outage: the endpoint's policy. */
export interface OutageSetting {
  /** As the endpoint's `recoverability`. Default: the endpoint's defaults. */
  recoverability?: RecoverabilityOptions;
  /** As the endpoint's `flowControl`. Default: all off. */
  flowControl?: FlowControlOptions;
}

/** The settings every comparison can pick by name: the endpoint's default recoverability with each kind of flow control. */
export const OUTAGE_SETTINGS = {
  /** No flow control. */
  none: {},
  /** NSQ consumer backoff with its defaults. */
  consumerBackoff: { flowControl: { consumerBackoff: true } },
  /** Rate limiting after 20 consecutive failures, one attempt a second while limited. */
  rateLimit: { flowControl: { rateLimit: { consecutiveFailures: 20, waitMs: 1_000 } } },
  /** The retry budget with its defaults. */
  retryBudget: { flowControl: { retryBudget: true } },
  /** All three together. */
  combined: { flowControl: { consumerBackoff: true, rateLimit: { consecutiveFailures: 20, waitMs: 1_000 }, retryBudget: true } },
} as const satisfies Record<string, OutageSetting>;

/** The name of a built-in setting. */
export type OutageSettingName = keyof typeof OUTAGE_SETTINGS;

/** The width of the window the peak load is measured over, in seconds. */
export const PEAK_WINDOW_SEC = 5;

export interface OutageResult {
  /** Highest mean downstream calls per second over any 5 s window of the outage (the whole outage when shorter), over the normal rate. */
  peakLoadRatio: number;
  /** Mean downstream calls per second during the outage, over the normal rate. */
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
  /**
   * Counts per second of the run, from its start to its end (index = second):
   * downstream calls, messages handled and messages dead-lettered.
   */
  perSecond: { calls: number[]; handled: number[]; deadLettered: number[] };
}

/** Drives time: lets the system run until a condition holds. */
export interface Driver {
  readonly clock: Clock;
  /** Runs until `done()` holds or `limitMs` pass; resolves true when done. */
  runUntil(done: () => boolean, limitMs: number): Promise<boolean>;
}

/** Drives a FakeClock: simulated time, as fast as the machine allows. */
export function fakeDriver(clock: FakeClock): Driver {
  return { clock, runUntil: (done, limitMs) => clock.runUntil(done, limitMs) };
}

/** Counts events per whole second since a start time. */
class PerSecond {
  readonly counts: number[] = [];

  constructor(
    private readonly clock: Clock,
    private readonly start: number,
  ) {}

  add(): void {
    const second = Math.floor((this.clock.now() - this.start) / 1000);
    this.counts[second] = (this.counts[second] ?? 0) + 1;
  }

  /** The counts of the first `seconds` seconds, 0 where nothing happened; what came later is counted in the last one. */
  upTo(seconds: number): number[] {
    const counts = Array.from({ length: seconds }, (_, i) => this.counts[i] ?? 0);
    for (let i = seconds; i < this.counts.length; i++) counts[seconds - 1]! += this.counts[i] ?? 0;
    return counts;
  }
}

/** A downstream served by one worker: calls queue up and take 1/capacity s each; during the outage they fail at once. */
class Downstream {
  constructor(
    private readonly clock: Clock,
    readonly calls: PerSecond,
    private readonly capacityPerSec: number,
    private readonly outage: { from: number; to: number },
  ) {}

  #busyUntil = 0;
  /** What every call during the outage throws (one error for all: a new one per call would only cost stack traces). */
  readonly #refused = new Error('ECONNREFUSED downstream is down');

  async call(): Promise<void> {
    const now = this.clock.now();
    this.calls.add();
    if (now >= this.outage.from && now < this.outage.to) throw this.#refused;
    const serviceMs = 1000 / this.capacityPerSec;
    this.#busyUntil = Math.max(now, this.#busyUntil) + serviceMs;
    await this.clock.sleep(this.#busyUntil - now);
  }
}

/** Throws a RangeError naming the first input of `scenario` out of range. */
export function checkOutageScenario(scenario: OutageScenario): void {
  const { capacityPerSec, loadShare, warmupSec, outageSec, afterSec, concurrency } = scenario;
  if (!(Number.isFinite(capacityPerSec) && capacityPerSec > 0)) throw new RangeError(`capacity must be above 0 calls per second, not ${capacityPerSec}`);
  if (!(loadShare > 0 && loadShare < 1)) throw new RangeError(`load share must be between 0 and 1 exclusive, not ${loadShare}`);
  if (!(Number.isInteger(warmupSec) && warmupSec >= 0)) throw new RangeError(`warm-up must be a whole number of seconds, 0 or more, not ${warmupSec}`);
  if (!(Number.isInteger(outageSec) && outageSec >= 1)) throw new RangeError(`outage must be a whole number of seconds, 1 or more, not ${outageSec}`);
  if (!(Number.isInteger(afterSec) && afterSec >= 0)) throw new RangeError(`time after the outage must be a whole number of seconds, 0 or more, not ${afterSec}`);
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`concurrency must be a whole number, 1 or more, not ${concurrency}`);
}

/** Throws the endpoint's own `OptionError` when `setting` holds an option the endpoint would refuse. */
export function checkOutageSetting(setting: OutageSetting): void {
  resolveRecoverabilityConfig(setting.recoverability);
  resolveFlowConfig(setting.flowControl);
}

/**
 * Runs the outage on `transport`, with `driver` moving time: sends the load
 * to `queue` and consumes it with an endpoint configured by `run`, until the
 * load has stopped and every message is handled or dead-lettered (or an
 * hour past the end of the load).
 */
export async function runOutage(transport: Transport, driver: Driver, run: OutageScenario & OutageSetting, queue = 'outage'): Promise<OutageResult> {
  checkOutageScenario(run);
  const { clock } = driver;
  const start = clock.now();
  const outage = { from: start + run.warmupSec * 1000, to: start + (run.warmupSec + run.outageSec) * 1000 };
  const downstream = new Downstream(clock, new PerSecond(clock, start), run.capacityPerSec, outage);
  const handledPerSecond = new PerSecond(clock, start);
  const deadLetteredPerSecond = new PerSecond(clock, start);
  const endpoint = new Endpoint<number>({
    name: queue,
    transport,
    clock,
    random: seededRandom(run.seed ?? 11),
    concurrency: run.concurrency,
    recoverability: run.recoverability,
    flowControl: run.flowControl,
    handler: () => downstream.call(),
  });
  endpoint.on('handled', () => handledPerSecond.add());
  endpoint.on('deadLettered', () => deadLetteredPerSecond.add());
  const producer = new Producer<number>({ transport });
  await endpoint.start();

  const ratePerSec = run.capacityPerSec * run.loadShare;
  const tickMs = 100;
  const perTick = ratePerSec * (tickMs / 1000);
  const endOfLoad = outage.to + run.afterSec * 1000;
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
      if (drainedAt === undefined && clock.now() > outage.to && sent - settled() <= Math.ceil(perTick) + run.concurrency) drainedAt = clock.now();
    }
    producing = false;
  })();

  const finished = () => !producing && settled() >= sent;
  await driver.runUntil(finished, (run.warmupSec + run.outageSec + run.afterSec) * 1000 + 3_600_000);
  await producerLoop;
  drainedAt ??= clock.now();
  await endpoint.stop();
  // Every second the run took, the last one possibly partial.
  const seconds = Math.max(1, Math.ceil((clock.now() - start) / 1000));

  const calls = downstream.calls.upTo(seconds);
  const outageSeconds = calls.slice(run.warmupSec, run.warmupSec + run.outageSec);
  const window = Math.min(PEAK_WINDOW_SEC, run.outageSec);
  let peak = 0;
  for (let i = 0; i + window <= outageSeconds.length; i++) {
    peak = Math.max(peak, outageSeconds.slice(i, i + window).reduce((a, b) => a + b, 0) / window);
  }
  const outageCalls = outageSeconds.reduce((a, b) => a + b, 0);
  const backlog = ratePerSec * run.outageSec;
  const spare = run.capacityPerSec - ratePerSec;
  return {
    peakLoadRatio: peak / ratePerSec,
    meanLoadRatio: outageCalls / run.outageSec / ratePerSec,
    drainSeconds: (drainedAt - outage.to) / 1000,
    idealDrainSeconds: backlog / spare,
    deadLettered: endpoint.stats.deadLettered,
    handled: endpoint.stats.handled,
    sent,
    outageCalls,
    perSecond: { calls, handled: handledPerSecond.upTo(seconds), deadLettered: deadLetteredPerSecond.upTo(seconds) },
  };
}

/**
 * Runs the outage in simulated time: the memory transport on a
 * {@link FakeClock}, the endpoint's random source seeded. Deterministic: the
 * same scenario and setting give the same result.
 */
export async function simulateOutage(scenario: OutageScenario, setting: OutageSetting = {}): Promise<OutageResult> {
  const clock = new FakeClock(0);
  const transport = new MemoryTransport({ clock });
  try {
    return await runOutage(transport, fakeDriver(clock), { ...scenario, ...setting });
  } finally {
    await transport.close();
  }
}
