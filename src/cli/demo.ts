import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { linear } from '../backoff/linear.js';
import { Endpoint } from '../endpoint/endpoint.js';
import { HEADER } from '../headers/names.js';
import { UnrecoverableError } from '../policy/errors.js';
import { Producer } from '../producer/producer.js';
import { seededRandom } from '../time/random.js';
import { SqliteTransport } from '../transports/sqlite/index.js';
import type { Delivery } from '../transport/types.js';

/** Options of the demo. */
export interface DemoOptions {
  /** Messages sent. Default 3000. */
  messages: number;
  /** Scale applied to the delayed-retry delays (10, 20, 30 s). Default 0.05: 0.5, 1 and 1.5 s. */
  delayScale: number;
  /** The SQLite file. Default a new file in a temporary folder, removed afterwards. */
  file?: string | undefined;
  /** Where progress goes. */
  out: NodeJS.WriteStream;
}

class ValidationError extends UnrecoverableError {
  override readonly name = 'ValidationError';
}

interface Order {
  orderId: number;
  amount: number;
}

/**
 * A few thousand orders through an endpoint on a SQLite file. The payment
 * service they call goes down for two seconds; a handful of orders are
 * poison. Immediate retries absorb the blips, delayed retries ride out the
 * outage, and the poison ends in the error queue with its story.
 */
export async function runDemo(options: DemoOptions): Promise<number> {
  const { out } = options;
  const dir = options.file ? undefined : mkdtempSync(join(tmpdir(), 'redeliver-demo-'));
  const file = options.file ?? join(dir!, 'demo.db');
  const random = seededRandom(7);
  const transport = new SqliteTransport({ path: file });
  const producer = new Producer<Order>({ transport });

  const started = Date.now();
  const outage = { from: 800, to: 2_800 };
  const paymentService = (order: Order) => {
    const t = Date.now() - started;
    if (t >= outage.from && t < outage.to) throw new Error('ECONNREFUSED payments:443 (the payment service is down)');
    if (random() < 0.02) throw new Error(`deadlock victim on orders row ${order.orderId}`);
  };
  const poison = new Set([17, 404, 1234, 2718].filter((n) => n < options.messages));
  const buggy = new Set([999, 2024].filter((n) => n < options.messages));

  const endpoint = new Endpoint<Order>({
    name: 'orders',
    transport,
    concurrency: 32,
    random,
    recoverability: {
      immediateRetries: 5,
      delayedRetries: 3,
      delayedBackoff: linear(10_000 * options.delayScale),
    },
    handler: (order) => {
      if (poison.has(order.orderId)) throw new ValidationError(`order ${order.orderId} has a negative amount (${order.amount})`);
      if (buggy.has(order.orderId)) throw new TypeError(`Cannot read properties of undefined (reading 'currency') at order ${order.orderId}`);
      paymentService(order);
    },
  });

  out.write(`redeliver demo: ${options.messages} orders through an endpoint on ${file}\n`);
  out.write(`the payment service is down from ${outage.from / 1000} s to ${outage.to / 1000} s; ${poison.size + buggy.size} orders are poison\n`);
  out.write(`delayed retries are scaled by ${options.delayScale}: ${[1, 2, 3].map((n) => `${(n * 10 * options.delayScale).toFixed(1)} s`).join(', ')} instead of 10, 20, 30 s\n\n`);

  await endpoint.start();
  for (let i = 0; i < options.messages; i++) {
    await producer.send('orders', { orderId: i, amount: poison.has(i) ? -5 : 10 + (i % 90) }, { id: `order-${i}` });
  }
  await transport.send('orders', { id: 'order-garbled', body: new TextEncoder().encode('{"orderId": 7,'), headers: {} });
  const total = options.messages + 1;

  const progress = () => {
    const s = endpoint.stats;
    const seconds = (Date.now() - started) / 1000;
    return `handled ${s.handled}/${total}  immediate retries ${s.immediateRetries}  delayed retries ${s.delayedRetries}  error queue ${s.deadLettered}  ${Math.round(s.handled / seconds)} msg/s  ${seconds.toFixed(1)} s`;
  };
  const live = out.isTTY === true;
  let lastLine = 0;
  while (endpoint.stats.handled + endpoint.stats.deadLettered < total) {
    await new Promise((r) => setTimeout(r, 100));
    if (live) out.write(`\r${progress()}\u001b[K`);
    else if (Date.now() - lastLine >= 1_000) {
      out.write(`${progress()}\n`);
      lastLine = Date.now();
    }
    if (Date.now() - started > 120_000) throw new Error(`the demo did not finish in 120 s: ${progress()}`);
  }
  out.write(live ? `\r${progress()}\u001b[K\n\n` : `${progress()}\n\n`);
  await endpoint.stop();

  const s = endpoint.stats;
  out.write(`summary: ${s.handled} handled, ${s.immediateRetries} immediate retries, ${s.delayedRetries} delayed retries, ${s.deadLettered} moved to the error queue, in ${((Date.now() - started) / 1000).toFixed(1)} s\n\n`);
  const dead = await peek(transport, 'error', s.deadLettered);
  out.write(`error queue (${dead.length}):\n`);
  for (const d of dead.slice(0, 8)) {
    const h = d.headers;
    out.write(`  ${d.id.padEnd(14)} ${(h[HEADER.failureReason] ?? '').padEnd(18)} after ${h[HEADER.failureAttempts]} attempt(s): ${h[HEADER.failureErrorName]}: ${h[HEADER.failureMessage]}\n`);
  }
  await transport.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
  return s.handled + s.deadLettered === total ? 0 : 1;
}

/** Reads up to `count` messages of a queue and gives them back untouched. */
async function peek(transport: SqliteTransport, queue: string, count: number): Promise<Delivery[]> {
  const seen: Delivery[] = [];
  if (count === 0) return seen;
  const sub = await transport.consume(queue, (d) => void seen.push(d), { prefetch: count });
  for (let waited = 0; seen.length < count && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
  await sub.pause();
  for (const d of seen) await d.release();
  await sub.close();
  return seen.sort((a, b) => a.id.localeCompare(b.id));
}
