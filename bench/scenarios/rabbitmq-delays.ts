/**
 * `npm run bench -- rabbitmq-delays [--messages N] [--scale S] [--rate R] [--seed X] [--prefetch P] [--burst B] [--burst-delay D] [--delayed-sends M] [--only-delayed-sends] [--url URL]`
 *
 * How precisely delayed retries come back, through redeliver's quorum delay
 * levels, its classic delay levels, and the naive design (one retry queue,
 * per-message TTL via the `expiration` property, dead-lettered back to the
 * work queue), in the same run against the same broker; then how many
 * delayed retries per second each kind of levels carries.
 *
 * N messages (default 10,000) each get one delayed retry. The delays are drawn
 * log-uniformly from 100 ms to 5 min with a seeded random, then divided by S
 * (default 4: 25 ms to 75 s) so the run fits in a few minutes. A producer
 * sends the messages at R per second (default 500, so the work queue never
 * backs up and a returning copy never waits behind unconsumed first
 * deliveries); the consumer schedules each retry as it arrives. For each
 * message, lateness = the time it is handed out again minus (the time its
 * retry was scheduled + its delay). Negative lateness is an early delivery.
 *
 * `retryQueues` is how many delay-level queues the delays went through (at
 * most 28, whatever the delays); `distinctDelays` is how many queues the
 * one-queue-per-TTL design would have needed for the same delays.
 *
 * Throughput: B messages (default 5,000) wait in the work queue; the
 * consumer schedules a retry of D ms (default 1,000: six levels) for each as
 * fast as the broker confirms them. Retries per second = B / (time from the
 * first retry scheduled to the last copy back - D).
 *
 * Delayed sends: M (default 1,000) sent by a Producer with `delayMs`
 * uniform in [1 s, 5 s), through quorum delay levels; see
 * bench/delayed-sends.ts. With `--only-delayed-sends`, the only case run.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { seededRandom } from '../../src/time/random.js';
import type { Delivery } from '../../src/transport/types.js';
import { delayLevels, RabbitMqTransport, type DelayLevelType } from '../../src/transports/rabbitmq/index.js';
import { deleteDelayTopology } from '../../test/support/delay-topology.js';
import { percentile, printJson, printTable, positiveArg, roundTo } from '../report.js';
import { delayedSendJson, delayedSendLateness, printDelayedSends } from '../delayed-sends.js';

const BODY_BYTES = 256;
const MIN_DELAY_MS = 100;
const MAX_DELAY_MS = 300_000;

interface Lateness {
  readonly values: number[];
  readonly wallMs: number;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '10000' },
      scale: { type: 'string', default: '4' },
      seed: { type: 'string', default: '42' },
      prefetch: { type: 'string', default: '200' },
      rate: { type: 'string', default: '500' },
      burst: { type: 'string', default: '5000' },
      'burst-delay': { type: 'string', default: '1000' },
      url: { type: 'string', default: process.env['RABBITMQ_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672' },
      'delayed-sends': { type: 'string', default: '1000' },
      'only-delayed-sends': { type: 'boolean', default: false },
    },
  });
  const delayedSends = positiveArg('delayed-sends', values['delayed-sends']);
  const n = positiveArg('messages', values.messages);
  const scale = Number(values.scale);
  if (!(scale >= 1)) throw new RangeError(`--scale must be a number >= 1, got ${values.scale}`);
  const prefetch = positiveArg('prefetch', values.prefetch);
  const rate = positiveArg('rate', values.rate);
  const burst = positiveArg('burst', values.burst);
  const burstDelay = positiveArg('burst-delay', values['burst-delay']);
  const random = seededRandom(positiveArg('seed', values.seed));
  const url = values.url;
  const body = randomBytes(BODY_BYTES);
  const sendSeed = positiveArg('seed', values.seed);
  if (values['only-delayed-sends']) {
    const sends = await withLevels(url, 'quorum', (transport, queue) => delayedSendLateness(transport, queue, delayedSends, sendSeed));
    printDelayedSends(sends);
    printJson({ scenario: 'rabbitmq-delays', delayedSends, ...delayedSendJson(sends) });
    return;
  }

  // Log-uniform in [100 ms, 5 min], then scaled, in whole milliseconds.
  const delays = Array.from({ length: n }, () => {
    const d = MIN_DELAY_MS * (MAX_DELAY_MS / MIN_DELAY_MS) ** random();
    return Math.max(1, Math.round(d / scale));
  });
  const levelsUsed = new Set(delays.flatMap((d) => delayLevels(d)));

  const quorum = await throughDelayLevels(url, 'quorum', delays, body, prefetch, rate);
  const classic = await throughDelayLevels(url, 'classic', delays, body, prefetch, rate);
  const naive = await throughNaiveQueue(url, delays, body, prefetch, rate);
  const quorumRate = await retriesPerSecond(url, 'quorum', burst, burstDelay, body, prefetch);
  const classicRate = await retriesPerSecond(url, 'classic', burst, burstDelay, body, prefetch);
  const sends = await withLevels(url, 'quorum', (transport, queue) => delayedSendLateness(transport, queue, delayedSends, sendSeed));

  const summary = (name: string, l: Lateness, perSec?: number) => ({
    design: name,
    messages: l.values.length,
    'p50 ms': percentile(l.values, 50),
    'p99 ms': percentile(l.values, 99),
    'max ms': Math.max(...l.values),
    early: l.values.filter((v) => v < 0).length,
    'run s': roundTo(l.wallMs / 1000, 1),
    'retries/s': perSec === undefined ? '-' : Math.round(perSec),
  });
  printTable(
    `rabbitmq delayed retries: ${n} messages, delays log-uniform 100 ms..5 min divided by ${scale} ` +
      `(${Math.min(...delays)} ms..${Math.max(...delays)} ms), sent at ${rate}/s; lateness = handed out - (scheduled + delay); ` +
      `retries/s: ${burst} retries of ${burstDelay} ms scheduled at once`,
    [
      summary('quorum delay levels (at-least-once)', quorum, quorumRate),
      summary('classic delay levels (at-most-once)', classic, classicRate),
      summary('naive per-message TTL, one queue', naive),
    ],
  );
  printDelayedSends(sends);
  const figures = (l: Lateness) => ({
    p50LatenessMs: percentile(l.values, 50),
    p99LatenessMs: percentile(l.values, 99),
    maxLatenessMs: Math.max(...l.values),
    earlyCount: l.values.filter((v) => v < 0).length,
  });
  printJson({
    scenario: 'rabbitmq-delays',
    messages: n,
    scale,
    ratePerSec: rate,
    minDelayMs: Math.min(...delays),
    maxDelayMs: Math.max(...delays),
    retryQueues: levelsUsed.size,
    distinctDelays: new Set(delays).size,
    burst,
    burstDelayMs: burstDelay,
    quorum: { ...figures(quorum), retriesPerSec: Math.round(quorumRate) },
    classic: { ...figures(classic), retriesPerSec: Math.round(classicRate) },
    naive: figures(naive),
    delayedSends,
    ...delayedSendJson(sends),
  });
}

/** Calls `send(i)` for i = 0..n-1 at `rate` per second, in small batches on a steady schedule. */
async function paced(n: number, rate: number, send: (i: number) => Promise<void>): Promise<void> {
  const started = performance.now();
  for (let i = 0; i < n; i++) {
    const due = started + (i / rate) * 1000;
    const wait = due - performance.now();
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
    await send(i);
  }
}

