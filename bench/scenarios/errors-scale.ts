/**
 * `npm run bench -- errors-scale [--sizes 10000,100000] [--transports rabbitmq,sqlite] [--batch-size B] [--baseline-size N] [--url URL]`
 *
 * The error store after an outage. For each transport and size, an error
 * queue is filled with that many entries (ten failure groups, one of them
 * exactly 10 %; realistic failure headers, retry history, user headers and a
 * 1 KiB body; see bench/errors-scale/entries.ts), then timed, each on a new
 * store file:
 *
 * - ingest: an `Ingester` (batches of B, default 1000) from `start()` until
 *   `untilIdle()` resolves (queue empty, everything committed and acked);
 * - list: opening the store and `groups()` (what `errors list --store`
 *   prints); first page: opening the store and `search({}, {limit: 50})`;
 * - export: every entry as NDJSON to a file, in the line format of
 *   `errors export`;
 * - beside ingest and export, the CPU time the process spent on them,
 *   steadier than wall time on a machine shared with other work;
 * - retry group: a `RetryJobs` job sends the group that is exactly 10 % of
 *   the entries back to the work queue they failed on (declared before),
 *   at an unlimited rate; the work queue must then hold exactly that many.
 *
 * Baseline (RabbitMQ only, N entries, default 10,000): the in-place
 * `errors list` path, `scanGroups` over `transport.errorQueue`, which reads
 * the queue from the broker. A failure (such as a BrokerStallError) is the
 * baseline's result, with the time it took to fail.
 *
 * RabbitMQ queues get unique names and are deleted afterwards; nothing
 * broker-wide is changed.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import amqp from 'amqplib';
import { scanGroups } from '../../src/cli/error-scan.js';
import type { Transport } from '../../src/transport/types.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { deleteDelayTopology } from '../../test/support/delay-topology.js';
import { countOfKind, FAILURE_KINDS } from '../errors-scale/entries.js';
import { fillRabbitMq, fillSqlite, type FillPlan } from '../errors-scale/fill.js';
import { secondsSince, timeExport, timeFirstPage, timeGroups, timeIngest, timeRetryGroup, timeTextIndex, timeTextSearch } from '../errors-scale/measure.js';
import { positiveArg, printJson, printTable, roundTo } from '../report.js';

type TransportName = 'rabbitmq' | 'sqlite';

/** Goals at the largest size, seconds per operation. */
const GOAL_SECONDS: Record<TransportName, number> = { rabbitmq: 30, sqlite: 5 };
/** Listing (groups, first page) from the store, at every size. */
const LIST_GOAL_SECONDS = 1;
/** List time at the largest size over the smallest, at most. */
const GROWTH_GOAL = 12;

interface Figures {
  ingestSeconds: number;
  listSeconds: number;
  firstPageSeconds: number;
  retryGroupSeconds: number;
  exportSeconds: number;
  /** CPU time (user + system) of the process during ingest: steadier than wall time on a shared machine. */
  ingestCpuSeconds: number;
  /** CPU time of the process during export. */
  exportCpuSeconds: number;
  /** A text search right after ingest, before the full-text index caught up (the entries past its mark read directly). */
  textSearchSeconds: number;
  /** Entries not yet in the full-text index when that search ran. */
  textUnindexed: number;
  /** Bringing the full-text index up to date after ingest (what the store does in the background at quiet moments). */
  textIndexSeconds: number;
  /** CPU time of the process during that catch-up. */
  textIndexCpuSeconds: number;
}

interface Baseline {
  readonly entries: number;
  readonly result: 'ok' | 'failed';
  readonly seconds: number;
  readonly groups?: number;
  readonly error?: string;
  readonly storeListSeconds?: number;
  /** Store list time over in-place list time. */
  readonly storeOverInPlace?: number;
}

