/**
 * `npm run bench -- sqlite [--messages N] [--concurrency C] [--delayed N] [--delayed-sends N] [--only-delayed-sends]`
 *
 * The SQLite transport against a bare SQLite queue on the same machine, same
 * file settings and same message size. Every throughput case is measured the
 * same way, end to end: send all N messages, then drain all N, and divide N
 * by the total time.
 *
 * 1. ceiling: a bare queue table, batched INSERT transactions, then batched
 *    DELETE ... RETURNING transactions. No leases, no retries, no headers.
 * 2. success: an Endpoint over SqliteTransport, handler does nothing, ack.
 * 3. failing10: the same with 10% of messages failing their first attempt
 *    (one immediate retry each).
 * 4. fullSync: the success path with durability FULL (fsync per commit).
 *    success-c10: the success path at the endpoint's default concurrency, 10.
 * 5. delays: delayed retries with delays uniform in [100 ms, 20 s]; for each,
 *    lateness = the time it is handed out minus its due time.
 * 6. delayed sends: N (default 1,000) sent by a Producer with `delayMs`
 *    uniform in [1 s, 5 s); see bench/delayed-sends.ts. With
 *    `--only-delayed-sends`, the only case run.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { bytesCodec } from '../../src/codec.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { systemClock } from '../../src/time/clock.js';
import { seededRandom } from '../../src/time/random.js';
import type { Delivery, OutgoingMessage } from '../../src/transport/types.js';
import { SqliteTransport, type SqliteDurability } from '../../src/transports/sqlite/index.js';
import { percentile, printJson, printTable, positiveArg, medianRun, roundTo } from '../report.js';
import { delayedSendJson, delayedSendLateness, printDelayedSends } from '../delayed-sends.js';

const BODY_BYTES = 256;
/** Messages per send transaction, in every case. */
const SEND_CHUNK = 1_000;
/** Rows per claim, in every case (the transport's default batchSize). */
const CLAIM_BATCH = 128;

