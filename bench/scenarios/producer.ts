/**
 * `npm run bench -- producer [--messages N] [--inflight C] [--rounds R] [--skip-throttle] [--url URL]`
 *
 * Two questions about sending through redeliver's `Producer` on RabbitMQ.
 *
 * 1. Throughput of awaited sends. N persistent 256-byte messages, C awaited
 *    sends in flight at any time (C workers, each awaiting its send before
 *    starting the next), against a bare amqplib confirm channel doing the
 *    same: `sendToQueue` with a per-publish confirm callback, C in flight.
 *    Both publish to the same queue (declared as the transport declares it),
 *    purged before each case. The two cases run back to back in each round,
 *    in alternating order; `ratio` is the median over the rounds of each
 *    round's redeliver / raw rate (pairing the cases cancels the drift of a
 *    machine shared with other work), and `rawPerSec` and `redeliverPerSec`
 *    are each case's median round. `cpuUsPerMessage` is this process's CPU
 *    time per message: the client's cost, steadier than the rates.
 *
 *    Also measured, without a broker: what bounding one attempt in time
 *    costs, a timer per attempt (`clock.sleep` with an AbortController,
 *    aborted when the attempt settles: the Producer's former way) against
 *    an entry in the shared `Deadlines` (its way now), over sends that
 *    settle at once.
 *
 * 2. Throttling. A queue bounded with `x-max-length` and
 *    `x-overflow: reject-publish` is filled to its limit, then M messages are
 *    sent by C awaited senders while nothing consumes. After a throttled
 *    period of T seconds a consumer starts and drains the queue at a fixed
 *    rate. Compared: the Producer (default settings: the RocketMQ backoff,
 *    1 s, then × 1.6 ± 20 %), the Producer with a short backoff (100 ms to
 *    1 s), and a naive loop on a bare confirm channel that publishes again
 *    at once after every nack. Reported per case: publish attempts per
 *    message, and the seconds from the moment the consumer starts until
 *    every message has been consumed (the floor is (limit + M) / rate).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { connectionBackoff } from '../../src/backoff/connection.js';
import { bytesCodec } from '../../src/codec.js';
import { Producer } from '../../src/producer/producer.js';
import { systemClock } from '../../src/time/clock.js';
import { Deadlines } from '../../src/time/deadlines.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import type { Backoff } from '../../src/backoff/types.js';
import { printJson, printTable, positiveArg, roundTo, medianRun, medianOf } from '../report.js';

const BODY_BYTES = 256;

interface Result {
  readonly case: string;
  readonly messages: number;
  readonly ms: number;
  readonly perSec: number;
  /** User + system CPU time of this process per message, in microseconds: the client's own cost. */
  readonly cpuUsPerMessage: number;
}

