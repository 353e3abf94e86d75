/**
 * `npm run bench -- sendback [--entries N] [--rounds R] [--body-bytes B] [--transports redis,jetstream] [--url URL] [--servers S] [--server-pid P]`
 *
 * Send-back of error entries on Redis and JetStream. Each round, for each
 * transport, fills an error queue with N dead-letters (default 20,000) of
 * one work queue, written directly in the transport's layout and format
 * (failure headers, retry history, a body of B bytes, default 1 KiB), then
 * times the operations of a transport of that prefix, `transport.errorQueue`:
 *
 * - all: `sendBackEach` selecting every entry;
 * - by key: on a queue filled again, `sendBackEach` selecting every other
 *   entry by its key (a set of keys, as `errors retry --keys` passes); the
 *   pass reads all N and sends back N/2.
 *
 * Each figure is the entries sent back per second; the work queue must then
 * hold exactly the entries sent and the error queue the rest, and both are
 * deleted before the next pass. Rounds alternate the transports; the median
 * round is reported. Each pass also reports the CPU time the bench process
 * used per entry sent, and with `--server-pid` the broker process's (read
 * from /proc, so a broker on this machine; give the one transport it
 * serves). Every key and stream is made under a prefix of the run's own and
 * deleted afterwards.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import { nanos } from '@nats-io/transport-node';
import { Redis } from 'ioredis';
import { HEADER } from '../../src/headers/names.js';
import type { ErrorEntry, ErrorQueueOperations } from '../../src/transport/error-queue.js';
import { encodeNatsHeaders } from '../../src/transports/jetstream/codec.js';
import { JetStreamNames, QUEUE_DESCRIPTION, type JetStreamQueueKind } from '../../src/transports/jetstream/names.js';
import { JetStreamTransport } from '../../src/transports/jetstream/transport.js';
import { encodeHeaders } from '../../src/transports/redis/codec.js';
import { RedisKeys } from '../../src/transports/redis/keys.js';
import { RedisTransport } from '../../src/transports/redis/transport.js';
import { deleteStreams, openClients, publishAll, type NatsClients } from '../jetstream/server.js';
import { deleteKeys } from '../redis/cleanup.js';
import { medianOf, positiveArg, printJson, printTable, roundTo } from '../report.js';

type TransportName = 'redis' | 'jetstream';

/** The goal of both transports, entries sent back per second. */
const GOAL_PER_SEC = 20_000;

/** Entries one Redis pipeline writes while a queue is filled. */
const FILL_CHUNK = 1_000;

/** One filled error queue and the operations on it. */
interface Filled {
  readonly ops: ErrorQueueOperations;
  readonly queue: string;
  readonly errorQueue: string;
  /** How many messages the work queue holds. */
  workLength(): Promise<number>;
  /** Deletes both queues, so no round works on what an earlier one left. */
  remove(): Promise<void>;
}

/** A transport under test: fills an error queue, and removes everything it made. */
interface Side {
  fill(entries: number): Promise<Filled>;
  close(): Promise<void>;
}

