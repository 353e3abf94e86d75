/**
 * What both sides of `npm run bench -- redis` are given: the same payload,
 * the same messages failing their first attempt, the same delays, and one
 * way to summarise lateness.
 */
import { seededRandom } from '../../src/time/random.js';
import { percentile } from '../report.js';

/** Characters of the payload string each message carries, JSON-encoded on both sides. */
export const PAYLOAD_CHARS = 256;
/** The shortest and longest delayed retry of the precision case, in milliseconds. */
export const MIN_DELAY_MS = 100;
export const MAX_DELAY_MS = 20_000;

/** Messages are named `<prefix>-<index>` on both sides; the index picks the failure and the delay. */
export function messageName(prefix: string, index: number): string {
  return `${prefix}-${index}`;
}

/** The index in a name made by {@link messageName}. */
export function messageIndex(name: string): number {
  return Number(name.slice(name.lastIndexOf('-') + 1));
}

/** The payload every message carries: `{ i, payload }`, with a fixed string of {@link PAYLOAD_CHARS} characters. */
export function payloadString(seed: number): string {
  const random = seededRandom(seed);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  return Array.from({ length: PAYLOAD_CHARS }, () => alphabet[Math.floor(random() * alphabet.length)]).join('');
}

/** For each of `n` messages, whether it fails its first attempt: a share `share` of them, drawn with `seed`. */
export function failingFirst(n: number, share: number, seed: number): boolean[] {
  const random = seededRandom(seed);
  return Array.from({ length: n }, () => random() < share);
}

/** `m` delays uniform in [`min`, `max`) (default [{@link MIN_DELAY_MS}, {@link MAX_DELAY_MS})), whole milliseconds, drawn with `seed`. */
export function uniformDelays(m: number, seed: number, min = MIN_DELAY_MS, max = MAX_DELAY_MS): number[] {
  const random = seededRandom(seed);
  return Array.from({ length: m }, () => min + Math.floor(random() * (max - min)));
}

/** One side's run of a throughput case. */
export interface Throughput {
  readonly side: 'redeliver' | 'bullmq';
  readonly case: 'success' | 'failing10';
  readonly messages: number;
  /** From consumer start to the last message handled, in milliseconds. */
  readonly drainMs: number;
  readonly perSec: number;
  /** User + system CPU time of the bench process during the drain (Redis's own CPU is not in it). */
  readonly cpuMs: number;
}

/** How late delayed messages came back, in milliseconds; negative values are early deliveries. */
export interface LatenessSummary {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly early: number;
  readonly count: number;
}

export function summariseLateness(values: readonly number[]): LatenessSummary {
  return {
    p50: percentile(values, 50),
    p99: percentile(values, 99),
    max: percentile(values, 100),
    early: values.filter((v) => v < 0).length,
    count: values.length,
  };
}

/** A promise and the function that settles it once `count` calls have been made. */
export function countdown(count: number): { readonly done: Promise<void>; tick(): void } {
  let left = count;
  let resolve!: () => void;
  const done = new Promise<void>((r) => (resolve = r));
  if (left === 0) resolve();
  return {
    done,
    tick: () => {
      if (--left === 0) resolve();
    },
  };
}

/** `promise`, or a rejection naming `what` when it has not settled within `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Calls `send(i)` for i = 0..n-1 at `rate` per second on a steady schedule,
 * so the consumer keeps up and a returning retry never waits behind first
 * deliveries that are still queued.
 */
export async function paced(n: number, rate: number, send: (i: number) => Promise<void>): Promise<void> {
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const wait = started + (i / rate) * 1000 - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    await send(i);
  }
}