export async function run(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      sizes: { type: 'string', default: '10000,100000' },
      transports: { type: 'string', default: 'rabbitmq,sqlite' },
      'batch-size': { type: 'string', default: '1000' },
      'baseline-size': { type: 'string', default: '10000' },
      url: { type: 'string', default: process.env['RABBITMQ_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672' },
    },
  });
  const sizes = [...new Set(values.sizes.split(',').map((s) => positiveArg('sizes', s.trim())))].sort((a, b) => a - b);
  const transports = [...new Set(values.transports.split(',').map((t) => t.trim()))];
  for (const t of transports) if (t !== 'rabbitmq' && t !== 'sqlite') throw new RangeError(`--transports takes rabbitmq and sqlite, got ${t}`);
  const batchSize = positiveArg('batch-size', values['batch-size']);
  const baselineSize = positiveArg('baseline-size', values['baseline-size']);
  const url = values.url;
  const dir = mkdtempSync(join(tmpdir(), 'redeliver-bench-errors-'));
  const loadBefore = loadavg().map((l) => roundTo(l, 2));

  const results: Partial<Record<TransportName, Record<string, Figures>>> = {};
  let baseline: Baseline | undefined;
  try {
    for (const name of transports as TransportName[]) {
      const byLabel: Record<string, Figures> = {};
      for (const n of sizes) {
        byLabel[sizeLabel(n)] = name === 'rabbitmq' ? await onRabbitMq(url, dir, n, batchSize) : await onSqlite(dir, n, batchSize);
        console.error(`${name} ${n}: ${JSON.stringify(byLabel[sizeLabel(n)])}`);
      }
      results[name] = byLabel;
    }
    if (transports.includes('rabbitmq')) {
      baseline = await inPlaceBaseline(url, baselineSize);
      const store = results.rabbitmq?.[sizeLabel(baselineSize)];
      if (store && baseline.result === 'ok') baseline = { ...baseline, storeListSeconds: store.listSeconds, storeOverInPlace: roundTo(store.listSeconds / baseline.seconds, 5) };
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const smallest = sizeLabel(sizes[0]!);
  const largest = sizeLabel(sizes.at(-1)!);
  const growths = Object.values(results).map((r) => r[largest]!.listSeconds / r[smallest]!.listSeconds);
  const growth = sizes.length > 1 && growths.length > 0 ? roundTo(Math.max(...growths), 2) : undefined;

  printTable(
    `error store at scale: seconds per operation (batches of ${batchSize}; list and first page include opening the store; load average before ${loadBefore.join(' ')}, after ${loadavg().map((l) => l.toFixed(2)).join(' ')})`,
    Object.entries(results).flatMap(([name, byLabel]) =>
      sizes.map((n) => ({ n, f: byLabel[sizeLabel(n)]! })).map(({ n, f }) => ({
        transport: name,
        entries: n,
        'ingest s': f.ingestSeconds.toFixed(3),
        'ingested/s': Math.round(n / f.ingestSeconds),
        'list s': f.listSeconds.toFixed(3),
        'first page s': f.firstPageSeconds.toFixed(3),
        'retry 10 % s': f.retryGroupSeconds.toFixed(3),
        'export s': f.exportSeconds.toFixed(3),
        'ingest CPU s': f.ingestCpuSeconds.toFixed(3),
        'export CPU s': f.exportCpuSeconds.toFixed(3),
        'text search s': f.textSearchSeconds.toFixed(3),
        'not indexed': f.textUnindexed,
        'index catch-up s': f.textIndexSeconds.toFixed(3),
        'catch-up CPU s': f.textIndexCpuSeconds.toFixed(3),
      })),
    ),
  );
  if (baseline) {
    printTable(`in-place errors list on RabbitMQ (scanGroups over the broker's queue), ${baseline.entries} entries`, [
      {
        result: baseline.result,
        seconds: baseline.seconds.toFixed(3),
        groups: baseline.groups ?? '-',
        'store list s': baseline.storeListSeconds?.toFixed(3) ?? '-',
        'store / in-place': baseline.storeOverInPlace?.toExponential(2) ?? '-',
        error: baseline.error ?? '',
      },
    ]);
  }
  printTable('goals', goalRows(results, largest, growth));
  printJson({
    scenario: 'errors-scale',
    sizes,
    batchSize,
    loadAverage: { before: loadBefore, after: loadavg().map((l) => roundTo(l, 2)) },
    ...results,
    growth,
    baseline,
  });
}

/** `entries10k` for 10,000; `entries1234` for a size that is no whole thousand. */
function sizeLabel(n: number): string {
  return n % 1000 === 0 ? `entries${n / 1000}k` : `entries${n}`;
}

function goalRows(results: Partial<Record<TransportName, Record<string, Figures>>>, largest: string, growth: number | undefined): Record<string, string | number>[] {
  const rows: Record<string, string | number>[] = [];
  const check = (goal: string, measured: number, limit: number) => rows.push({ goal, measured: measured.toFixed(3), limit, result: measured <= limit ? 'PASS' : 'FAIL' });
  for (const [name, byLabel] of Object.entries(results) as [TransportName, Record<string, Figures>][]) {
    const top = byLabel[largest]!;
    for (const op of ['ingestSeconds', 'retryGroupSeconds', 'exportSeconds'] as const) {
      check(`${name} ${largest.replace('entries', '')} ${op}`, top[op], GOAL_SECONDS[name]);
    }
    for (const [label, f] of Object.entries(byLabel)) {
      check(`${name} ${label.replace('entries', '')} list from store`, f.listSeconds, LIST_GOAL_SECONDS);
      check(`${name} ${label.replace('entries', '')} first page from store`, f.firstPageSeconds, LIST_GOAL_SECONDS);
    }
  }
  if (growth !== undefined) check('list growth, largest / smallest size', growth, GROWTH_GOAL);
  return rows;
}

/** Times the store operations on an error queue that `fill` filled through `transport`. */
async function measure(transport: Transport, dir: string, name: TransportName, plan: FillPlan, batchSize: number): Promise<Figures> {
  const storePath = join(dir, `store-${name}-${plan.n}.db`);
  const ingestCpu = process.cpuUsage();
  const ingestSeconds = await timeIngest(transport, storePath, plan.errorQueue, plan.n, batchSize);
  const ingestCpuSeconds = cpuSecondsSince(ingestCpu);
  const search = timeTextSearch(storePath, 'insufficient funds', countOfKind(plan.n, 0));
  const textIndexCpu = process.cpuUsage();
  const textIndexSeconds = await timeTextIndex(storePath);
  const textIndexCpuSeconds = cpuSecondsSince(textIndexCpu);
  const list = timeGroups(storePath);
  checkGroups(list.groups, plan.n);
  const firstPageSeconds = timeFirstPage(storePath);
  const exportCpu = process.cpuUsage();
  const exported = await timeExport(storePath, join(dir, `export-${name}-${plan.n}.ndjson`));
  const exportCpuSeconds = cpuSecondsSince(exportCpu);
  if (exported.lines !== plan.n) throw new Error(`export wrote ${exported.lines} lines, expected ${plan.n}`);
  // The group that is exactly 10 % of the entries, back to the queue it failed on.
  const tenth = countOfKind(plan.n, 0);
  const retried = list.groups.find((g) => g.count === tenth)!;
  const retryGroupSeconds = await timeRetryGroup(transport, storePath, retried.signature.id, plan.workQueue, tenth);
  const r = (s: number) => roundTo(s, 3);
  return { ingestSeconds: r(ingestSeconds), listSeconds: r(list.seconds), firstPageSeconds: r(firstPageSeconds), retryGroupSeconds: r(retryGroupSeconds), exportSeconds: r(exported.seconds), ingestCpuSeconds: r(ingestCpuSeconds), exportCpuSeconds: r(exportCpuSeconds),
    textSearchSeconds: r(search.seconds), textUnindexed: search.unindexed, textIndexSeconds: r(textIndexSeconds), textIndexCpuSeconds: r(textIndexCpuSeconds) };
}

/** User + system CPU seconds of this process since `start`. */
function cpuSecondsSince(start: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1e6;
}

/** The groups the store lists must be the ten the entries were made with, of the sizes they were made with. */
function checkGroups(groups: readonly { count: number }[], n: number): void {
  const want = FAILURE_KINDS.map((_, k) => countOfKind(n, k)).sort((a, b) => b - a);
  const got = groups.map((g) => g.count);
  if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`the store lists groups of ${got.join(', ')}; expected ${want.join(', ')}`);
}