interface Timed {
  readonly transport: TransportName;
  readonly round: number;
  readonly pass: 'all' | 'by key';
  readonly read: number;
  readonly sent: number;
  readonly seconds: number;
  readonly perSec: number;
  /** The bench process's CPU time (user + system) during the pass, per entry sent back, in microseconds. */
  readonly clientCpuUsPerEntry: number;
  /** The server process's CPU time during the pass, per entry sent back, in microseconds; undefined without `--server-pid`. */
  readonly serverCpuUsPerEntry: number | undefined;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      entries: { type: 'string', default: '20000' },
      rounds: { type: 'string', default: '3' },
      'body-bytes': { type: 'string', default: '1024' },
      transports: { type: 'string', default: 'redis,jetstream' },
      url: { type: 'string', default: process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379' },
      servers: { type: 'string', default: process.env['NATS_URL'] ?? '127.0.0.1:4222' },
      'server-pid': { type: 'string' },
    },
  });
  const entries = positiveArg('entries', values.entries);
  const rounds = positiveArg('rounds', values.rounds);
  const body = new Uint8Array(positiveArg('body-bytes', values['body-bytes'])).fill(0x61);
  const transports = values.transports.split(',').map((t) => t.trim()) as TransportName[];
  for (const t of transports) if (t !== 'redis' && t !== 'jetstream') throw new RangeError(`--transports: unknown transport '${t}'`);
  const serverPid = values['server-pid'] === undefined ? undefined : positiveArg('server-pid', values['server-pid']);
  const loadBefore = loadavg();

  const run = randomUUID().slice(0, 8);
  const sides = new Map<TransportName, Side>();
  const timed: Timed[] = [];
  try {
    for (const t of transports) sides.set(t, t === 'redis' ? await redisSide(values.url, `bench-sb-${run}`, body) : await jetStreamSide(values.servers, `bench-sb-${run}`, body));
    for (let round = 1; round <= rounds; round++) {
      const order = round % 2 === 1 ? transports : [...transports].reverse();
      for (const t of order) {
        const side = sides.get(t)!;
        for (const time of [timeAll, timeByKey]) {
          const filled = await side.fill(entries);
          try {
            timed.push(await time(t, round, filled, serverPid));
          } finally {
            await filled.remove();
          }
        }
      }
    }
  } finally {
    for (const side of sides.values()) await side.close();
  }

  const loadAfter = loadavg();
  printTable(
    `Send-back of ${entries.toLocaleString('en-US')} error entries (${body.length} B bodies), ${rounds} rounds; load average ${fmtLoad(loadBefore)} -> ${fmtLoad(loadAfter)}`,
    timed.map((t) => ({ transport: t.transport, round: t.round, pass: t.pass, read: t.read, 'sent back': t.sent, seconds: roundTo(t.seconds, 2), 'entries/s': Math.round(t.perSec), 'client CPU µs/entry': Math.round(t.clientCpuUsPerEntry), 'server CPU µs/entry': t.serverCpuUsPerEntry === undefined ? '-' : Math.round(t.serverCpuUsPerEntry) })),
  );
  const median = (t: TransportName, pass: Timed['pass']) => {
    const rows = timed.filter((r) => r.transport === t && r.pass === pass);
    return rows.length === 0 ? undefined : Math.round(medianOf(rows.map((r) => r.perSec)));
  };
  const summary = transports.map((t) => ({ transport: t, 'all, entries/s': median(t, 'all')!, 'by key, entries/s': median(t, 'by key')!, goal: GOAL_PER_SEC }));
  printTable('Median of the rounds', summary);
  printJson({
    scenario: 'sendback',
    entries,
    rounds,
    bodyBytes: body.length,
    goalPerSec: GOAL_PER_SEC,
    redisPerSec: median('redis', 'all'),
    redisByKeyPerSec: median('redis', 'by key'),
    jetstreamPerSec: median('jetstream', 'all'),
    jetstreamByKeyPerSec: median('jetstream', 'by key'),
    loadAverage: { before: loadBefore.map((l) => roundTo(l, 2)), after: loadAfter.map((l) => roundTo(l, 2)) },
    runs: timed.map((t) => ({ transport: t.transport, round: t.round, pass: t.pass, perSec: Math.round(t.perSec), clientCpuUsPerEntry: Math.round(t.clientCpuUsPerEntry), serverCpuUsPerEntry: t.serverCpuUsPerEntry === undefined ? undefined : Math.round(t.serverCpuUsPerEntry) })),
  });
}

/** Sends back every entry of a filled queue. */
async function timeAll(transport: TransportName, round: number, filled: Filled, serverPid: number | undefined): Promise<Timed> {
  const count = await filled.ops.count(filled.errorQueue);
  const started = performance.now();
  const cpu = process.cpuUsage();
  const serverCpu = processCpuMicros(serverPid);
  const summary = await filled.ops.sendBackEach(filled.errorQueue, { select: () => true });
  const cpuUs = cpuMicros(cpu);
  const serverCpuUs = serverCpu === undefined ? undefined : processCpuMicros(serverPid)! - serverCpu;
  const seconds = (performance.now() - started) / 1_000;
  await check(transport, filled, summary, count, count);
  return { transport, round, pass: 'all', read: summary.read, sent: summary.done, seconds, perSec: summary.done / seconds, clientCpuUsPerEntry: cpuUs / summary.done, serverCpuUsPerEntry: serverCpuUs === undefined ? undefined : serverCpuUs / summary.done };
}

/** Sends back every other entry of a filled queue, chosen by key. */
async function timeByKey(transport: TransportName, round: number, filled: Filled, serverPid: number | undefined): Promise<Timed> {
  const keys: string[] = [];
  for await (const page of filled.ops.scan(filled.errorQueue)) keys.push(...page.map((e: ErrorEntry) => e.key));
  const chosen = new Set(keys.filter((_, i) => i % 2 === 0));
  const started = performance.now();
  const cpu = process.cpuUsage();
  const serverCpu = processCpuMicros(serverPid);
  const summary = await filled.ops.sendBackEach(filled.errorQueue, { select: (e) => chosen.has(e.key) });
  const cpuUs = cpuMicros(cpu);
  const serverCpuUs = serverCpu === undefined ? undefined : processCpuMicros(serverPid)! - serverCpu;
  const seconds = (performance.now() - started) / 1_000;
  await check(transport, filled, summary, keys.length, chosen.size);
  return { transport, round, pass: 'by key', read: summary.read, sent: summary.done, seconds, perSec: summary.done / seconds, clientCpuUsPerEntry: cpuUs / summary.done, serverCpuUsPerEntry: serverCpuUs === undefined ? undefined : serverCpuUs / summary.done };
}

/** The bench process's CPU time since `since`, user and system, in microseconds. */
function cpuMicros(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return used.user + used.system;
}

