/** What both sides of `npm run bench -- nsq` share: the nsqd, the channel, the prefetch, the shape of a round. */

export interface NsqBenchSetup {
  /** nsqd's TCP address. */
  readonly nsqd: string;
  /** nsqd's HTTP address. */
  readonly http: string;
  /** The channel both sides read through (the transport's default). */
  readonly channel: string;
  /** redeliver's concurrency and the bare Reader's max-in-flight. */
  readonly prefetch: number;
  /** The string every message carries. */
  readonly payload: string;
  /** The longest a drain may take before the run fails. */
  readonly timeoutMs: number;
  /** The index `i` of a message body as the bare side reads it (a redeliver envelope around `{ i, payload }`). */
  indexOf(body: Uint8Array): number;
}

/** One throughput round of one side. */
export interface Throughput {
  readonly side: 'bare nsqjs' | 'redeliver';
  readonly messages: number;
  /** From the consumer's start to the last message finished, in milliseconds. */
  readonly drainMs: number;
  /** Messages per second from the consumer's start to the message `messages - prefetch` finished (see {@link drainClock}). */
  readonly perSec: number;
  /** User + system CPU time of the bench process during the drain (nsqd's own CPU is not in it). */
  readonly cpuMs: number;
}

/** The body of message `i`: `{ i, payload }` as JSON, what the endpoint's default codec writes. */
export function messageBody(i: number, payload: string): Buffer {
  return Buffer.from(JSON.stringify({ i, payload }));
}

/**
 * Times a drain of `n` messages from now. The rate is taken up to message
 * `n - tail` (`tail` = the prefetch): nsqd writes to a consumer through an
 * output buffer that it flushes when full (16 KiB), when the consumer's
 * RDY is used up, or every 250 ms (`output_buffer_timeout`); the last
 * messages of a topic, fewer than a buffer and fewer than RDY, wait for
 * that tick, up to 250 ms by chance on either side. `done` resolves with
 * the round once the last message is finished.
 */
export function drainClock(side: Throughput['side'], n: number, tail: number): { tick(): void; readonly done: Promise<Throughput> } {
  const counted = Math.max(1, n - tail);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  let left = n;
  let countedMs = 0;
  let resolve!: (t: Throughput) => void;
  const done = new Promise<Throughput>((r) => (resolve = r));
  return {
    done,
    tick: () => {
      left -= 1;
      if (n - left === counted) countedMs = performance.now() - t0;
      if (left !== 0) return;
      const drainMs = performance.now() - t0;
      const cpuUsed = process.cpuUsage(cpu);
      resolve({ side, messages: n, drainMs: Math.round(drainMs), perSec: Math.round((counted * 1000) / countedMs), cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000) });
    },
  };
}
