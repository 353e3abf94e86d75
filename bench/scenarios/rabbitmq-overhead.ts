/**
 * `npm run bench -- rabbitmq-overhead [--messages N] [--prefetch P] [--rounds R] [--url URL]`
 *
 * The success path through redeliver against a bare amqplib consumer, same
 * broker, same run, same queue. Before each case the queue is filled with N
 * persistent 256-byte messages (with a message id, as redeliver sends them);
 * the case then consumes all N with prefetch P and acks each one, and the
 * figure is N divided by the time from the start of consuming to the last ack.
 *
 * 1. raw: amqplib `consume` with manual `ack` of each message, nothing else.
 * 1b. raw, coalesced acks: the same, but one `ack(multiple)` per event-loop
 *    turn, the trick the transport uses: the ceiling for this broker.
 * 2. transport: RabbitMqTransport `consume` + `Delivery.ack()` (header
 *    decoding, delivery objects, settlement bookkeeping).
 * 3. endpoint: an Endpoint over RabbitMqTransport with concurrency P and a
 *    handler that does nothing: what a user of redeliver runs.
 *
 * The cases take turns, round after round; each reports its median round.
 * `redeliverPerSec` is the endpoint case, `ratio` = redeliverPerSec / rawPerSec
 * (the plain raw consumer); `ceilingRatio` compares with the coalesced one.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { bytesCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { printJson, printTable, positiveArg, roundTo, medianRun } from '../report.js';

const BODY_BYTES = 256;

interface Result {
  readonly case: string;
  readonly messages: number;
  readonly ms: number;
  readonly perSec: number;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '50000' },
      prefetch: { type: 'string', default: '100' },
      rounds: { type: 'string', default: '3' },
      url: { type: 'string', default: process.env['RABBITMQ_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672' },
    },
  });
  const n = positiveArg('messages', values.messages);
  const prefetch = positiveArg('prefetch', values.prefetch);
  const rounds = positiveArg('rounds', values.rounds);
  const url = values.url;
  const queue = `bench-overhead-${randomUUID().slice(0, 8)}`;
  const body = randomBytes(BODY_BYTES);

  // Declare the queue exactly as the transport does, so every case reads the same queue.
  const setup = new RabbitMqTransport({ url, connectionName: 'redeliver-bench-setup' });
  await setup.send(queue, { id: 'warm-up', body, headers: {} });
  await setup.close();
  const admin = await amqp.connect(url);
  const adminChannel = await admin.createConfirmChannel();

  const fill = async () => {
    await adminChannel.purgeQueue(queue);
    for (let i = 0; i < n; i++) {
      if (!adminChannel.sendToQueue(queue, body, { persistent: true, messageId: `m-${i}` })) {
        await new Promise((resolve) => adminChannel.once('drain', resolve));
      }
      if (i % 5_000 === 4_999) await adminChannel.waitForConfirms();
    }
    await adminChannel.waitForConfirms();
    const { messageCount } = await adminChannel.checkQueue(queue);
    if (messageCount !== n) throw new Error(`queue holds ${messageCount} messages, expected ${n}`);
  };

  try {
    const runs: Record<string, Result[]> = { raw: [], rawCoalesced: [], transport: [], endpoint: [] };
    for (let round = 0; round < rounds; round++) {
      await fill();
      runs['raw']!.push(await rawConsumer(url, queue, n, prefetch, false));
      await fill();
      runs['rawCoalesced']!.push(await rawConsumer(url, queue, n, prefetch, true));
      await fill();
      runs['transport']!.push(await transportConsumer(url, queue, n, prefetch));
      await fill();
      runs['endpoint']!.push(await endpointConsumer(url, queue, n, prefetch));
    }
    const [raw, rawCoalesced, transport, endpoint] = Object.values(runs).map((r) => medianRun(r)) as [Result, Result, Result, Result];
    printTable(`rabbitmq success path, ${n} persistent ${BODY_BYTES}-byte messages, prefetch ${prefetch} (median of ${rounds} rounds)`, [
      row(raw, raw),
      row(rawCoalesced, raw),
      row(transport, raw),
      row(endpoint, raw),
    ]);
    printJson({
      scenario: 'rabbitmq-overhead',
      messages: n,
      bodyBytes: BODY_BYTES,
      prefetch,
      rounds,
      rawPerSec: Math.round(raw.perSec),
      rawCoalescedPerSec: Math.round(rawCoalesced.perSec),
      transportPerSec: Math.round(transport.perSec),
      redeliverPerSec: Math.round(endpoint.perSec),
      ratio: roundTo(endpoint.perSec / raw.perSec, 3),
      transportRatio: roundTo(transport.perSec / raw.perSec, 3),
      ceilingRatio: roundTo(endpoint.perSec / rawCoalesced.perSec, 3),
    });
  } finally {
    await adminChannel.deleteQueue(queue).catch(() => undefined);
    await admin.close().catch(() => undefined);
  }
}

async function rawConsumer(url: string, queue: string, n: number, prefetch: number, coalesce: boolean): Promise<Result> {
  const connection = await amqp.connect(url, { noDelay: true });
  const channel = await connection.createChannel();
  await channel.prefetch(prefetch, false);
  let acked = 0;
  let last: amqp.ConsumeMessage | undefined;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const flush = () => {
    // Every message up to `last` was handled in order: one frame acks them all.
    if (last) channel.ack(last, true);
    last = undefined;
    if (acked === n) done();
  };
  const started = performance.now();
  await channel.consume(
    queue,
    (message) => {
      if (!message) return;
      acked++;
      if (!coalesce) {
        channel.ack(message);
        if (acked === n) done();
        return;
      }
      if (!last) setImmediate(flush);
      last = message;
    },
    { noAck: false },
  );
  await finished;
  const ms = performance.now() - started;
  await connection.close();
  return result(coalesce ? 'raw amqplib, coalesced acks' : 'raw amqplib', n, ms);
}

async function transportConsumer(url: string, queue: string, n: number, prefetch: number): Promise<Result> {
  const transport = new RabbitMqTransport({ url, connectionName: 'redeliver-bench' });
  await transport.connect();
  let acked = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const started = performance.now();
  await transport.consume(
    queue,
    (delivery) => {
      void delivery.ack().then(() => {
        if (++acked === n) done();
      });
    },
    { prefetch },
  );
  await finished;
  const ms = performance.now() - started;
  await transport.close();
  return result('RabbitMqTransport', n, ms);
}

async function endpointConsumer(url: string, queue: string, n: number, prefetch: number): Promise<Result> {
  const transport = new RabbitMqTransport({ url, connectionName: 'redeliver-bench' });
  await transport.connect();
  const endpoint = new Endpoint<Uint8Array>({ name: 'bench', queue, transport, handler: async () => undefined, concurrency: prefetch, codec: bytesCodec });
  let handled = 0;
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  endpoint.on('handled', () => {
    if (++handled === n) done();
  });
  const started = performance.now();
  await endpoint.start();
  await finished;
  const ms = performance.now() - started;
  await endpoint.stop();
  await transport.close();
  return result('Endpoint + RabbitMqTransport', n, ms);
}

function result(name: string, messages: number, ms: number): Result {
  return { case: name, messages, ms, perSec: (messages / ms) * 1000 };
}

function row(r: Result, raw: Result): Record<string, string | number> {
  return { case: r.case, messages: r.messages, 'time ms': Math.round(r.ms), 'msgs/s': Math.round(r.perSec), 'vs raw': roundTo(r.perSec / raw.perSec, 3) };
}