/** The CPU time (user + system) process `pid` has used, in microseconds, from /proc; undefined without a pid. */
function processCpuMicros(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime, fields 14 and 15 of the whole line, in clock ticks of 10 ms.
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** Throws unless the pass read `read` entries, sent back exactly `sent`, and the queues hold what that leaves. */
async function check(transport: TransportName, filled: Filled, summary: { read: number; done: number; failed: number; refused: number; gone: number }, read: number, sent: number): Promise<void> {
  const work = await filled.workLength();
  const left = await filled.ops.count(filled.errorQueue);
  if (summary.read !== read || summary.done !== sent || summary.failed + summary.refused + summary.gone !== 0 || work !== sent || left !== read - sent) {
    throw new Error(`${transport}: read ${summary.read} of ${read}, sent back ${summary.done} of ${sent} (failed ${summary.failed}, refused ${summary.refused}, gone ${summary.gone}); the work queue holds ${work}, the error queue ${left}`);
  }
}

/** The failure headers of dead-letter `i` of `queue`. */
function failureHeaders(queue: string, i: number): Record<string, string> {
  return {
    'x-tenant': `tenant-${i % 17}`,
    [HEADER.attempts]: '5',
    [HEADER.failureQueue]: queue,
    [HEADER.failureReason]: 'retries-exhausted',
    [HEADER.failureMessage]: `upstream answered 503 for order ${i}`,
    [HEADER.failureErrorName]: 'HttpError',
    [HEADER.failureTime]: new Date(Date.UTC(2030, 0, 2, 3, 4, 5) + i).toISOString(),
  };
}

/** Redis: error streams written as the transport's dead-letter writes them, under a prefix of the run's own. */
async function redisSide(url: string, prefix: string, body: Uint8Array): Promise<Side> {
  const client = new Redis(url, { connectionName: 'redeliver-bench-sendback-fill', lazyConnect: true });
  await client.connect();
  const keys = new RedisKeys(prefix);
  const transport = new RedisTransport({ url, keyPrefix: prefix, connectionName: 'redeliver-bench-sendback' });
  const ops = transport.errorQueue;
  let n = 0;
  return {
    async fill(entries) {
      n += 1;
      const queue = `work-${n}`;
      const errorQueue = `error-${n}`;
      await client.hset(keys.queues, queue, 'work', errorQueue, 'error');
      for (let i = 0; i < entries; i += FILL_CHUNK) {
        const pipeline = client.pipeline();
        for (let j = i; j < Math.min(entries, i + FILL_CHUNK); j++) {
          pipeline.xadd(keys.stream(errorQueue), '*', 'i', `m-${j}`, 'h', encodeHeaders(failureHeaders(queue, j)), 'b', Buffer.from(body), 'c', '5');
        }
        await pipeline.exec();
      }
      return {
        ops,
        queue,
        errorQueue,
        workLength: () => client.xlen(keys.stream(queue)),
        remove: async () => {
          await client.unlink(keys.stream(queue), keys.stream(errorQueue));
          await client.hdel(keys.queues, queue, errorQueue);
        },
      };
    },
    async close() {
      try {
        await transport.close();
        await deleteKeys(url, `{${prefix}}:*`);
      } finally {
        client.disconnect();
      }
    },
  };
}

/** JetStream: queue streams made as the transport makes them, under a prefix of the run's own. */
async function jetStreamSide(servers: string, prefix: string, body: Uint8Array): Promise<Side> {
  const clients: NatsClients = await openClients(servers, 'redeliver-bench-sendback-fill', true);
  const names = new JetStreamNames(prefix);
  const transport = new JetStreamTransport({ servers, prefix, connectionName: 'redeliver-bench-sendback' });
  const ops = transport.errorQueue;
  const makeQueue = (queue: string, kind: JetStreamQueueKind) =>
    clients.jsm.streams.add({
      name: names.of(queue).stream,
      subjects: [names.of(queue).subject],
      retention: RetentionPolicy.Workqueue,
      discard: DiscardPolicy.New,
      storage: StorageType.File,
      duplicate_window: nanos(120_000),
      description: QUEUE_DESCRIPTION[kind],
      allow_direct: kind === 'error',
    });
  let n = 0;
  return {
    async fill(entries) {
      n += 1;
      const queue = `work-${n}`;
      const errorQueue = `error-${n}`;
      await makeQueue(queue, 'work');
      await makeQueue(errorQueue, 'error');
      const target = names.of(errorQueue);
      await publishAll(clients, target.stream, target.subject, entries, (i) => ({ id: `m-${i}|e|${i}`, body, headers: encodeNatsHeaders(`m-${i}`, failureHeaders(queue, i)) }));
      return {
        ops,
        queue,
        errorQueue,
        workLength: async () => (await clients.jsm.streams.info(names.of(queue).stream)).state.messages,
        remove: async () => {
          await clients.jsm.streams.delete(names.of(queue).stream);
          await clients.jsm.streams.delete(target.stream);
        },
      };
    },
    async close() {
      try {
        await transport.close();
        await deleteStreams(clients.jsm, prefix);
      } finally {
        await clients.nc.close();
      }
    },
  };
}

function fmtLoad(load: number[]): string {
  return load.map((l) => l.toFixed(2)).join(' ');
}
