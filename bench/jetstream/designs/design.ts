/**
 * A way to hold a delayed retry on JetStream 2.9, as `npm run bench --
 * jetstream-designs` compares them: each settles a failed delivery of the
 * work stream as a retry due later, carrying the retry state redeliver
 * writes, and gives that state back when the retry is delivered.
 */
import type { JsMsg } from '@nats-io/jetstream';
import { percentile } from '../../report.js';
import type { Headers } from '../../../src/transport/types.js';

/** Where one case's streams live: all under the benchmark's prefix, deleted with it. */
export interface CaseNames {
  /** `<prefix>_<tag>`: the start of every stream name of the case. */
  readonly streamPrefix: string;
  /** `<prefix>.<tag>`: the start of every subject of the case. */
  readonly subjectPrefix: string;
  readonly workStream: string;
  readonly workSubject: string;
}

/** The names of case `tag` under `prefix`. */
export function caseNames(prefix: string, tag: string): CaseNames {
  const streamPrefix = `${prefix}_${tag}`;
  const subjectPrefix = `${prefix}.${tag}`;
  return { streamPrefix, subjectPrefix, workStream: `${streamPrefix}_WORK`, workSubject: `${subjectPrefix}.work` };
}

export interface DelayDesign {
  /** Makes the design's own streams and starts anything it runs in the background. */
  start(): Promise<void>;
  /** Settles a failed delivery as a retry due in `delayMs`, carrying `headers`. */
  retryLater(message: JsMsg, id: string, delayMs: number, headers: Headers): Promise<void>;
  /** The retry state a delivery carries: undefined for a first delivery. */
  retryState(message: JsMsg, id: string): Promise<Headers | undefined>;
  /** What the design spent per retry, by operation, in milliseconds. */
  readonly costs: OperationTimes;
  /** Stops what {@link start} started; rejects if it failed. */
  stop(): Promise<void>;
}

/** Durations of named operations, in milliseconds. */
export class OperationTimes {
  readonly #times = new Map<string, number[]>();

  /** Runs `fn`, recording how long it took under `name`. */
  async time<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const t0 = performance.now();
    const result = await fn();
    this.record(name, performance.now() - t0);
    return result;
  }

  record(name: string, ms: number): void {
    let times = this.#times.get(name);
    if (times === undefined) this.#times.set(name, (times = []));
    times.push(ms);
  }

  /** The operations recorded, each with its count and its p50 and p99 in milliseconds. */
  summary(): { readonly operation: string; readonly count: number; readonly p50: number; readonly p99: number }[] {
    return [...this.#times].map(([operation, times]) => ({ operation, count: times.length, p50: percentile(times, 50), p99: percentile(times, 99) }));
  }
}