interface Throughput {
  readonly case: string;
  readonly messages: number;
  readonly sendMs: number;
  readonly drainMs: number;
  readonly perSec: number;
  /** CPU time (user + system) of the case: less disturbed than wall time by other work on the machine. */
  readonly cpuMs: number;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      messages: { type: 'string', default: '200000' },
      concurrency: { type: 'string', default: '128' },
      delayed: { type: 'string', default: '10000' },
      rounds: { type: 'string', default: '3' },
      'delayed-sends': { type: 'string', default: '1000' },
      'only-delayed-sends': { type: 'boolean', default: false },
    },
  });
  const delayedSends = positiveArg('delayed-sends', values['delayed-sends']);
  const rounds = positiveArg('rounds', values.rounds);
  const n = positiveArg('messages', values.messages);
  const concurrency = positiveArg('concurrency', values.concurrency);
  const delayed = positiveArg('delayed', values.delayed);
  const dir = mkdtempSync(join(tmpdir(), 'redeliver-bench-sqlite-'));
  const body = randomBytes(BODY_BYTES);
  let file = 0;
  const path = () => join(dir, `bench-${++file}.db`);

  try {
    if (values['only-delayed-sends']) {
      const sends = await delayedSendsCase(path(), delayedSends);
      printJson({ scenario: 'sqlite', delayedSends, ...delayedSendJson(sends) });
      return;
    }
    // The cases take turns, round after round, and each reports its median
    // round: a machine shared with other work slows every case alike.
    const runs: Record<string, Throughput[]> = { ceiling: [], success: [], failing10: [], fullSync: [], 'success-c10': [] };
    for (let round = 0; round < rounds; round++) {
      runs['ceiling']!.push(bareQueue(path(), n, body));
      runs['success']!.push(await throughEndpoint('success', path(), n, body, concurrency, 'NORMAL', 0));
      runs['failing10']!.push(await throughEndpoint('failing10', path(), n, body, concurrency, 'NORMAL', 0.1));
      runs['fullSync']!.push(await throughEndpoint('fullSync', path(), n, body, concurrency, 'FULL', 0));
      // The endpoint's default concurrency: smaller claims and commits.
      runs['success-c10']!.push(await throughEndpoint('success-c10', path(), n, body, 10, 'NORMAL', 0));
    }
    const rows = Object.values(runs).map((r) => medianRun(r));
    const [ceiling, success, failing, full, c10] = rows as [Throughput, Throughput, Throughput, Throughput, Throughput];
    printTable(
      `sqlite transport, ${BODY_BYTES}-byte messages, concurrency ${concurrency}, send all then drain all (median of ${rounds} rounds)`,
      rows.map((r) => ({ ...r, rounds: runs[r.case]!.map((x) => x.perSec).join(' / ') })),
    );

    const delays = await delayLateness(path(), delayed, body);
    printTable(`delayed retries: ${delayed} with delays uniform in [100 ms, 20 s]`, [
      { p50LatenessMs: delays.p50, p99LatenessMs: delays.p99, maxLatenessMs: delays.max, early: delays.early, handled: delays.handled },
    ]);
    const sends = await delayedSendsCase(path(), delayedSends);

    printJson({
      scenario: 'sqlite',
      bodyBytes: BODY_BYTES,
      messages: n,
      concurrency,
      rounds,
      ceilingPerSec: Math.round(ceiling.perSec),
      successPerSec: Math.round(success.perSec),
      failing10PerSec: Math.round(failing.perSec),
      fullSyncSuccessPerSec: Math.round(full.perSec),
      successConcurrency10PerSec: Math.round(c10.perSec),
      ratioToCeiling: roundTo(success.perSec / ceiling.perSec, 3),
      cpuRatioToCeiling: roundTo(ceiling.cpuMs / success.cpuMs, 3),
      delayP50LatenessMs: delays.p50,
      delayP99LatenessMs: delays.p99,
      delayMaxLatenessMs: delays.max,
      delayEarlyCount: delays.early,
      delayedHandled: delays.handled,
      delayedSends,
      ...delayedSendJson(sends),
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Delayed sends on a transport of their own; prints their table. */
async function delayedSendsCase(path: string, count: number) {
  const transport = new SqliteTransport({ path });
  try {
    const sends = await delayedSendLateness(transport, 'delayed-sends', count, 11);
    printDelayedSends(sends);
    return sends;
  } finally {
    await transport.close();
  }
}

/** The ceiling: the least a queue on SQLite must do, with the transport's file settings. */
function bareQueue(path: string, n: number, body: Buffer): Throughput {
  const db = new Database(path, { timeout: 5_000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.exec(`
    CREATE TABLE q (seq INTEGER PRIMARY KEY, queue TEXT NOT NULL, id TEXT NOT NULL, body BLOB NOT NULL, headers TEXT NOT NULL);
    CREATE INDEX q_queue ON q (queue, seq);
  `);
  const insert = db.prepare('INSERT INTO q (queue, id, body, headers) VALUES (?, ?, ?, ?)');
  const take = db.prepare('DELETE FROM q WHERE seq IN (SELECT seq FROM q WHERE queue = ? ORDER BY seq LIMIT ?) RETURNING id, body, headers').raw(true);
  const sendChunk = db.transaction((from: number, to: number) => {
    for (let i = from; i < to; i++) insert.run('bench', `m-${i}`, body, '{}');
  });
  const drainBatch = db.transaction(() => take.all('bench', CLAIM_BATCH) as [string, Buffer, string][]);

  const cpu = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < n; i += SEND_CHUNK) sendChunk(i, Math.min(n, i + SEND_CHUNK));
  const t1 = performance.now();
  let received = 0;
  let bytes = 0;
  for (;;) {
    const batch = drainBatch();
    if (batch.length === 0) break;
    for (const row of batch) bytes += row[1].length;
    received += batch.length;
  }
  const t2 = performance.now();
  const cpuUsed = process.cpuUsage(cpu);
  db.close();
  if (received !== n || bytes !== n * body.length) throw new Error(`ceiling: drained ${received} of ${n}`);
  return result('ceiling', n, t0, t1, t2, cpuUsed);
}

/** The product's path: send through the transport, consume through an Endpoint, ack. */
async function throughEndpoint(
  label: string,
  path: string,
  n: number,
  body: Buffer,
  concurrency: number,
  durability: SqliteDurability,
  failingShare: number,
): Promise<Throughput> {
  const transport = new SqliteTransport({ path, durability });
  const random = seededRandom(42);
  const failFirst = new Set<string>();
  try {
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < n; i += SEND_CHUNK) {
      const chunk: OutgoingMessage[] = [];
      for (let j = i; j < Math.min(n, i + SEND_CHUNK); j++) {
        const id = `m-${j}`;
        if (failingShare > 0 && random() < failingShare) failFirst.add(id);
        chunk.push({ id, body, headers: {} });
      }
      await transport.sendBatch('bench', chunk);
    }
    const t1 = performance.now();

    let handled = 0;
    let retried = 0;
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    const endpoint = new Endpoint<Uint8Array>({
      name: `bench-${label}`,
      queue: 'bench',
      transport,
      codec: bytesCodec,
      concurrency,
      handler: (_message, context) => {
        if (context.immediateAttempt === 1 && failFirst.has(context.messageId)) throw new Error('transient failure');
      },
    });
    endpoint.on('handled', () => {
      if (++handled === n) done();
    });
    endpoint.on('immediateRetry', () => retried++);
    await endpoint.start();
    await finished;
    const t2 = performance.now();
    const cpuUsed = process.cpuUsage(cpu);
    await endpoint.stop();
    if (retried !== failFirst.size) throw new Error(`${label}: ${retried} immediate retries, expected ${failFirst.size}`);
    return result(label, n, t0, t1, t2, cpuUsed);
  } finally {
    await transport.close();
  }
}

/**
 * Schedules `count` delayed retries with delays uniform in [100 ms, 20 s]
 * and measures, for each, how late it is handed out after its due time. The
 * due time is read from the clock just before `retryLater`, which counts the
 * delay from the call: a delivery handed out before it would count as early.
 */
async function delayLateness(path: string, count: number, body: Buffer): Promise<{ p50: number; p99: number; max: number; early: number; handled: number }> {
  const clock = systemClock;
  const transport = new SqliteTransport({ path, clock });
  const random = seededRandom(7);
  const lateness: number[] = [];
  let done!: () => void;
  const finished = new Promise<void>((resolve) => (done = resolve));
  const onDelivery = (d: Delivery) => {
    const due = d.headers['bench-due'];
    if (due === undefined) {
      const delayMs = 100 + Math.floor(random() * (20_000 - 100));
      const dueAt = clock.now() + delayMs;
      void d.retryLater(delayMs, { 'bench-due': String(dueAt) });
      return;
    }
    lateness.push(clock.now() - Number(due));
    void d.ack();
    if (lateness.length === count) done();
  };
  try {
    const sub = await transport.consume('delayed', onDelivery, { prefetch: 1_000 });
    for (let i = 0; i < count; i += SEND_CHUNK) {
      const chunk: OutgoingMessage[] = [];
      for (let j = i; j < Math.min(count, i + SEND_CHUNK); j++) chunk.push({ id: `d-${j}`, body, headers: {} });
      await transport.sendBatch('delayed', chunk);
    }
    await finished;
    await sub.close();
  } finally {
    await transport.close();
  }
  return {
    p50: percentile(lateness, 50),
    p99: percentile(lateness, 99),
    max: percentile(lateness, 100),
    early: lateness.filter((l) => l < 0).length,
    handled: lateness.length,
  };
}

function result(label: string, n: number, t0: number, t1: number, t2: number, cpu: NodeJS.CpuUsage): Throughput {
  return {
    case: label,
    messages: n,
    sendMs: Math.round(t1 - t0),
    drainMs: Math.round(t2 - t1),
    perSec: Math.round((n * 1000) / (t2 - t0)),
    cpuMs: Math.round((cpu.user + cpu.system) / 1000),
  };
}

