/**
 * What tests leave on the shared brokers, found by name, and its removal.
 *
 * Every name a test gives a queue, exchange, key prefix or stream on a
 * shared broker carries a run token: 8 hex digits of a random UUID
 * (`rmq-test-dup-1a2b3c4d`, `{test-cli-1a2b3c4d}:…`, `test-jt-1a2b3c4d_…`),
 * or is the demo's fixed `redeliver-demo` prefix. RabbitMQ transports
 * opened without a `topologyPrefix` (and the CLI) share the default delay
 * topology (`redeliver.delay…`), which the files declare once per run
 * instead of once each. {@link sweepSharedBrokers} removes these, and
 * nothing else.
 *
 * Other worktrees may run tests against the same brokers at the same time,
 * so nothing in use is removed: RabbitMQ and Redis are swept only when no
 * other client is connected to them, and a JetStream stream only once it
 * has been idle for {@link STALE_MS}. A broker that does not answer is
 * skipped: the sweep never fails a run.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import amqp from 'amqplib';
import { NATS_URL, RABBITMQ_URL, REDIS_URL } from './brokers.js';

/** A name with a run token: 8 hex digits between separators (`-`, `.`, `_`) or at either end. */
const RUN_TOKEN = /(?:^|[-._])[0-9a-f]{8}(?:[-._]|$)/;
/** The demo's fixed prefix on Redis and NATS. */
const DEMO_PREFIX = 'redeliver-demo';
/** The default RabbitMQ topology prefix, for transports opened without one. */
const DEFAULT_TOPOLOGY_PREFIX = 'redeliver';

/** Whether a RabbitMQ queue or exchange name is a test's (see the module comment). */
export function isTestRabbitName(name: string): boolean {
  if (name === '' || name.startsWith('amq.')) return false;
  return RUN_TOKEN.test(name) || isDefaultTopology(name);
}

/** Whether a Redis key is a test's: its hash tag (`{prefix}`) carries a run token or is the demo's. */
export function isTestRedisKey(key: string): boolean {
  const tag = /^\{([^}]*)\}/.exec(key)?.[1];
  return tag !== undefined && (RUN_TOKEN.test(tag) || tag === DEMO_PREFIX);
}

/** Whether a JetStream stream is a test's: its prefix (before `_`) carries a run token or is the demo's. */
export function isTestStream(stream: string): boolean {
  return RUN_TOKEN.test(stream) || stream.startsWith(`${DEMO_PREFIX}_`);
}

/** Whether a RabbitMQ name belongs to the default delay topology (or an error-queue marker of the default prefix). */
export function isDefaultTopology(name: string): boolean {
  return name.startsWith(`${DEFAULT_TOPOLOGY_PREFIX}.delay`) || name.startsWith(`${DEFAULT_TOPOLOGY_PREFIX}.error-queue.`);
}

/** How long a JetStream stream must have been idle (no message, no creation) to be swept. */
export const STALE_MS = 10 * 60_000;

/** What a sweep found (and removed) on each broker; `skipped` says which brokers it left alone, and why. */
export interface SweepReport {
  readonly queues: string[];
  readonly exchanges: string[];
  readonly redisKeys: number;
  readonly redisPrefixes: string[];
  readonly streams: string[];
  readonly skipped: string[];
}

/** Thrown (and reported as skipped) when a broker has other clients connected. */
class InUse extends Error {}

/** Removes the test names on the shared brokers (see the module comment); resolves what was removed. */
export async function sweepSharedBrokers(): Promise<SweepReport> {
  const skipped: string[] = [];
  const skip = (broker: string) => (error: unknown) => {
    skipped.push(error instanceof InUse ? `${broker} (${error.message})` : `${broker} (not reachable)`);
  };
  const rabbit = (await sweepRabbit().catch(skip('RabbitMQ'))) ?? { queues: [], exchanges: [] };
  const redis = (await sweepRedis().catch(skip('Redis'))) ?? { keys: 0, prefixes: [] };
  const streams = (await sweepJetStream().catch(skip('NATS'))) ?? [];
  return { ...rabbit, redisKeys: redis.keys, redisPrefixes: redis.prefixes, streams, skipped };
}

/** The lines of `rabbitmqctl -q list_<what> <columns> --no-table-headers`, split on tabs. */
async function rabbitRows(what: 'queues' | 'exchanges' | 'connections', ...columns: string[]): Promise<string[][]> {
  const { stdout } = await promisify(execFile)('rabbitmqctl', ['-q', `list_${what}`, ...columns, '--no-table-headers'], { timeout: 60_000 });
  return stdout
    .split('\n')
    .filter((line) => line.trim().length > 0)
    .map((line) => line.split('\t').map((cell) => cell.trim()));
}