interface ThrottleResult {
  readonly case: string;
  readonly messages: number;
  readonly attempts: number;
  readonly attemptsPerMessage: number;
  readonly secondsToDrainAfterThrottleLifts: number;
  readonly failed: number;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '20000' },
      inflight: { type: 'string', default: '64' },
      rounds: { type: 'string', default: '7' },
      'throttle-limit': { type: 'string', default: '200' },
      'throttle-messages': { type: 'string', default: '1000' },
      'throttle-seconds': { type: 'string', default: '3' },
      'drain-rate': { type: 'string', default: '500' },
      'skip-throttle': { type: 'boolean', default: false },
      'skip-throughput': { type: 'boolean', default: false },
      url: { type: 'string', default: process.env['RABBITMQ_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672' },
    },
  });
  const n = positiveArg('messages', values.messages);
  const inflight = positiveArg('inflight', values.inflight);
  const rounds = positiveArg('rounds', values.rounds);
  const url = values.url;
  const figures: Record<string, unknown> = { scenario: 'producer' };

  if (!values['skip-throughput']) {
    const timers = await attemptTimerCost(200_000, inflight);
    printTable(`bounding an attempt in time, ${inflight} in flight, sends that settle at once (microseconds per attempt, CPU)`, [
      { way: 'timer per attempt (clock.sleep + AbortController)', 'us/attempt': roundTo(timers.perAttemptSleepUs, 3) },
      { way: 'shared Deadlines (one timer)', 'us/attempt': roundTo(timers.sharedDeadlinesUs, 3) },
    ]);
    figures['attemptTimerUs'] = { perAttemptSleep: roundTo(timers.perAttemptSleepUs, 3), sharedDeadlines: roundTo(timers.sharedDeadlinesUs, 3) };
    const { raw, redeliver, ratios } = await throughput(url, n, inflight, rounds);
    const ratio = medianOf(ratios);
    printTable(`awaited sends, ${n} persistent ${BODY_BYTES}-byte messages, ${inflight} in flight (median of ${rounds} rounds)`, [
      row(raw, raw),
      row(redeliver, raw),
    ]);
    console.log(`ratio per round (redeliver / raw): ${ratios.map((r) => roundTo(r, 3)).join(', ')}; median ${roundTo(ratio, 3)}`);
    Object.assign(figures, {
      messages: n,
      bodyBytes: BODY_BYTES,
      inflight,
      rounds,
      rawPerSec: Math.round(raw.perSec),
      redeliverPerSec: Math.round(redeliver.perSec),
      ratio: roundTo(ratio, 3),
      rawCpuUsPerMessage: roundTo(raw.cpuUsPerMessage, 3),
      redeliverCpuUsPerMessage: roundTo(redeliver.cpuUsPerMessage, 3),
    });
  }

  if (!values['skip-throttle']) {
    const limit = positiveArg('throttle-limit', values['throttle-limit']);
    const messages = positiveArg('throttle-messages', values['throttle-messages']);
    const throttledMs = positiveArg('throttle-seconds', values['throttle-seconds']) * 1000;
    const rate = positiveArg('drain-rate', values['drain-rate']);
    const settings = { url, limit, messages, throttledMs, rate, inflight: Math.min(inflight, 32) };
    const producer = await throttling(settings, 'Producer (default backoff: 1 s, x1.6)', undefined);
    const producerShort = await throttling(settings, 'Producer (backoff 100 ms .. 1 s)', connectionBackoff({ initialMs: 100, maxMs: 1_000 }));
    const naive = await throttling(settings, 'naive: publish again at once on nack', 'naive');
    const floor = (limit + messages) / rate;
    printTable(
      `throttling: queue x-max-length ${limit} (reject-publish), full; ${messages} messages by ${settings.inflight} senders; ` +
        `consumer starts after ${throttledMs / 1000} s and drains ${rate}/s (floor ${roundTo(floor, 3)} s)`,
      [producer, producerShort, naive].map((r) => ({
        case: r.case,
        messages: r.messages,
        attempts: r.attempts,
        'attempts/message': roundTo(r.attemptsPerMessage, 3),
        's to drain after lift': roundTo(r.secondsToDrainAfterThrottleLifts, 3),
        failed: r.failed,
      })),
    );
    Object.assign(figures, {
      throttle: {
        maxLength: limit,
        messages,
        senders: settings.inflight,
        throttledSeconds: throttledMs / 1000,
        drainPerSec: rate,
        floorSeconds: roundTo(floor, 3),
        producer: { attemptsPerMessage: roundTo(producer.attemptsPerMessage, 3), secondsToDrainAfterThrottleLifts: roundTo(producer.secondsToDrainAfterThrottleLifts, 3), failed: producer.failed },
        producerShortBackoff: {
          attemptsPerMessage: roundTo(producerShort.attemptsPerMessage, 3),
          secondsToDrainAfterThrottleLifts: roundTo(producerShort.secondsToDrainAfterThrottleLifts, 3),
          failed: producerShort.failed,
        },
        naive: { attemptsPerMessage: roundTo(naive.attemptsPerMessage, 3), secondsToDrainAfterThrottleLifts: roundTo(naive.secondsToDrainAfterThrottleLifts, 3), failed: naive.failed },
      },
    });
  }
  printJson(figures);
}

// ---------------------------------------------------------------------------
// 1. Throughput

