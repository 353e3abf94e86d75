/**
 * The timed operator actions of the errors-scale benchmark, each on a
 * store opened afresh (what a CLI invocation does): ingest an error queue,
 * list its failure groups, show the first page, export it as NDJSON.
 */
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { ErrorStore } from '../../src/error-store/store.js';
import { Ingester } from '../../src/error-store/ingester.js';
import { RetryJobs } from '../../src/error-store/retry-jobs.js';
import { unindexedCount } from '../../src/error-store/text-index.js';
import type { StoredGroup } from '../../src/error-store/types.js';
import { utf8 } from '../../src/operations/body-preview.js';
import type { Transport } from '../../src/transport/types.js';

/** Seconds since `started` (a `performance.now()`). */
export function secondsSince(started: number): number {
  return (performance.now() - started) / 1000;
}

/** Ingests `errorQueue` into the store at `path` with batches of `batchSize`, until the queue is empty and everything is committed. */
export async function timeIngest(transport: Transport, path: string, errorQueue: string, expected: number, batchSize: number): Promise<number> {
  const store = ErrorStore.open(path);
  try {
    const ingester = new Ingester({ transport, store, errorQueues: [errorQueue], batchSize });
    const started = performance.now();
    await ingester.start();
    await ingester.untilIdle();
    const seconds = secondsSince(started);
    await ingester.stop();
    const stored = store.count({ errorQueue });
    if (stored !== expected) throw new Error(`ingest stored ${stored} entries of ${errorQueue}, expected ${expected} (stats ${JSON.stringify(ingester.stats)})`);
    return seconds;
  } finally {
    store.close();
  }
}

/**
 * A text search (`count` of the entries whose text contains `text`) on a
 * store opened for it, without catching up its full-text index: right after
 * ingest it reads the entries past the index's mark directly. Checks the
 * count is `expected`; resolves the time and the entries still waiting for
 * the index.
 */
export function timeTextSearch(path: string, text: string, expected: number): { seconds: number; unindexed: number } {
  const store = ErrorStore.open(path, { indexTextInBackground: false });
  try {
    const unindexed = unindexedCount(store.database);
    const started = performance.now();
    const found = store.count({ text, status: 'any' });
    const seconds = secondsSince(started);
    if (found !== expected) throw new Error(`a search for ${JSON.stringify(text)} found ${found} entries, expected ${expected}`);
    return { seconds, unindexed };
  } finally {
    store.close();
  }
}

/** Brings the full-text index of the store at `path` up to date (what the store does in the background after ingest); resolves the time. */
export async function timeTextIndex(path: string): Promise<number> {
  const store = ErrorStore.open(path, { indexTextInBackground: false });
  try {
    const started = performance.now();
    await store.indexText();
    return secondsSince(started);
  } finally {
    store.close();
  }
}

/** `store.groups()` on a store opened for it: what `errors list --store` prints. */
export function timeGroups(path: string): { seconds: number; groups: StoredGroup[] } {
  const started = performance.now();
  const store = ErrorStore.open(path);
  try {
    const groups = store.groups();
    return { seconds: secondsSince(started), groups };
  } finally {
    store.close();
  }
}

/** The first page of 50 entries, newest failure first, on a store opened for it. */
export function timeFirstPage(path: string): number {
  const started = performance.now();
  const store = ErrorStore.open(path);
  try {
    const page = store.search({}, { limit: 50 });
    if (page.entries.length !== 50 || page.next === undefined) throw new Error(`the first page held ${page.entries.length} entries`);
    return secondsSince(started);
  } finally {
    store.close();
  }
}

/**
 * Sends back every failed entry of one failure group to `queue`, at an
 * unlimited rate, with a retry job on a store opened for it; checks that
 * the job sent `expected` entries and that `queue` holds them.
 */
export async function timeRetryGroup(transport: Transport, path: string, signature: string, queue: string, expected: number): Promise<number> {
  const before = await readyIn(transport, queue);
  const started = performance.now();
  const store = ErrorStore.open(path);
  let seconds: number;
  try {
    const jobs = new RetryJobs({ store, transport });
    const job = await jobs.create({ filter: { signature } }, { by: 'bench', to: queue });
    const done = await jobs.run(job.id);
    seconds = secondsSince(started);
    if (done.state !== 'done' || done.sent !== expected) throw new Error(`the retry job ended ${done.state} with ${done.sent} of ${expected} sent (${JSON.stringify(done)})`);
  } finally {
    store.close();
  }
  const received = (await readyIn(transport, queue)) - before;
  if (received !== expected) throw new Error(`${queue} received ${received} messages, expected ${expected}`);
  return seconds;
}

async function readyIn(transport: Transport, queue: string): Promise<number> {
  const [depth] = await transport.inspection!.queueDepths([queue]);
  return depth!.ready;
}

/** Lines written to the file at a time. */
const EXPORT_CHUNK = 500;

/**
 * Every failed entry as NDJSON into `file`, one line per entry in the line
 * format of `errors export` (key, messageId, errorQueue, signature, headers,
 * bodyBase64, bodyText when the body is UTF-8). Resolves the time and the
 * lines written.
 */
export async function timeExport(path: string, file: string): Promise<{ seconds: number; lines: number }> {
  const started = performance.now();
  const store = ErrorStore.open(path);
  const out = createWriteStream(file);
  let lines = 0;
  try {
    let text = '';
    let inChunk = 0;
    for (const entry of store.export()) {
      const bodyText = utf8(entry.body);
      const line = {
        key: entry.key,
        messageId: entry.messageId,
        errorQueue: entry.errorQueue,
        signature: entry.signature,
        headers: entry.headers,
        bodyBase64: Buffer.from(entry.body.buffer, entry.body.byteOffset, entry.body.byteLength).toString('base64'),
        ...(bodyText === undefined ? {} : { bodyText }),
      };
      text += `${JSON.stringify(line)}\n`;
      lines++;
      if (++inChunk === EXPORT_CHUNK) {
        if (!out.write(text)) await once(out, 'drain');
        text = '';
        inChunk = 0;
      }
    }
    if (text !== '') out.write(text);
  } finally {
    store.close();
    out.end();
    await once(out, 'close');
  }
  return { seconds: secondsSince(started), lines };
}
