/**
 * The redeliver side of `npm run bench -- redis`: an Endpoint over a
 * RedisTransport on a key prefix of its own, the endpoint's default codec
 * (JSON, as BullMQ's job data) and its default recoverability.
 */
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RetryLaterError } from '../../src/policy/errors.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { deleteKeys } from './cleanup.js';
import { countdown, messageIndex, messageName, paced, summariseLateness, within, type LatenessSummary, type Throughput } from './workload.js';
import { delayedSendLateness, type DelayedSendLateness } from '../delayed-sends.js';

/** Sends in flight at once while the queue is loaded. */
const SEND_CHUNK = 1_000;

export interface RedeliverSetup {
  readonly url: string;
  /** The transport's key prefix; every key under it is deleted after each case. */
  readonly keyPrefix: string;
  readonly concurrency: number;
  readonly payload: string;
  /** The longest a drain may take before the run fails. */
  readonly timeoutMs: number;
}

/** A transport on the side's prefix, closed and its keys deleted once `fn` is done. */
async function withTransport<T>(setup: RedeliverSetup, fn: (transport: RedisTransport) => Promise<T>): Promise<T> {
  const transport = new RedisTransport({ url: setup.url, keyPrefix: setup.keyPrefix, connectionName: 'redeliver-bench' });
  try {
    return await fn(transport);
  } finally {
    await transport.close();
    await deleteKeys(setup.url, `{${setup.keyPrefix}}:*`);
  }
}

/** Sends `count` messages named `<prefix>-<i>`, each with the body `{ i, payload }`. */
async function load(transport: RedisTransport, queue: string, prefix: string, count: number, payload: string): Promise<void> {
  for (let i = 0; i < count; i += SEND_CHUNK) {
    const sends: Promise<void>[] = [];
    for (let j = i; j < Math.min(count, i + SEND_CHUNK); j++) {
      sends.push(transport.send(queue, { id: messageName(prefix, j), body: Buffer.from(JSON.stringify({ i: j, payload })), headers: {} }));
    }
    await Promise.all(sends);
  }
}

/**
 * `n` messages sent first; then an Endpoint of concurrency
 * `setup.concurrency` handles them with a handler that does nothing, except
 * that the messages marked in `failing` throw on their first attempt (the
 * default policy retries them at once). Timed from `start()` to the last
 * message handled.
 */
export function redeliverThroughput(setup: RedeliverSetup, label: Throughput['case'], n: number, failing: readonly boolean[]): Promise<Throughput> {
  return withTransport(setup, async (transport) => {
    const queue = `${label}-${Date.now()}`;
    await load(transport, queue, 'm', n, setup.payload);
    const handled = countdown(n);
    let retried = 0;
    const endpoint = new Endpoint({
      name: `bench-${label}`,
      queue,
      transport,
      concurrency: setup.concurrency,
      handler: (_message, context) => {
        if (context.immediateAttempt === 1 && failing[messageIndex(context.messageId)]) throw new Error('transient failure');
      },
    });
    endpoint.on('handled', () => handled.tick());
    endpoint.on('immediateRetry', () => retried++);
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    await endpoint.start();
    try {
      await within(handled.done, setup.timeoutMs, `redeliver ${label}`);
      const drainMs = performance.now() - t0;
      const cpuUsed = process.cpuUsage(cpu);
      const expected = failing.slice(0, n).filter(Boolean).length;
      if (retried !== expected) throw new Error(`redeliver ${label}: ${retried} immediate retries, expected ${expected}`);
      return {
        side: 'redeliver',
        case: label,
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
 * delay). The reference is taken before the endpoint writes the retry (as
 * BullMQ's job timestamp is taken before the job is added), so lateness
 * includes that write, and a copy counted early was certainly handed out
 * before it was due.
 */
export function redeliverDelayLateness(setup: RedeliverSetup, delays: readonly number[], rate: number): Promise<LatenessSummary> {
  return withTransport(setup, async (transport) => {
    const queue = `delayed-${Date.now()}`;
    const scheduledAt = new Array<number>(delays.length);
    const lateness: number[] = [];
    const handled = countdown(delays.length);
    const endpoint = new Endpoint({
      name: 'bench-delays',
      queue,
      transport,
      concurrency: setup.concurrency,
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
      await paced(delays.length, rate, (i) =>
        transport.send(queue, { id: messageName('d', i), body: Buffer.from(JSON.stringify({ i, payload: setup.payload })), headers: {} }),
      );
      await within(handled.done, setup.timeoutMs + Math.max(...delays), 'redeliver delays');
      return summariseLateness(lateness);
    } finally {
      await endpoint.stop();
    }
  });
}

/** Delayed sends on the side's prefix (see bench/delayed-sends.ts). */
export function redeliverDelayedSends(setup: RedeliverSetup, count: number, seed: number): Promise<DelayedSendLateness> {
  return withTransport(setup, (transport) => delayedSendLateness(transport, 'delayed-sends', count, seed));
}