async function throughput(url: string, n: number, inflight: number, rounds: number): Promise<{ raw: Result; redeliver: Result; ratios: number[] }> {
  const queue = `bench-producer-${randomUUID().slice(0, 8)}`;
  const body = randomBytes(BODY_BYTES);
  // Declare the queue exactly as the transport does, so both cases publish to the same queue.
  const setup = new RabbitMqTransport({ url, connectionName: 'redeliver-bench-setup' });
  await setup.send(queue, { id: 'warm-up', body, headers: {} });
  await setup.close();
  const admin = await amqp.connect(url);
  const adminChannel = await admin.createChannel();
  try {
    const runs: Record<'raw' | 'redeliver', Result[]> = { raw: [], redeliver: [] };
    const ratios: number[] = [];
    for (let round = 0; round < rounds; round++) {
      // Alternate which case goes first, so neither always runs on a queue the other just purged.
      const order = round % 2 === 0 ? (['raw', 'redeliver'] as const) : (['redeliver', 'raw'] as const);
      for (const which of order) {
        await adminChannel.purgeQueue(queue);
        runs[which].push(which === 'raw' ? await rawSends(url, queue, body, n, inflight) : await producerSends(url, queue, body, n, inflight));
      }
      ratios.push(runs.redeliver.at(-1)!.perSec / runs.raw.at(-1)!.perSec);
    }
    return { raw: medianRun(runs.raw), redeliver: medianRun(runs.redeliver), ratios };
  } finally {
    await adminChannel.deleteQueue(queue).catch(() => undefined);
    await admin.close().catch(() => undefined);
  }
}

/** `workers` loops, each awaiting one send at a time, until `n` sends in all. */
async function workers(n: number, inflight: number, send: (i: number) => Promise<unknown>): Promise<number> {
  return (await timedWorkers(n, inflight, send)).ms;
}

/** {@link workers}, with this process's CPU time over the run. */
async function timedWorkers(n: number, inflight: number, send: (i: number) => Promise<unknown>): Promise<{ ms: number; cpuUs: number }> {
  let next = 0;
  const cpu = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: inflight }, async () => {
      for (let i = next++; i < n; i = next++) await send(i);
    }),
  );
  const ms = performance.now() - started;
  const used = process.cpuUsage(cpu);
  return { ms, cpuUs: used.user + used.system };
}

async function rawSends(url: string, queue: string, body: Buffer, n: number, inflight: number): Promise<Result> {
  const connection = await amqp.connect(url, { noDelay: true });
  const channel = await connection.createConfirmChannel();
  const publish = (id: string) =>
    new Promise<void>((resolve, reject) => {
      channel.sendToQueue(queue, body, { persistent: true, messageId: id, headers: {} }, (error: unknown) => (error ? reject(error as Error) : resolve()));
    });
  await publish('warm-up');
  const { ms, cpuUs } = await timedWorkers(n, inflight, (i) => publish(`raw-${i}`));
  await connection.close();
  return result('raw amqplib confirm channel', n, ms, cpuUs);
}

async function producerSends(url: string, queue: string, body: Buffer, n: number, inflight: number): Promise<Result> {
  const transport = new RabbitMqTransport({ url, connectionName: 'redeliver-bench' });
  const producer = new Producer<Uint8Array>({ transport, codec: bytesCodec });
  await producer.send(queue, body, { id: 'warm-up' });
  const { ms, cpuUs } = await timedWorkers(n, inflight, (i) => producer.send(queue, body, { id: `p-${i}` }));
  if (producer.stats.sent !== n + 1) throw new Error(`producer sent ${producer.stats.sent}, expected ${n + 1}`);
  await transport.close();
  return result('redeliver Producer', n, ms, cpuUs);
}

/** CPU microseconds per attempt of each way to bound it in time (best of 3 runs each). */
async function attemptTimerCost(n: number, inflight: number): Promise<{ perAttemptSleepUs: number; sharedDeadlinesUs: number }> {
  const settled = () => Promise.resolve();
  // The Producer's former #attempt: a sleep per attempt, raced against the send, aborted when it settles.
  const perAttempt = async () => {
    const timer = new AbortController();
    const timeout = systemClock.sleep(20_000, timer.signal).then(
      () => {
        throw new Error('timeout');
      },
      () => undefined,
    );
    try {
      await Promise.race([settled(), timeout]);
    } finally {
      timer.abort();
    }
  };
  const deadlines = new Deadlines(systemClock);
  const shared = () => deadlines.race(settled(), systemClock.now() + 20_000, () => new Error('timeout'));
  const measure = async (attempt: () => Promise<void>) => {
    let best = Infinity;
    for (let round = 0; round < 3; round++) {
      const cpu = process.cpuUsage();
      await workers(n, inflight, attempt);
      const used = process.cpuUsage(cpu);
      best = Math.min(best, (used.user + used.system) / n);
    }
    return best;
  };
  const baseline = await measure(settled);
  return { perAttemptSleepUs: (await measure(perAttempt)) - baseline, sharedDeadlinesUs: (await measure(shared)) - baseline };
}