/** Unique names for one RabbitMQ run. */
function rabbitNames(): { prefix: string; workQueue: string; errorQueue: string } {
  const suffix = randomUUID().slice(0, 8);
  return { prefix: `bench-errors-${suffix}`, workQueue: `bench-errors-work-${suffix}`, errorQueue: `bench-errors-error-${suffix}` };
}

/** A RabbitMQ transport under its own prefix, and its queues deleted afterwards. */
async function withRabbitMq<T>(url: string, fn: (transport: RabbitMqTransport, names: ReturnType<typeof rabbitNames>) => Promise<T>): Promise<T> {
  const names = rabbitNames();
  const transport = new RabbitMqTransport({ url, topologyPrefix: names.prefix, connectionName: 'redeliver-bench-errors-scale' });
  try {
    await transport.connect();
    return await fn(transport, names);
  } finally {
    await transport.close();
    const admin = await amqp.connect(url);
    await deleteDelayTopology(admin, names.prefix, [names.workQueue, names.errorQueue]);
    await admin.close();
  }
}

function onRabbitMq(url: string, dir: string, n: number, batchSize: number): Promise<Figures> {
  return withRabbitMq(url, async (transport, names) => {
    const plan = { workQueue: names.workQueue, errorQueue: names.errorQueue, n, now: Date.now() };
    await fillRabbitMq(url, transport, plan);
    return measure(transport, dir, 'rabbitmq', plan, batchSize);
  });
}

async function onSqlite(dir: string, n: number, batchSize: number): Promise<Figures> {
  const path = join(dir, `transport-${n}.db`);
  const transport = new SqliteTransport({ path });
  try {
    const plan = { workQueue: 'orders', errorQueue: 'error', n, now: Date.now() };
    await fillSqlite(path, transport, plan);
    return await measure(transport, dir, 'sqlite', plan, batchSize);
  } finally {
    await transport.close();
  }
}

/** The in-place `errors list` path on RabbitMQ: every entry read from the broker and grouped. */
function inPlaceBaseline(url: string, n: number): Promise<Baseline> {
  return withRabbitMq(url, async (transport, names) => {
    await fillRabbitMq(url, transport, { workQueue: names.workQueue, errorQueue: names.errorQueue, n, now: Date.now() });
    const started = performance.now();
    try {
      const scan = await scanGroups(transport.errorQueue, names.errorQueue);
      if (scan.scanned !== n) throw new Error(`scanned ${scan.scanned} entries of ${n}`);
      return { entries: n, result: 'ok', seconds: roundTo(secondsSince(started), 3), groups: scan.groups.length };
    } catch (error) {
      const e = error as Error;
      return { entries: n, result: 'failed', seconds: roundTo(secondsSince(started), 3), error: `${e.name}: ${e.message}`.slice(0, 300) };
    }
  });
}
