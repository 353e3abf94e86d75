/**
 * The redeliver side of `npm run bench -- jetstream`: an Endpoint over a
 * JetStreamTransport on a prefix of its own, the endpoint's default codec
 * (JSON) and its default recoverability.
 */
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RetryLaterError } from '../../src/policy/errors.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { countdown, messageIndex, messageName, paced, summariseLateness, within, type LatenessSummary } from '../redis/workload.js';
import { messageBody, type Throughput } from './workload.js';
import { withClients, deleteStreams } from './server.js';
import { delayedSendLateness, type DelayedSendLateness } from '../delayed-sends.js';

/** Sends in flight at once while the queue is loaded. */
const SEND_CHUNK = 1_000;

export interface RedeliverSetup {
  readonly servers: string;
  /** The transport's prefix; its streams are deleted after each case. */
  readonly prefix: string;
  /** The endpoint's concurrency, which is its prefetch, and the consumer's `max_ack_pending`. */
  readonly prefetch: number;
  readonly payload: string;
  /** The longest a drain may take before the run fails. */
  readonly timeoutMs: number;
}

/** A transport on the side's prefix, closed and its streams deleted once `fn` is done. */
async function withTransport<T>(setup: RedeliverSetup, fn: (transport: JetStreamTransport) => Promise<T>): Promise<T> {
  const transport = new JetStreamTransport({
    servers: setup.servers,
    prefix: setup.prefix,
    maxAckPending: setup.prefetch,
    connectionName: 'redeliver-bench',
  });
  try {
    return await fn(transport);
  } finally {
    await transport.close();
    await withClients(setup.servers, 'redeliver-bench-cleanup', ({ jsm }) => deleteStreams(jsm, setup.prefix));
  }
}

/**
 * `n` messages sent first (ids `<round>-m-<i>`); then an Endpoint of
 * concurrency `setup.prefetch` handles them with a handler that does
 * nothing. Timed from `start()` to the last message handled (its ack
 * confirmed by the server).
 */
export function redeliverThroughput(setup: RedeliverSetup, n: number, round: number): Promise<Throughput> {
  return withTransport(setup, async (transport) => {
    const queue = 'throughput';
    for (let i = 0; i < n; i += SEND_CHUNK) {
      const sends: Promise<void>[] = [];
      for (let j = i; j < Math.min(n, i + SEND_CHUNK); j++) sends.push(transport.send(queue, { id: messageName(`${round}-m`, j), body: messageBody(j, setup.payload), headers: {} }));
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
      return {
        side: 'redeliver',
        messages: n,
        drainMs: Math.round(drainMs),
        perSec: Math.round((n * 1000) / drainMs),
        cpuMs: Math.round((cpuUsed.user + cpuUsed.system) / 1000),
      };
    } finally {
      await endpoint.stop();
    }
  });
}

/**
 * One message per delay, sent at `rate` per second while the endpoint
 * runs; the handler throws a `RetryLaterError(delay)` on the first attempt,
 * so the default policy schedules a delayed retry of exactly that delay.
 * Lateness = the second attempt's start - (the first attempt's throw +
 * delay). The reference is taken before the endpoint stores the copy in
 * the delay stream, so lateness includes that write, and a retry counted
 * early was certainly handed out before it was due.
 */
export function redeliverDelayLateness(setup: RedeliverSetup, delays: readonly number[], rate: number): Promise<LatenessSummary> {
  return withTransport(setup, async (transport) => {
    const queue = 'delays';
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
      await paced(delays.length, rate, (i) => transport.send(queue, { id: messageName('d', i), body: messageBody(i, setup.payload), headers: {} }));
      await within(handled.done, setup.timeoutMs + Math.max(...delays), 'redeliver delays');
      return summariseLateness(lateness);
    } finally {
      await endpoint.stop();
    }
  });
}

/** Delayed sends on the side's prefix, consumed with its prefetch (see bench/delayed-sends.ts). */
export function redeliverDelayedSends(setup: RedeliverSetup, count: number, seed: number): Promise<DelayedSendLateness> {
  return withTransport(setup, (transport) => delayedSendLateness(transport, 'delayed-sends', count, seed, setup.prefetch));
}
