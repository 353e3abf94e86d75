/**
 * Delayed sends, the same on every transport's benchmark: `count` messages
 * (default 1,000) sent through a `Producer` with `delayMs` uniform in
 * [1 s, 5 s) (seeded), 50 sends in flight at a time, to a queue a bare
 * subscription consumes (prefetch 1,000 unless the benchmark says
 * otherwise, each delivery acked at once), after one undelayed message
 * sent and received, so connecting and declaring are not measured. For
 * each message, lateness = the time it is handed out minus (the time just
 * before its `send` call + its delay), on the system clock; negative
 * lateness is an early delivery.
 */
import { Producer } from '../src/producer/producer.js';
import type { Delivery, Transport } from '../src/transport/types.js';
import { uniformDelays } from './redis/workload.js';
import { percentile, printTable } from './report.js';

/** The shortest and longest delay of a delayed send, in milliseconds. */
export const SEND_MIN_DELAY_MS = 1_000;
export const SEND_MAX_DELAY_MS = 5_000;
/** Sends in flight at a time. */
const IN_FLIGHT = 50;
const DUE_HEADER = 'bench-due';

/** Lateness of delayed sends, in milliseconds. */
export interface DelayedSendLateness {
  readonly p0: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Deliveries handed out before their due time. */
  readonly early: number;
  readonly handled: number;
}

/** Sends `count` delayed messages to `queue` on `transport` and measures how late each is handed out. */
export async function delayedSendLateness(transport: Transport, queue: string, count: number, seed: number, prefetch = 1_000): Promise<DelayedSendLateness> {
  const delays = uniformDelays(count, seed, SEND_MIN_DELAY_MS, SEND_MAX_DELAY_MS);
  const lateness: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  let warm!: () => void;
  const warmedUp = new Promise<void>((resolve) => (warm = resolve));
  const onDelivery = (d: Delivery) => {
    if (d.id === 'warm-up') {
      void d.ack().then(warm);
      return;
    }
    lateness.push(Date.now() - Number(d.headers[DUE_HEADER]));
    void d.ack();
    if (lateness.length === count) done();
  };
  const sub = await transport.consume(queue, onDelivery, { prefetch });
  try {
    const producer = new Producer<string>({ transport });
    await producer.send(queue, 'warm-up', { id: 'warm-up' });
    await warmedUp;
    let next = 0;
    const sender = async () => {
      for (let i = next++; i < count; i = next++) {
        const due = Date.now() + delays[i]!;
        await producer.send(queue, 'delayed', { id: `ds-${i}`, delayMs: delays[i]!, headers: { [DUE_HEADER]: String(due) } });
      }
    };
    await Promise.all(Array.from({ length: IN_FLIGHT }, sender));
    await finished;
  } finally {
    await sub.close();
  }
  return {
    p0: percentile(lateness, 0),
    p50: percentile(lateness, 50),
    p99: percentile(lateness, 99),
    max: percentile(lateness, 100),
    early: lateness.filter((l) => l < 0).length,
    handled: lateness.length,
  };
}

/** Prints the delayed-send case's table. */
export function printDelayedSends(l: DelayedSendLateness): void {
  printTable(`delayed sends: ${l.handled} through a Producer with delayMs uniform in [${SEND_MIN_DELAY_MS} ms, ${SEND_MAX_DELAY_MS} ms); lateness = handed out - (send + delay), ms`, [
    { p0LatenessMs: l.p0, p50LatenessMs: l.p50, p99LatenessMs: l.p99, maxLatenessMs: l.max, early: l.early, handled: l.handled },
  ]);
}

/** The delayed-send figures of a benchmark's final JSON line. */
export function delayedSendJson(l: DelayedSendLateness): Record<string, number> {
  return {
    delayedSendP0LatenessMs: l.p0,
    delayedSendP50LatenessMs: l.p50,
    delayedSendP99LatenessMs: l.p99,
    delayedSendMaxLatenessMs: l.max,
    delayedSendEarlyCount: l.early,
    delayedSendsHandled: l.handled,
  };
}
