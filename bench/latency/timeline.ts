/**
 * The two ways `npm run bench -- latency` drives a side: a closed loop that
 * finds its most messages per second, and a fixed-rate timeline that
 * measures send-to-handled latency without coordinated omission.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { within } from '../redis/workload.js';
import { stampBody, type Rig, type Stamp } from './rig.js';

/** Handles the stamps of the round under way; the sides call it from their handlers. */
export class Rounds {
  #current: RoundListener | undefined;
  /** Stamps of no round under way (a late duplicate, a warm-up leftover). */
  stray = 0;

  begin(recorder: RoundListener): void {
    this.#current = recorder;
  }

  end(): void {
    this.#current = undefined;
  }

  readonly onHandled = (stamp: Stamp, handledAt: number): void => {
    const current = this.#current;
    if (current === undefined || current.round !== stamp.r) this.stray++;
    else current.handled(stamp, handledAt);
  };
}

/** The messages of one round, as they are handled. */
export interface RoundListener {
  readonly round: number;
  handled(stamp: Stamp, handledAt: number): void;
}

/** What one round saw of each message: handled once, twice, never. */
export class RoundRecorder implements RoundListener {
  readonly #seen: Uint8Array;
  /** Handled at - intended send time, per message, ms. */
  readonly fromIntended: Float64Array;
  /** Handled at - the send call, per message, ms. */
  readonly fromSent: Float64Array;
  #left: number;
  duplicates = 0;
  #resolve!: () => void;
  /** Resolves once every message was handled at least once. */
  readonly done: Promise<void>;

