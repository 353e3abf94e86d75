/**
 * The redeliver side of `npm run bench -- rocketmq`: an Endpoint over a
 * RocketMqTransport with a consumer group of the run's own, the endpoint's
 * default codec (JSON) and its default recoverability.
 */
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RetryLaterError } from '../../src/policy/errors.js';
import { RocketMqTransport } from '../../src/transports/rocketmq/index.js';
import { countdown, messageIndex, messageName, paced, summariseLateness, within, type LatenessSummary } from '../redis/workload.js';
import type { Throughput } from '../jetstream/workload.js';

/** Sends in flight at once while the queue is loaded. */
const SEND_CHUNK = 200;

export interface RedeliverSetup {
  readonly endpoints: string;
  readonly nameServer: string;
  /** The run's consumer group. */
  readonly group: string;
  /** The endpoint's concurrency, which is its prefetch. */
  readonly prefetch: number;
  readonly timeoutMs: number;
}

/** A transport of the side's group, closed once `fn` is done (the caller deletes the run's topics). */
export async function withTransport<T>(setup: RedeliverSetup, fn: (transport: RocketMqTransport) => Promise<T>): Promise<T> {
  const transport = new RocketMqTransport({ endpoints: setup.endpoints, nameServer: setup.nameServer, consumerGroup: setup.group, connectionName: 'redeliver-bench' });
  try {
    return await fn(transport);
  } finally {
    await transport.close();
  }
}

/**
 * `n` messages sent first (ids `<round>-m-<i>`) to `queue`; then an
 * Endpoint of concurrency `setup.prefetch` handles them with a handler that
 * does nothing. Timed from `start()` to the last message handled (its ack
 * confirmed by the proxy).
 */
export function redeliverThroughput(setup: RedeliverSetup, queue: string, n: number, round: number, body: (i: number) => Buffer): Promise<Throughput> {
  return withTransport(setup, async (transport) => {
    for (let i = 0; i < n; i += SEND_CHUNK) {
      const sends: Promise<void>[] = [];
      for (let j = i; j < Math.min(n, i + SEND_CHUNK); j++) sends.push(transport.send(queue, { id: messageName(`${round}-m`, j), body: body(j), headers: {} }));
      await Promise.all(sends);
    }
    const handled = countdown(n);
    const endpoint = new Endpoint({ name: 'bench-throughput', queue, transport, concurrency: setup.prefetch, handler: () => undefined });
    endpoint.on('handled', () => handled.tick());
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    await endpoint.start();
    try {
      await within(handled.done, setup.timeoutMs, 'redeliver throughput');
      const drainMs = performance.now() - t0;
      const cpuUsed = process.cpuUsage(cpu);
      return { side: 'redeliver', messages: n, drainMs: Math.round(drainMs), perSec: Math.round((n * 1000) / drainMs), cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000) };
    } finally {
      await endpoint.stop();
    }
  });
}

/**
 * One message per delay, sent at `rate` per second while the endpoint
 * runs; the handler throws a `RetryLaterError(delay)` on the first attempt,
 * so the default policy schedules a delayed retry of exactly that delay: a
 * timed copy the broker holds. Lateness = the second attempt's start -
 * (the first attempt's throw + delay); the reference is taken before the
 * copy is sent, so lateness includes that send, and a retry counted early
 * was certainly handed out before it was due.
 */
export function redeliverDelayLateness(setup: RedeliverSetup, queue: string, delays: readonly number[], rate: number, body: (i: number) => Buffer): Promise<LatenessSummary> {
  return withTransport(setup, async (transport) => {
    const scheduledAt = new Array<number>(delays.length);
    const lateness: number[] = [];
    const handled = countdown(delays.length);
    const endpoint = new Endpoint({
      name: 'bench-delays',
      queue,
      transport,
      concurrency: setup.prefetch,
      handler: (_message, context) => {
        const now = Date.now();
        const i = messageIndex(context.messageId);
        if (context.delayedAttempt === 0) {
          scheduledAt[i] = now;
          throw new RetryLaterError(delays[i]!);
        }
        lateness.push(now - (scheduledAt[i]! + delays[i]!));
        handled.tick();
      },
    });
    await endpoint.start();
    try {
      await paced(delays.length, rate, (i) => transport.send(queue, { id: messageName('d', i), body: body(i), headers: {} }));
      await within(handled.done, setup.timeoutMs + Math.max(...delays), 'redeliver delays');
      return summariseLateness(lateness);
    } finally {
      await endpoint.stop();
    }
  });
}
