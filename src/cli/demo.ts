import { existsSync, rmSync } from 'node:fs';
import { linear } from '../backoff/linear.js';
import { Endpoint } from '../endpoint/endpoint.js';
import { HEADER } from '../headers/names.js';
import { UnrecoverableError } from '../policy/errors.js';
import { Producer } from '../producer/producer.js';
import { seededRandom } from '../time/random.js';
import { SqliteTransport } from '../transports/sqlite/index.js';
import type { JetStreamTransport } from '../transports/jetstream/index.js';
import type { NsqTransport } from '../transports/nsq/index.js';
import type { RedisTransport } from '../transports/redis/index.js';
import { serverOf } from '../transports/redis/cluster.js';
import type { RocketMqTransport } from '../transports/rocketmq/index.js';
import type { ErrorEntry } from '../transport/error-queue.js';
import { parseNsqTarget } from './nsq-target.js';
import { closingConnection, connectNats, jetStreamModule, NATS_PREFIX_ENV, ROCKETMQ_GROUP_ENV, ROCKETMQ_NAME_SERVER_ENV, rocketMqEndpoints, UsageError } from './open-transport.js';

/** Options of the demo. */
export interface DemoOptions {
  /** Messages sent. Default 3000. */
  messages: number;
  /** Scale applied to the delayed-retry delays (10, 20, 30 s). Default 0.05: 0.5, 1 and 1.5 s. */
  delayScale: number;
  /**
   * The SQLite file, kept afterwards for the CLI and the dashboard. Default
   * {@link DEMO_FILE} in the current folder, replaced (with its `-wal` and
   * `-shm` files) when it exists. A file named here must not exist yet.
   */
  file?: string | undefined;
  /** Where the demo's queues live: `sqlite` (a file), `redis`, `jetstream`, `nsq` or `rocketmq` (a server). Default `sqlite`. */
  transport?: 'sqlite' | 'redis' | 'jetstream' | 'nsq' | 'rocketmq' | undefined;
  /**
   * The server, with `transport: 'redis'` (default `redis://127.0.0.1:6379`),
   * `'jetstream'` (default `nats://127.0.0.1:4222`), `'nsq'` (default `nsq://127.0.0.1:4150`)
   * or `'rocketmq'` (the gRPC proxy, default `rocketmq://127.0.0.1:8081`; the name server from
   * `REDELIVER_ROCKETMQ_NAME_SERVER`, else the proxy's host on 9876).
   */
  url?: string | undefined;
  /** Where progress goes. */
  out: NodeJS.WriteStream;
}

/** The key prefix of the demo's queues on Redis: an earlier run's keys under it are replaced, no others are touched. */
export const DEMO_REDIS_PREFIX = 'redeliver-demo';

/** The stream prefix of the demo's queues on NATS JetStream: an earlier run's streams under it are replaced, no others are touched. */
export const DEMO_NATS_PREFIX = 'redeliver-demo';

/**
 * The demo's names on RocketMQ, where topics have no prefix: its consumer
 * group, and its work and error topics. An earlier run's topics and group
 * are replaced, no others are touched.
 */
export const DEMO_ROCKETMQ = { group: 'redeliver-demo', queue: 'redeliver-demo-orders', errorQueue: 'redeliver-demo-error' } as const;

class ValidationError extends UnrecoverableError {
  override readonly name = 'ValidationError';
}

interface Order {
  orderId: number;
  amount: number;
}

/** The demo's file when none is named: in the current folder, ignored by git. */
export const DEMO_FILE = 'redeliver-demo.db';

/**
 * A few thousand orders through an endpoint on a SQLite file. The payment
 * service they call goes down for two seconds; a handful of orders are
 * poison. Immediate retries absorb the blips, delayed retries ride out the
 * outage, and the poison ends in the error queue with its story.
 */