async function sweepRabbit(): Promise<{ queues: string[]; exchanges: string[] }> {
  const connections = (await rabbitRows('connections', 'pid')).length;
  if (connections > 0) throw new InUse(`${connections} client connection(s) open`);
  const queues = (await rabbitRows('queues', 'name', 'consumers')).filter(([name, consumers]) => isTestRabbitName(name!) && consumers === '0').map(([name]) => name!);
  const exchanges = (await rabbitRows('exchanges', 'name')).map(([name]) => name!).filter(isTestRabbitName);
  if (queues.length === 0 && exchanges.length === 0) return { queues, exchanges };
  const connection = await amqp.connect(RABBITMQ_URL, { timeout: 5_000 });
  connection.on('error', () => undefined);
  try {
    // A missing queue or exchange closes its channel: one channel per deletion.
    const each = async (fn: (channel: amqp.Channel) => Promise<unknown>) => {
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      await fn(channel).catch(() => undefined);
      await channel.close().catch(() => undefined);
    };
    for (const queue of queues) await each((channel) => channel.deleteQueue(queue));
    for (const exchange of exchanges) await each((channel) => channel.deleteExchange(exchange));
  } finally {
    await connection.close().catch(() => undefined);
  }
  return { queues, exchanges };
}

async function sweepRedis(): Promise<{ keys: number; prefixes: string[] }> {
  const { Redis } = await import('ioredis');
  const client = new Redis(REDIS_URL, { lazyConnect: true, connectTimeout: 2_000, maxRetriesPerRequest: 0, retryStrategy: () => null, connectionName: 'redeliver-test-sweep' });
  client.on('error', () => undefined);
  await client.connect();
  try {
    const others = (String(await client.call('CLIENT', 'LIST')).match(/^id=/gm) ?? []).length - 1;
    if (others > 0) throw new InUse(`${others} other client(s) connected`);
    let keys = 0;
    const prefixes = new Set<string>();
    let cursor = '0';
    do {
      const [next, found] = await client.scan(cursor, 'MATCH', '{*}:*', 'COUNT', 1_000);
      cursor = next;
      const doomed = found.filter(isTestRedisKey);
      for (const key of doomed) prefixes.add(/^\{([^}]*)\}/.exec(key)![1]!);
      if (doomed.length > 0) keys += await client.del(...doomed);
    } while (cursor !== '0');
    return { keys, prefixes: [...prefixes] };
  } finally {
    client.disconnect();
  }
}

async function sweepJetStream(): Promise<string[]> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  const nc = await connect({ servers: NATS_URL, timeout: 2_000, reconnect: false, name: 'redeliver-test-sweep' });
  try {
    const jsm = await jetstreamManager(nc, { timeout: 5_000 });
    const doomed: string[] = [];
    for await (const info of jsm.streams.list()) {
      if (!isTestStream(info.config.name)) continue;
      const lastActive = Math.max(Date.parse(info.created), info.state.messages > 0 ? Date.parse(info.state.last_ts) : 0);
      if (Date.now() - lastActive >= STALE_MS) doomed.push(info.config.name);
    }
    for (const name of doomed) await jsm.streams.delete(name).catch(() => undefined);
    return doomed;
  } finally {
    await nc.close();
  }
}

/**
 * One line per broker of what a report holds, empty when it holds nothing;
 * `leaksOnly` leaves out the default delay topology, which the files share
 * on purpose.
 */
export function describeSweep(report: SweepReport, leaksOnly = false): string[] {
  const lines: string[] = [];
  const keep = (name: string) => !(leaksOnly && isDefaultTopology(name));
  report = { ...report, queues: report.queues.filter(keep), exchanges: report.exchanges.filter(keep) };
  const some = (names: string[]) => `${names.slice(0, 5).join(', ')}${names.length > 5 ? `, … (${names.length})` : ''}`;
  if (report.queues.length > 0) lines.push(`RabbitMQ queues: ${some(report.queues)}`);
  if (report.exchanges.length > 0) lines.push(`RabbitMQ exchanges: ${some(report.exchanges)}`);
  if (report.redisKeys > 0) lines.push(`Redis: ${report.redisKeys} keys of ${some(report.redisPrefixes)}`);
  if (report.streams.length > 0) lines.push(`JetStream streams: ${some(report.streams)}`);
  return lines;
}

/** The test streams on the shared NATS server created at or after `since` (epoch ms); empty when it does not answer. */
export async function testStreamsCreatedSince(since: number): Promise<string[]> {
  const { connect } = await import('@nats-io/transport-node');
  const { jetstreamManager } = await import('@nats-io/jetstream');
  try {
    const nc = await connect({ servers: NATS_URL, timeout: 2_000, reconnect: false, name: 'redeliver-test-sweep' });
    try {
      const jsm = await jetstreamManager(nc, { timeout: 5_000 });
      const found: string[] = [];
      for await (const info of jsm.streams.list()) if (isTestStream(info.config.name) && Date.parse(info.created) >= since) found.push(info.config.name);
      return found;
    } finally {
      await nc.close();
    }
  } catch {
    return [];
  }
}
