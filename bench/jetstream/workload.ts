/**
 * What every side of `npm run bench -- jetstream` carries and reports: the
 * same message bodies, and one shape for a throughput round.
 */

/** The body of message `i`: `{ i, payload }` as JSON, what the endpoint's default codec writes. */
export function messageBody(i: number, payload: string): Buffer {
  return Buffer.from(JSON.stringify({ i, payload }));
}

/** One throughput round of one side. */
export interface Throughput {
  readonly side: 'raw' | 'raw, confirmed acks' | 'raw, a flush per turn' | 'redeliver';
  readonly messages: number;
  /** From the consumer's start to the last message acked, in milliseconds. */
  readonly drainMs: number;
  readonly perSec: number;
  /** User + system CPU time of the bench process during the drain (the server's own CPU is not in it). */
  readonly cpuMs: number;
}