export async function runDemo(options: DemoOptions): Promise<void> {
  const { out } = options;
  const { transport, where, replaced, target, note, queue = 'orders', errorQueue = 'error' } = await openDemoTransport(options);
  const random = seededRandom(7);
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
    queue,
    transport,
    concurrency: 32,
    random,
    recoverability: {
      immediateRetries: 5,
      delayedRetries: 3,
      delayedBackoff: linear(10_000 * options.delayScale),
      // Named on every transport, so the next commands and the listing below read the same queue (NSQ's own default is `orders.error`).
      errorQueue,
    },
    handler: (order) => {
      if (poison.has(order.orderId)) throw new ValidationError(`order ${order.orderId} has a negative amount (${order.amount})`);
      if (buggy.has(order.orderId)) throw new TypeError(`Cannot read properties of undefined (reading 'currency') at order ${order.orderId}`);
      paymentService(order);
    },
  });

  out.write(`redeliver demo: ${options.messages} orders through an endpoint on ${where}${replaced ? ` (replaced the ${where} of an earlier run)` : ''}\n`);
  if (note !== undefined) out.write(`${note}\n`);
  out.write(`the payment service is down from ${outage.from / 1000} s to ${outage.to / 1000} s; ${poison.size + buggy.size} orders are poison\n`);
  out.write(`delayed retries are scaled by ${options.delayScale}: ${[1, 2, 3].map((n) => `${(n * 10 * options.delayScale).toFixed(1)} s`).join(', ')} instead of 10, 20, 30 s\n\n`);

  // Each of this run's messages counts once, when first handled or moved to the error queue: a copy seen again
  // (at-least-once delivery, or a delayed retry of an earlier run that the broker still held when its topics were replaced) does not end the run early.
  const ours = new Set([...Array.from({ length: options.messages }, (_, i) => `order-${i}`), 'order-garbled']);
  const finished = new Set<string>();
  let seenAgain = 0;
  const finish = (messageId: string) => {
    if (!ours.has(messageId)) return;
    if (finished.has(messageId)) seenAgain++;
    else finished.add(messageId);
  };
  endpoint.on('handled', (e) => finish(e.messageId));
  endpoint.on('deadLettered', (e) => finish(e.messageId));
  await endpoint.start();
  for (let i = 0; i < options.messages; i++) {
    await producer.send(queue, { orderId: i, amount: poison.has(i) ? -5 : 10 + (i % 90) }, { id: `order-${i}` });
  }
  await transport.send(queue, { id: 'order-garbled', body: new TextEncoder().encode('{"orderId": 7,'), headers: {} });
  const total = ours.size;

  const progress = () => {
    const s = endpoint.stats;
    const seconds = (Date.now() - started) / 1000;
    return `handled ${s.handled}/${total}  immediate retries ${s.immediateRetries}  delayed retries ${s.delayedRetries}  error queue ${s.deadLettered}  ${Math.round(s.handled / seconds)} msg/s  ${seconds.toFixed(1)} s`;
  };
  const live = out.isTTY === true;
  let lastLine = 0;
  while (finished.size < total) {
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
  out.write(`summary: ${s.handled} handled, ${s.immediateRetries} immediate retries, ${s.delayedRetries} delayed retries, ${s.deadLettered} moved to the error queue, in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
  if (seenAgain > 0) out.write(`${seenAgain} of them came more than once (delivery is at least once; or an earlier run's delayed retry the broker still held)\n`);
  out.write('\n');
  const entries = await transport.errorQueue.browse(errorQueue, { limit: 100 });
  out.write(`error queue (${await transport.errorQueue.count(errorQueue)}):\n`);
  for (const e of entries.slice(0, 8)) {
    const h = e.headers;
    out.write(`  ${e.messageId.padEnd(14)} ${(h[HEADER.failureReason] ?? '').padEnd(18)} after ${h[HEADER.failureAttempts]} attempt(s): ${h[HEADER.failureErrorName]}: ${h[HEADER.failureMessage]}\n`);
  }
  await transport.close();
  out.write(`\nthe demo's messages stay in ${where}; next:\n`);
  for (const line of nextCommands(target, poisonEntry(entries))) out.write(`  ${line}\n`);
}

interface DemoTransport {
  readonly transport: SqliteTransport | RedisTransport | JetStreamTransport | NsqTransport | RocketMqTransport;
  /** The work queue, when not `orders`. */
  readonly queue?: string;
  /** The error queue, when not `error`. */
  readonly errorQueue?: string;
  /** What the demo runs on, for its first line. */
  readonly where: string;
  readonly replaced: boolean;
  /** How the CLI reaches the demo's queues: a file, or a URL with the demo's key prefix in the environment. */
  readonly target: DemoTarget;
  /** A line about the server's durability, when it is worth saying. */
  readonly note?: string;
}

/** How the CLI reaches the demo's queues. */
export interface DemoTarget {
  /** A file path or a URL. */
  readonly target: string;
  /** Environment settings the commands need, as `NAME=value`. */
  readonly env?: string;
  /** The error queue, when the commands must name it (not `error`). */
  readonly errorQueue?: string;
}

async function openDemoTransport(options: DemoOptions): Promise<DemoTransport> {
  if ((options.transport ?? 'sqlite') === 'sqlite') {
    const file = options.file ?? DEMO_FILE;
    const replaced = options.file === undefined ? removeDemoFile(file) : refuseExisting(file);
    return { transport: new SqliteTransport({ path: file }), where: file, replaced, target: { target: file } };
  }
  if (options.transport === 'jetstream') return openJetStreamDemo(options);
  if (options.transport === 'nsq') return openNsqDemo(options);
  if (options.transport === 'rocketmq') return openRocketMqDemo(options);
  if (options.transport !== 'redis') throw new UsageError(`--transport must be sqlite, redis, jetstream, nsq or rocketmq, got ${String(options.transport)}`);
  if (options.file !== undefined) throw new UsageError('--file is for the SQLite demo; the Redis demo keeps its queues under the key prefix redeliver-demo');
  let module: typeof import('../transports/redis/index.js');
  try {
    module = await import('../transports/redis/index.js');
  } catch (error) {
    throw new UsageError(`the Redis demo needs the ioredis package: npm install ioredis (${(error as Error).message})`);
  }
  const url = options.url ?? module.REDIS_DEFAULTS.url;
  const transport = new module.RedisTransport({ url, keyPrefix: DEMO_REDIS_PREFIX, connectionName: 'redeliver-demo', checkServer: false, reconnect: () => undefined });
  const replaced = await removeDemoKeys(transport).catch(async (error: unknown) => {
    await transport.close().catch(() => undefined);
    throw new UsageError(`cannot reach Redis at ${url.replace(/\/\/[^@]*@/, '//')}: ${(error as Error).message}`);
  });
  const settings = await transport.serverSettings();
  const warnings = settings === undefined ? [] : module.serverWarnings(settings);
  return {
    transport,
    where: `Redis at ${url.replace(/\/\/[^@]*@/, '//')}, key prefix ${DEMO_REDIS_PREFIX}`,
    replaced,
    target: { target: url, env: `REDELIVER_REDIS_PREFIX=${DEMO_REDIS_PREFIX}` },
    ...(warnings.length > 0 ? { note: `note: ${warnings.join('; ')}` } : {}),
  };
}

async function openJetStreamDemo(options: DemoOptions): Promise<DemoTransport> {
  if (options.file !== undefined) throw new UsageError(`--file is for the SQLite demo; the JetStream demo keeps its queues under the stream prefix ${DEMO_NATS_PREFIX}`);
  const module = await jetStreamModule('the JetStream demo');
  const url = options.url ?? module.JETSTREAM_DEFAULTS.servers;
  const connection = await connectNats(url, 'redeliver-demo');
  const transport = closingConnection(new module.JetStreamTransport({ connection, prefix: DEMO_NATS_PREFIX }), connection);
  const replaced = await removeDemoStreams(transport).catch(async (error: unknown) => {
    await transport.close().catch(() => undefined);
    throw error;
  });
  return {
    transport,
    where: `NATS JetStream at ${url.replace(/\/\/[^@]*@/, '//')}, stream prefix ${DEMO_NATS_PREFIX}`,
    replaced,
    target: { target: url, env: `${NATS_PREFIX_ENV}=${DEMO_NATS_PREFIX}` },
  };
}

/** The channel the NSQ demo consumes through: a topic `orders` that has it is the demo's own. */
export const DEMO_NSQ_CHANNEL = 'redeliver-demo';

async function openNsqDemo(options: DemoOptions): Promise<DemoTransport> {
  if (options.file !== undefined) throw new UsageError('--file is for the SQLite demo; the NSQ demo uses the topics orders and error on nsqd');
  const url = options.url ?? 'nsq://127.0.0.1:4150';
  const { nsqd, lookupd, httpAddresses } = parseNsqTarget(url);
  if (nsqd.length === 0) throw new UsageError('the NSQ demo needs an nsqd in its target, such as nsq://127.0.0.1:4150');
  const { NsqTransport } = await import('../transports/nsq/index.js');
  const { NsqdHttpApi } = await import('../transports/nsq/http-api.js');
  const http = new NsqdHttpApi(httpAddresses[nsqd[0]!] ?? nextPort(nsqd[0]!));
  const replaced = await removeNsqDemoTopics(http);
  const transport = new NsqTransport({ nsqd, lookupd, httpAddresses, channel: DEMO_NSQ_CHANNEL, connectionName: 'redeliver-demo' });
  return { transport, where: `nsqd at ${nsqd[0]!}, topics orders and error`, replaced, target: { target: url } };
}

function nextPort(tcp: string): string {
  const at = tcp.lastIndexOf(':');
  return `${tcp.slice(0, at)}:${Number(tcp.slice(at + 1)) + 1}`;
}

/**
 * Deletes the topics of an earlier NSQ demo (`orders`, which has the demo's
 * channel, and `error`); refuses to touch topics of those names that the
 * demo did not make.
 */
async function removeNsqDemoTopics(http: import('../transports/nsq/http-api.js').NsqdHttpApi): Promise<boolean> {
  const [orders, error] = await Promise.all([http.topicStats('orders'), http.topicStats('error')]).catch((e: unknown) => {
    throw new UsageError(`cannot reach nsqd's HTTP API: ${(e as Error).message}`);
  });
  const ours = orders?.channels.some((c) => c.channel_name === DEMO_NSQ_CHANNEL) ?? false;
  if ((orders && !ours) || (error && !ours)) {
    throw new UsageError(`nsqd at ${http.address} has a topic ${orders && !ours ? 'orders' : 'error'} that an earlier demo did not make; the demo does not touch it: run it on another nsqd`);
  }
  if (!orders) return false;
  await http.deleteTopic('orders');
  await http.deleteTopic('error');
  return true;
}

async function openRocketMqDemo(options: DemoOptions): Promise<DemoTransport> {
  if (options.file !== undefined) throw new UsageError(`--file is for the SQLite demo; the RocketMQ demo keeps its queues in the topics ${DEMO_ROCKETMQ.queue} and ${DEMO_ROCKETMQ.errorQueue}`);
  const url = options.url ?? 'rocketmq://127.0.0.1:8081';
  const endpoints = rocketMqEndpoints(url);
  let module: typeof import('../transports/rocketmq/index.js');
  try {
    module = await import('../transports/rocketmq/index.js');
  } catch (error) {
    throw new UsageError(`the RocketMQ demo needs the rocketmq-client-nodejs package: npm install rocketmq-client-nodejs (${(error as Error).message})`);
  }
  const nameServer = process.env[ROCKETMQ_NAME_SERVER_ENV] || `${endpoints.slice(0, endpoints.lastIndexOf(':'))}:9876`;
  const transport = new module.RocketMqTransport({ endpoints, nameServer, consumerGroup: DEMO_ROCKETMQ.group, connectionName: 'redeliver-demo' });
  const replaced = await removeRocketMqDemoTopics(transport).catch(async (error: unknown) => {
    await transport.close().catch(() => undefined);
    throw new UsageError(`cannot reach the RocketMQ name server at ${nameServer} (set ${ROCKETMQ_NAME_SERVER_ENV}): ${(error as Error).message}`);
  });
  const envs = [`${ROCKETMQ_GROUP_ENV}=${DEMO_ROCKETMQ.group}`, ...(process.env[ROCKETMQ_NAME_SERVER_ENV] ? [`${ROCKETMQ_NAME_SERVER_ENV}=${nameServer}`] : [])];
  return {
    transport,
    queue: DEMO_ROCKETMQ.queue,
    errorQueue: DEMO_ROCKETMQ.errorQueue,
    where: `RocketMQ at ${endpoints} (name server ${nameServer}), topics ${DEMO_ROCKETMQ.queue} and ${DEMO_ROCKETMQ.errorQueue}, consumer group ${DEMO_ROCKETMQ.group}`,
    replaced,
    target: { target: `rocketmq://${endpoints}`, env: envs.join(' '), errorQueue: DEMO_ROCKETMQ.errorQueue },
  };
}

/**
 * Deletes the topics and the consumer group of an earlier RocketMQ demo
 * (with the broker's retry and dead-letter topics of that group), and only
 * those; resolves whether its work topic was there.
 */
async function removeRocketMqDemoTopics(transport: RocketMqTransport): Promise<boolean> {
  const { admin } = transport;
  const existed = (await admin.route(DEMO_ROCKETMQ.queue)) !== undefined;
  const topics = [DEMO_ROCKETMQ.queue, DEMO_ROCKETMQ.errorQueue, `%REMOVED%${DEMO_ROCKETMQ.errorQueue}`, `%RETRY%${DEMO_ROCKETMQ.group}`, `%DLQ%${DEMO_ROCKETMQ.group}`];
  for (const topic of topics) await admin.deleteTopic(topic);
  await admin.deleteGroup(DEMO_ROCKETMQ.group);
  return existed;
}

/** Deletes the streams (and so the consumers) of an earlier JetStream demo, and only those; resolves whether there were any. */
async function removeDemoStreams(transport: JetStreamTransport): Promise<boolean> {
  const { jsm } = await transport.ready();
  const doomed: string[] = [];
  for await (const name of jsm.streams.names()) if (transport.names.ownsStream(name)) doomed.push(name);
  for (const name of doomed) await jsm.streams.delete(name);
  return doomed.length > 0;
}

/** Deletes the keys of an earlier Redis demo, and only those; resolves whether there were any. They share a hash tag, so one server (on a cluster, one primary) holds them all. */
async function removeDemoKeys(transport: RedisTransport): Promise<boolean> {
  const pattern = `{${DEMO_REDIS_PREFIX}}:*`;
  const server = await serverOf(transport.client, transport.keys.queues);
  let cursor = '0';
  let removed = 0;
  do {
    const [next, keys] = await server.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) removed += await server.del(...keys);
  } while (cursor !== '0');
  return removed > 0;
}

/** The commands to try on the demo's queues; `errors show` with the key of `entry` when there is one. */
export function nextCommands(demo: DemoTarget, entry: ErrorEntry | undefined): string[] {
  const target = shellWord(demo.target);
  const env = demo.env === undefined ? '' : `${demo.env} `;
  const queue = demo.errorQueue === undefined ? '' : ` --error-queue ${shellWord(demo.errorQueue)}`;
  return [
    `${env}npx redeliver errors list ${target}${queue}`,
    `${env}npx redeliver errors show ${target} ${entry ? shellWord(entry.key) : '<key>'}${queue}`,
    `${env}npx redeliver dashboard ${target}${queue}`,
  ];
}

/** An entry that failed on a poison order (one of the demo's own errors), else the first. */
function poisonEntry(entries: readonly ErrorEntry[]): ErrorEntry | undefined {
  return entries.find((e) => e.headers[HEADER.failureErrorName] === 'ValidationError') ?? entries[0];
}

/** `word` as one shell word: as it is when it needs no quoting, otherwise in single quotes. */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/** Removes the demo file of an earlier run and its `-wal` and `-shm` files; resolves whether there was one. */
function removeDemoFile(file: string): boolean {
  const existed = existsSync(file);
  for (const path of [file, `${file}-wal`, `${file}-shm`]) rmSync(path, { force: true });
  return existed;
}

/** A file named with `--file` that exists is refused: the demo never writes into a database it did not make. */
function refuseExisting(file: string): false {
  if (existsSync(file)) throw new UsageError(`${file} already exists; the demo writes a new file: name one that does not exist, or leave out --file to use ${DEMO_FILE} in the current folder`);
  return false;
}