/** A transport on delay levels of `kind` under a prefix of its own, removed afterwards with its work queue. */
async function withLevels<T>(url: string, kind: DelayLevelType, fn: (transport: RabbitMqTransport, queue: string) => Promise<T>): Promise<T> {
  const suffix = randomUUID().slice(0, 8);
  const queue = `bench-delays-${suffix}`;
  const prefix = `bench-delays-${suffix}`;
  const transport = new RabbitMqTransport({ url, topologyPrefix: prefix, delayLevels: kind, connectionName: 'redeliver-bench-delays' });
  try {
    await transport.connect();
    return await fn(transport, queue);
  } finally {
    await transport.close();
    const admin = await amqp.connect(url);
    await deleteDelayTopology(admin, prefix, [queue]);
    await admin.close();
  }
}

/** Every message through RabbitMqTransport: first delivery schedules the retry, the second is measured. */
function throughDelayLevels(url: string, kind: DelayLevelType, delays: number[], body: Buffer, prefetch: number, rate: number): Promise<Lateness> {
  return withLevels(url, kind, async (transport, queue) => {
    const scheduled = new Map<string, number>();
    const lateness: number[] = [];
    const failures: unknown[] = [];
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    const started = performance.now();
    await transport.consume(
      queue,
      (d: Delivery) => {
        if (d.headers['back'] === '1') {
          const due = scheduled.get(d.id)!;
          lateness.push(Date.now() - due);
          void d.ack();
          if (lateness.length === delays.length) done();
          return;
        }
        const delay = Number(d.headers['delay']);
        scheduled.set(d.id, Date.now() + delay);
        d.retryLater(delay, { back: '1' }).catch((error: unknown) => failures.push(error));
      },
      { prefetch },
    );
    await paced(delays.length, rate, (i) => transport.send(queue, { id: `m-${i}`, body, headers: { delay: String(delays[i]) } }));
    await finished;
    if (failures.length > 0) throw new Error(`${failures.length} retries failed; first: ${String(failures[0])}`);
    return { values: lateness, wallMs: performance.now() - started };
  });
}

