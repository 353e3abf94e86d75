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
  readonly perSec: number;
  /** User + system CPU time of the bench process during the drain (nsqd's own CPU is not in it). */
  readonly cpuMs: number;
}

/** The body of message `i`: `{ i, payload }` as JSON, what the endpoint's default codec writes. */
export function messageBody(i: number, payload: string): Buffer {
  return Buffer.from(JSON.stringify({ i, payload }));
}
