import type { EndpointStats } from '../endpoint/endpoint.js';
import type { FlowState } from '../flow/controller.js';
import type { QueueDepth } from '../transport/inspection.js';
import type { DashboardConfig } from './options.js';

/** The live counters the page refreshes. */
export interface StatsView {
  /** When they were read, epoch milliseconds. */
  readonly at: number;
  /** Queue depths, or null when the transport cannot read them. */
  readonly queues: readonly QueueDepth[] | null;
  /** Why the queue depths could not be read this time, when the transport failed to. */
  readonly queuesError?: string;
  readonly errorQueues: readonly {
    readonly name: string;
    readonly count: number;
    /** Messages that arrived in the error queue in the last minute. */
    readonly deadLettersPerMinute: number;
  }[];
  readonly endpoints: readonly {
    readonly name: string;
    readonly queue: string;
    readonly running: boolean;
    readonly inFlight: number;
    /** Counts over the last minute. */
    readonly perMinute: { readonly handled: number; readonly immediateRetries: number; readonly delayedRetries: number; readonly deadLettered: number };
    readonly totals: EndpointStats;
    readonly flow: FlowState;
  }[];
}

/** Samples kept: a minute of them and the one before, taken at most once a second. */
const WINDOW_MS = 60_000;
const MIN_SAMPLE_GAP_MS = 1_000;

/**
 * Counts per minute from periodic readings of monotonic counters: the
 * increases over the last 60 seconds, where an interval that straddles the
 * start of the window counts in proportion to its overlap.
 */
export class RateWindow {
  #samples: { at: number; values: Map<string, number> }[] = [];

  /** Records counter values read at `at`; a reading within a second of the last is ignored. */
  record(at: number, values: ReadonlyMap<string, number>): void {
    const last = this.#samples.at(-1);
    if (last && at - last.at < MIN_SAMPLE_GAP_MS) return;
    this.#samples.push({ at, values: new Map(values) });
    while (this.#samples.length > 2 && this.#samples[1]!.at <= at - WINDOW_MS) this.#samples.shift();
  }

  /** The increase of `name` over the 60 seconds before `now`, rounded to a whole number. */
  perMinute(name: string, now: number): number {
    const start = now - WINDOW_MS;
    let total = 0;
    for (let i = 1; i < this.#samples.length; i++) {
      const a = this.#samples[i - 1]!;
      const b = this.#samples[i]!;
      if (b.at <= start) continue;
      const delta = (b.values.get(name) ?? 0) - (a.values.get(name) ?? 0);
      if (delta <= 0) continue;
      const span = b.at - a.at;
      const overlap = Math.min(b.at, now) - Math.max(a.at, start);
      total += span <= 0 ? delta : (delta * Math.max(0, overlap)) / span;
    }
    return Math.round(total);
  }
}

/**
 * Reads queue depths, error-queue counts and endpoint counters, and turns
 * them into per-minute rates. Error-queue arrivals are count increases plus
 * the entries this dashboard itself sent back or deleted in between.
 */
export class StatsCollector {
  readonly #rates = new RateWindow();
  readonly #removed = new Map<string, number>();

  constructor(private readonly config: DashboardConfig) {}

  /** Notes that the dashboard took `n` entries out of `errorQueue`. */
  removed(errorQueue: string, n: number): void {
    this.#removed.set(errorQueue, (this.#removed.get(errorQueue) ?? 0) + n);
  }

  async read(): Promise<StatsView> {
    const { transport, errorQueues, endpoints, clock } = this.config;
    // Depths are a nice-to-have: when the transport fails to read them, the rest still shows.
    const [depths, counts] = await Promise.all([
      transport.inspection
        ? transport.inspection.queueDepths().then(
            (queues) => ({ queues, error: undefined }),
            (error: unknown) => ({ queues: null, error: error instanceof Error ? error.message : String(error) }),
          )
        : Promise.resolve({ queues: null, error: undefined }),
      Promise.all(errorQueues.map((q) => transport.errorQueue!.count(q))),
    ]);
    const at = clock.now();
    const values = new Map<string, number>();
    errorQueues.forEach((q, i) => values.set(`eq:${q}`, counts[i]! + (this.#removed.get(q) ?? 0)));
    const snapshots = endpoints.map((e) => ({ endpoint: e, stats: e.stats, flow: e.flowState }));
    snapshots.forEach(({ stats }, i) => {
      values.set(`ep:${i}:handled`, stats.handled);
      values.set(`ep:${i}:immediateRetries`, stats.immediateRetries);
      values.set(`ep:${i}:delayedRetries`, stats.delayedRetries);
      values.set(`ep:${i}:deadLettered`, stats.deadLettered);
    });
    this.#rates.record(at, values);
    const rate = (name: string) => this.#rates.perMinute(name, at);
    return {
      at,
      queues: depths.queues,
      ...(depths.error === undefined ? {} : { queuesError: depths.error }),
      errorQueues: errorQueues.map((name, i) => ({ name, count: counts[i]!, deadLettersPerMinute: rate(`eq:${name}`) })),
      endpoints: snapshots.map(({ endpoint, stats, flow }, i) => ({
        name: endpoint.config.name,
        queue: endpoint.config.queue,
        running: endpoint.running,
        inFlight: stats.inFlight,
        perMinute: {
          handled: rate(`ep:${i}:handled`),
          immediateRetries: rate(`ep:${i}:immediateRetries`),
          delayedRetries: rate(`ep:${i}:delayedRetries`),
          deadLettered: rate(`ep:${i}:deadLettered`),
        },
        totals: stats,
        flow,
      })),
    };
  }
}