/** Delayed retries per second through levels of `kind`: `count` retries of `delayMs` scheduled as fast as they are confirmed. */
function retriesPerSecond(url: string, kind: DelayLevelType, count: number, delayMs: number, body: Buffer, prefetch: number): Promise<number> {
  return withLevels(url, kind, async (transport, queue) => {
    for (let i = 0; i < count; i += 500) {
      await Promise.all(Array.from({ length: Math.min(500, count - i) }, (_, j) => transport.send(queue, { id: `t-${i + j}`, body, headers: {} })));
    }
    const failures: unknown[] = [];
    let back = 0;
    let first: number | undefined;
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    await transport.consume(
      queue,
      (d: Delivery) => {
        if (d.headers['back'] === '1') {
          void d.ack();
          if (++back === count) done();
          return;
        }
        first ??= performance.now();
        d.retryLater(delayMs, { back: '1' }).catch((error: unknown) => failures.push(error));
      },
      { prefetch },
    );
    await finished;
    if (failures.length > 0) throw new Error(`${failures.length} retries failed; first: ${String(failures[0])}`);
    return count / ((performance.now() - first! - delayMs) / 1000);
  });
}

/** The design the AlphaSights post warns about: one retry queue, per-message TTL, dead-lettered back. */
async function throughNaiveQueue(url: string, delays: number[], body: Buffer, prefetch: number, rate: number): Promise<Lateness> {
  const suffix = randomUUID().slice(0, 8);
  const work = `bench-naive-work-${suffix}`;
  const retry = `bench-naive-retry-${suffix}`;
  const connection = await amqp.connect(url, { noDelay: true });
  const publish = await connection.createConfirmChannel();
  const consume = await connection.createChannel();
  const scheduled = new Map<string, number>();
  const lateness: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  try {
    await publish.assertQueue(work, { durable: true });
    await publish.assertQueue(retry, { durable: true, arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': work } });
    await consume.prefetch(prefetch, false);
    const started = performance.now();
    await consume.consume(work, (m) => {
      if (!m) return;
      const id = String(m.properties.messageId);
      if (m.properties.headers?.['back'] === '1') {
        lateness.push(Date.now() - scheduled.get(id)!);
        consume.ack(m);
        if (lateness.length === delays.length) done();
        return;
      }
      const delay = Number(m.properties.headers?.['delay']);
      scheduled.set(id, Date.now() + delay);
      // Copy confirmed before the original is acked, as redeliver does.
      publish.sendToQueue(retry, body, { persistent: true, messageId: id, expiration: String(delay), headers: { back: '1' } }, (error: unknown) => {
        if (error) consume.nack(m, false, true);
        else consume.ack(m);
      });
    });
    await paced(
      delays.length,
      rate,
      (i) =>
        new Promise<void>((resolve, reject) =>
          publish.sendToQueue(work, body, { persistent: true, messageId: `m-${i}`, headers: { delay: String(delays[i]) } }, (error: unknown) =>
            error ? reject(error as Error) : resolve(),
          ),
        ),
    );
    await finished;
    return { values: lateness, wallMs: performance.now() - started };
  } finally {
    await publish.deleteQueue(work).catch(() => undefined);
    await publish.deleteQueue(retry).catch(() => undefined);
    await connection.close().catch(() => undefined);
  }
}

