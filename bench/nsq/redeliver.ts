/**
 * The redeliver side of `npm run bench -- nsq`: an Endpoint over an
 * NsqTransport with the endpoint's default codec (JSON) and its default
 * recoverability; and the sends that load both sides' topics.
 */
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RetryLaterError } from '../../src/policy/errors.js';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import { countdown, messageIndex, messageName, summariseLateness, within } from '../redis/workload.js';
import type { LatenessConsumer } from './bare.js';
import { drainClock, messageBody, type NsqBenchSetup, type Throughput } from './setup.js';

/** Sends in flight at once while a topic is loaded. */
const SEND_CHUNK = 500;

/** A transport on the setup's nsqd, closed once `fn` is done. */
export async function withTransport<T>(setup: NsqBenchSetup, fn: (transport: NsqTransport) => Promise<T>): Promise<T> {
  const transport = new NsqTransport({ nsqd: [setup.nsqd], httpAddresses: { [setup.nsqd]: setup.http }, channel: setup.channel, connectionName: 'redeliver-bench' });
  try {
    return await fn(transport);
  } finally {
    await transport.close();
  }
}

/** Sends `n` messages to `topic` (ids `<prefix>-<i>`); resolves the sends per second. */
export async function load(transport: NsqTransport, topic: string, n: number, setup: NsqBenchSetup, prefix: string): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < n; i += SEND_CHUNK) {
    const sends: Promise<void>[] = [];
    for (let j = i; j < Math.min(n, i + SEND_CHUNK); j++) sends.push(transport.send(topic, { id: messageName(prefix, j), body: messageBody(j, setup.payload), headers: {} }));
    await Promise.all(sends);
  }
  return Math.round((n * 1000) / (performance.now() - t0));
}

/** Consumes the `n` messages loaded on `topic` with an Endpoint of concurrency `prefetch` and a handler that does nothing; timed from `start()` (see `drainClock`). */
export async function redeliverThroughput(transport: NsqTransport, setup: NsqBenchSetup, topic: string, n: number): Promise<Throughput> {
  const drain = drainClock('redeliver', n, setup.prefetch);
  const endpoint = new Endpoint({ name: 'bench-throughput', queue: topic, transport, concurrency: setup.prefetch, handler: () => undefined });
  endpoint.on('handled', () => drain.tick());
  await endpoint.start();
  try {
    return await within(drain.done, setup.timeoutMs, 'redeliver throughput');
  } finally {
    await endpoint.stop();
  }
}

/**
 * An endpoint on `topic` whose handler throws a `RetryLaterError(delay)`
 * on a message's first attempt, so the default policy schedules a delayed
 * retry of exactly that delay (a copy held by nsqd). Lateness = the second
 * attempt's start - (the throw + delay); the reference is taken before the
 * copy is sent, so a retry counted early was certainly handed out before
 * it was due.
 */
export async function redeliverDelayConsumer(transport: NsqTransport, setup: NsqBenchSetup, topic: string, delays: readonly number[]): Promise<LatenessConsumer> {
  const scheduledAt = new Array<number>(delays.length);
  const lateness: number[] = [];
  const handled = countdown(delays.length);
  const endpoint = new Endpoint({
    name: 'bench-delays',
    queue: topic,
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
  return { done: handled.done.then(() => summariseLateness(lateness)), stop: () => endpoint.stop() };
}