// ---------------------------------------------------------------------------
// 2. Throttling

interface ThrottleSettings {
  readonly url: string;
  readonly limit: number;
  readonly messages: number;
  readonly throttledMs: number;
  readonly rate: number;
  readonly inflight: number;
}

async function throttling(settings: ThrottleSettings, name: string, mode: Backoff | undefined | 'naive'): Promise<ThrottleResult> {
  const { url, limit, messages, throttledMs, rate, inflight } = settings;
  const queue = `bench-throttle-${randomUUID().slice(0, 8)}`;
  const body = randomBytes(BODY_BYTES);
  const transport = new RabbitMqTransport({ url, connectionName: 'redeliver-bench-throttle', maxLength: limit });
  const admin = await amqp.connect(url);
  const adminChannel = await admin.createConfirmChannel();
  let consumer: amqp.ChannelModel | undefined;
  try {
    // Declared by the transport with x-max-length and reject-publish; then filled to the limit.
    await transport.send(queue, { id: 'fill-0', body, headers: {} });
    for (let i = 1; i < limit; i++) adminChannel.sendToQueue(queue, body, { persistent: true, messageId: `fill-${i}` });
    await adminChannel.waitForConfirms();

    let attempts = 0;
    let failed = 0;
    let sendAll: Promise<number>;
    if (mode === 'naive') {
      const connection = await amqp.connect(url, { noDelay: true });
      const channel = await connection.createConfirmChannel();
      const publish = (id: string) =>
        new Promise<boolean>((resolve) => {
          attempts++;
          channel.sendToQueue(queue, body, { persistent: true, messageId: id, headers: {} }, (error: unknown) => resolve(!error));
        });
      sendAll = workers(messages, inflight, async (i) => {
        while (!(await publish(`m-${i}`)));
      }).finally(() => connection.close());
    } else {
      const producer = new Producer<Uint8Array>({ transport, codec: bytesCodec, retry: mode === undefined ? { timeoutMs: 120_000 } : { throttleBackoff: mode, timeoutMs: 120_000 } });
      sendAll = workers(messages, inflight, (i) =>
        producer.send(queue, body, { id: `m-${i}` }).then(
          () => undefined,
          () => void failed++,
        ),
      ).then((ms) => {
        attempts = producer.stats.sent + producer.stats.retries + producer.stats.failed;
        return ms;
      });
    }

    await new Promise((resolve) => setTimeout(resolve, throttledMs));
    // The consumer: prefetch 1, one ack every 1000/rate ms, so the drain rate is fixed.
    consumer = await amqp.connect(url);
    const channel = await consumer.createChannel();
    await channel.prefetch(1);
    let consumed = 0;
    const lifted = performance.now();
    const interval = 1000 / rate;
    let nextAckAt = lifted;
    await channel.consume(queue, (message) => {
      if (!message) return;
      nextAckAt = Math.max(nextAckAt + interval, performance.now());
      setTimeout(() => {
        channel.ack(message);
        consumed++;
      }, Math.max(0, nextAckAt - performance.now()));
    });
    await sendAll;
    // Drained: the pre-filled messages and every message that was sent have been consumed.
    const expected = limit + messages - failed;
    while (consumed < expected) await new Promise((resolve) => setTimeout(resolve, 2));
    const seconds = (performance.now() - lifted) / 1000;
    return { case: name, messages, attempts, attemptsPerMessage: attempts / messages, secondsToDrainAfterThrottleLifts: seconds, failed };
  } finally {
    await transport.close();
    await consumer?.close().catch(() => undefined);
    await adminChannel.deleteQueue(queue).catch(() => undefined);
    await admin.close().catch(() => undefined);
  }
}

// ---------------------------------------------------------------------------

function result(name: string, messages: number, ms: number, cpuUs: number): Result {
  return { case: name, messages, ms, perSec: (messages / ms) * 1000, cpuUsPerMessage: cpuUs / messages };
}

function row(r: Result, raw: Result): Record<string, string | number> {
  return {
    case: r.case,
    messages: r.messages,
    'time ms': Math.round(r.ms),
    'msgs/s': Math.round(r.perSec),
    'vs raw': roundTo(r.perSec / raw.perSec, 3),
    'client CPU us/msg': roundTo(r.cpuUsPerMessage, 3),
  };
}

