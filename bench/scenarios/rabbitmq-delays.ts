/**
 * `npm run bench -- rabbitmq-delays [--messages N] [--scale S] [--rate R] [--seed X] [--prefetch P] [--url URL]`
 *
 * How precisely delayed retries come back, through redeliver's delay levels
 * and through the naive design (one retry queue, per-message TTL via the
 * `expiration` property, dead-lettered back to the work queue), in the same
 * run against the same broker.
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
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { seededRandom } from '../../src/time/random.js';
import type { Delivery } from '../../src/transport/types.js';
import { delayLevels, RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { percentile, printJson, printTable, positiveArg } from '../report.js';

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
      url: { type: 'string', default: process.env['RABBITMQ_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672' },
    },
  });
  const n = positiveArg('messages', values.messages);
  const scale = Number(values.scale);
  if (!(scale >= 1)) throw new RangeError(`--scale must be a number >= 1, got ${values.scale}`);
  const prefetch = positiveArg('prefetch', values.prefetch);
  const rate = positiveArg('rate', values.rate);
  const random = seededRandom(positiveArg('seed', values.seed));
  const url = values.url;
  const body = randomBytes(BODY_BYTES);

  // Log-uniform in [100 ms, 5 min], then scaled, in whole milliseconds.
  const delays = Array.from({ length: n }, () => {
    const d = MIN_DELAY_MS * (MAX_DELAY_MS / MIN_DELAY_MS) ** random();
    return Math.max(1, Math.round(d / scale));
  });
  const levelsUsed = new Set(delays.flatMap((d) => delayLevels(d)));

  const ours = await throughDelayLevels(url, delays, body, prefetch, rate);
  const naive = await throughNaiveQueue(url, delays, body, prefetch, rate);

  const summary = (name: string, l: Lateness) => ({
    design: name,
    messages: l.values.length,
    'p50 ms': percentile(l.values, 50),
    'p99 ms': percentile(l.values, 99),
    'max ms': Math.max(...l.values),
    early: l.values.filter((v) => v < 0).length,
    'run s': Math.round(l.wallMs / 100) / 10,
  });
  printTable(
    `rabbitmq delayed retries: ${n} messages, delays log-uniform 100 ms..5 min divided by ${scale} ` +
      `(${Math.min(...delays)} ms..${Math.max(...delays)} ms), sent at ${rate}/s; lateness = handed out - (scheduled + delay)`,
    [summary('redeliver delay levels', ours), summary('naive per-message TTL, one queue', naive)],
  );
  printJson({
    scenario: 'rabbitmq-delays',
    messages: n,
    scale,
    ratePerSec: rate,
    minDelayMs: Math.min(...delays),
    maxDelayMs: Math.max(...delays),
    p50LatenessMs: percentile(ours.values, 50),
    p99LatenessMs: percentile(ours.values, 99),
    maxLatenessMs: Math.max(...ours.values),
    earlyCount: ours.values.filter((v) => v < 0).length,
    retryQueues: levelsUsed.size,
    distinctDelays: new Set(delays).size,
    naiveP50LatenessMs: percentile(naive.values, 50),
    naiveP99LatenessMs: percentile(naive.values, 99),
    naiveMaxLatenessMs: Math.max(...naive.values),
    naiveEarlyCount: naive.values.filter((v) => v < 0).length,
  });
}

/** Every message through RabbitMqTransport: first delivery schedules the retry, the second is measured. */
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

async function throughDelayLevels(url: string, delays: number[], body: Buffer, prefetch: number, rate: number): Promise<Lateness> {
  const queue = `bench-delays-${randomUUID().slice(0, 8)}`;
  const transport = new RabbitMqTransport({ url, connectionName: 'redeliver-bench-delays' });
  const scheduled = new Map<string, number>();
  const lateness: number[] = [];
  const failures: unknown[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  try {
    await transport.connect();
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
  } finally {
    const admin = await amqp.connect(url);
    const ch = await admin.createChannel();
    await ch.deleteQueue(queue).catch(() => undefined);
    await admin.close();
    await transport.close();
  }
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