  constructor(
    readonly round: number,
    readonly count: number,
  ) {
    this.#seen = new Uint8Array(count);
    this.fromIntended = new Float64Array(count);
    this.fromSent = new Float64Array(count);
    this.#left = count;
    this.done = new Promise<void>((resolve) => (this.#resolve = resolve));
    if (count === 0) this.#resolve();
  }

  handled(stamp: Stamp, handledAt: number): void {
    if (this.#seen[stamp.i] === 1) {
      this.duplicates++;
      return;
    }
    this.#seen[stamp.i] = 1;
    this.fromIntended[stamp.i] = handledAt - stamp.t;
    this.fromSent[stamp.i] = handledAt - stamp.s;
    if (--this.#left === 0) this.#resolve();
  }

  get missing(): number {
    return this.#left;
  }
}

/** One fixed-rate round of one side. */
export interface RoundResult {
  readonly round: number;
  /** Latency from the intended send time of each measured message (warm-up left out), ms. */
  readonly fromIntended: readonly number[];
  /** Latency from the send call of each measured message, ms. */
  readonly fromSent: readonly number[];
  readonly sent: number;
  readonly duplicates: number;
  /** The most sends the side's client had in flight at once. */
  readonly maxSendsInFlight: number;
  /** How far behind its timeline the sender ever fell when it woke, ms. */
  readonly maxSenderLagMs: number;
  /** User + system CPU time of this process over the round, per message, microseconds (the broker's own CPU is not in it). */
  readonly cpuUsPerMessage: number;
  /** The p99 of this process's event-loop delay over the round, ms: how long a ready callback waited for the loop. */
  readonly loopDelayP99Ms: number;
}

/**
 * Sends `rate` messages per second for `warmupMs + measureMs`, each at its
 * place on a timeline fixed up front (message `i` at `start + i / rate`),
 * never waiting for a send to settle before the next is due: a slow send or
 * a slow consumer cannot hold the next sends back, and each message's
 * latency counts from when it should have gone out. Waits for every message
 * to be handled (failing the round after `drainTimeoutMs`); the first
 * `warmupMs` of messages are left out of the figures.
 */
export async function fixedRateRound(
  rig: Rig,
  rounds: Rounds,
  round: number,
  rate: number,
  warmupMs: number,
  measureMs: number,
  payload: string,
  drainTimeoutMs: number,
): Promise<RoundResult> {
  const warmup = Math.round((rate * warmupMs) / 1000);
  const count = warmup + Math.round((rate * measureMs) / 1000);
  const recorder = new RoundRecorder(round, count);
  rounds.begin(recorder);
  let inFlight = 0;
  let maxSendsInFlight = 0;
  let maxSenderLagMs = 0;
  let sendError: unknown;
  const sends: Promise<void>[] = [];
  const interval = 1000 / rate;
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  const cpu = process.cpuUsage();
  const start = performance.now() + 5;
  try {
    let i = 0;
    while (i < count) {
      const now = performance.now();
      const due = start + i * interval;
      if (due > now) {
        await new Promise((resolve) => setTimeout(resolve, due - now));
        continue;
      }
      maxSenderLagMs = Math.max(maxSenderLagMs, now - due);
      // Every message whose time has come goes now, each stamped with its own intended time.
      for (; i < count && start + i * interval <= now; i++) {
        const body = stampBody({ r: round, i, t: start + i * interval, s: performance.now(), payload });
        inFlight++;
        maxSendsInFlight = Math.max(maxSendsInFlight, inFlight);
        sends.push(
          rig.send(body, `${round}-${i}`).then(
            () => void inFlight--,
            (error: unknown) => {
              inFlight--;
              sendError ??= error;
            },
          ),
        );
      }
      if (sendError !== undefined) throw sendError;
    }
    await Promise.all(sends);
    if (sendError !== undefined) throw sendError;
    await within(recorder.done, drainTimeoutMs, `round ${round}`).catch(() => {
      throw new Error(`round ${round}: ${recorder.missing} of ${count} messages not handled ${drainTimeoutMs} ms after the last send`);
    });
  } finally {
    rounds.end();
    loopDelay.disable();
  }
  const cpuUsed = process.cpuUsage(cpu);
  return {
    round,
    cpuUsPerMessage: Math.round((cpuUsed.user + cpuUsed.system) / count),
    loopDelayP99Ms: Math.round(loopDelay.percentile(99) / 1e4) / 100,
    fromIntended: Array.from(recorder.fromIntended.subarray(warmup)),
    fromSent: Array.from(recorder.fromSent.subarray(warmup)),
    sent: count,
    duplicates: recorder.duplicates,
    maxSendsInFlight,
    maxSenderLagMs: Math.round(maxSenderLagMs),
  };
}

/**
 * The side's most messages per second end to end: a closed loop that keeps
 * `window` messages sent and not yet handled, for `warmupMs + measureMs`;
 * the rate is taken over the last `measureMs`. Resolves after the loop's
 * messages were all handled.
 */
export async function closedLoopMax(rig: Rig, rounds: Rounds, round: number, window: number, warmupMs: number, measureMs: number, payload: string, drainTimeoutMs: number): Promise<number> {
  const seen = new Set<number>();
  let next = 0;
  let stopping = false;
  let resolveDrained!: () => void;
  let rejectDrained!: (error: unknown) => void;
  const drained = new Promise<void>((resolve, reject) => {
    resolveDrained = resolve;
    rejectDrained = reject;
  });
  drained.catch(() => undefined);
  const send = () => {
    const i = next++;
    const now = performance.now();
    rig.send(stampBody({ r: round, i, t: now, s: now, payload }), `${round}-${i}`).catch(rejectDrained);
  };
  rounds.begin({
    round,
    handled: (stamp) => {
      if (seen.has(stamp.i)) return;
      seen.add(stamp.i);
      if (!stopping) send();
      else if (seen.size === next) resolveDrained();
    },
  });
  try {
    for (let i = 0; i < window; i++) send();
    await Promise.race([sleep(warmupMs), drained]);
    const from = performance.now();
    const handledFrom = seen.size;
    await Promise.race([sleep(measureMs), drained]);
    const perSec = ((seen.size - handledFrom) * 1000) / (performance.now() - from);
    stopping = true;
    if (seen.size === next) resolveDrained();
    await within(drained, drainTimeoutMs, `closed loop of round ${round}`).catch((error: unknown) => {
      throw seen.size === next ? error : new Error(`closed loop of round ${round}: ${next - seen.size} of ${next} messages not handled after ${drainTimeoutMs} ms`);
    });
    return Math.round(perSec);
  } finally {
    rounds.end();
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** p50, p99, p99.9 and max of latencies, ms, two decimals. */
export interface LatencySummary {
  readonly p50: number;
  readonly p99: number;
  readonly p999: number;
  readonly max: number;
  readonly count: number;
}

export function summarise(values: readonly number[]): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  const at = (p: number) => round2(sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!);
  return { p50: at(50), p99: at(99), p999: at(99.9), max: at(100), count: sorted.length };
}

function round2(x: number): number {
  return Math.round(x * 100) / 100;
}
