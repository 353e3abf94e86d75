/**
 * `redeliver errors ingest` and the `--store` commands against SQLite files
 * filled through a real endpoint, run in-process (see support.ts).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorStore } from '../../src/error-store/store.js';
import { cli, fillErrorQueue, sqlite, tempFolder, type Filled } from './support.js';

const folder = tempFolder();
afterAll(() => folder.cleanup());

let files = 0;

/** A SQLite file whose error queue holds 4 timeouts, 3 invalid, 2 refused and 1 binary entry; and a store path next to it. */
async function filled(): Promise<{ file: string; store: string; filled: Filled }> {
  const n = ++files;
  const file = folder.path(`broker-${n}.db`);
  const transport = sqlite(file);
  try {
    return { file, store: folder.path(`store-${n}.db`), filled: await fillErrorQueue(transport, { timeout: 4, invalid: 3, refused: 2, binary: 1 }) };
  } finally {
    await transport.close();
  }
}

async function errorQueueCount(file: string): Promise<number> {
  const transport = sqlite(file);
  try {
    return await transport.errorQueue.count('error');
  } finally {
    await transport.close();
  }
}

function json(run: { code: number; stdout: string; stderr: string }): any {
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  return JSON.parse(run.stdout);
}

describe('errors ingest --once', () => {
  it('moves every entry into the store, empties the error queue, and stores nothing twice on a second run', async () => {
    const { file, store } = await filled();
    const first = json(await cli(['errors', 'ingest', file, '--store', store, '--once', '--json']));
    expect(first).toMatchObject({ stored: 10, duplicates: 0, failedAgain: 0, handled: 0, commitFailures: 0, ackFailures: 0 });
    expect(await errorQueueCount(file)).toBe(0);
    const second = json(await cli(['errors', 'ingest', file, '--store', store, '--once', '--json']));
    expect(second).toMatchObject({ stored: 0, duplicates: 0 });
    const s = ErrorStore.open(store);
    try {
      expect(s.count({ status: 'any' })).toBe(10);
    } finally {
      s.close();
    }
    const human = await cli(['errors', 'ingest', file, '--store', store, '--once']);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^stored 0, duplicates 0, failed again 0, handled 0 in \d+(\.\d)? s\n$/);
  });

  it('takes the store from REDELIVER_STORE, and refuses to run without one', async () => {
    const { file, store } = await filled();
    expect(json(await cli(['errors', 'ingest', file, '--once', '--json'], { env: { REDELIVER_STORE: store } })).stored).toBe(10);
    const none = await cli(['errors', 'ingest', file, '--once']);
    expect(none).toMatchObject({ code: 2, stdout: '', stderr: 'redeliver: no error store: give --store <file> or set REDELIVER_STORE\n' });
  });

  it('refuses a file that is not an error store, and a store locked beyond the busy timeout, with exit 1 and the entries left in the queue', async () => {
    const { file } = await filled();
    const other = folder.path('other.db');
    const db = new Database(other);
    db.exec('CREATE TABLE invoices (id INTEGER PRIMARY KEY)');
    db.close();
    const wrong = await cli(['errors', 'ingest', file, '--store', other, '--once']);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^redeliver: cannot open the error store .*other\.db: ErrorStore: .* is a SQLite file of something else \(tables: invoices\)/);

    const text = folder.path('notes.txt');
    writeFileSync(text, 'this is not a database at all, just some words that fill a page '.repeat(100));
    const notSqlite = await cli(['errors', 'ingest', file, '--store', text, '--once']);
    expect(notSqlite.code).toBe(1);
    expect(notSqlite.stderr).toMatch(/^redeliver: cannot open the error store .*notes\.txt: file is not a database/);

    const locked = folder.path('locked.db');
    ErrorStore.open(locked).close();
    const holder = new Database(locked);
    holder.exec('BEGIN IMMEDIATE');
    try {
      const busy = await cli(['errors', 'ingest', file, '--store', locked, '--once', '--busy-timeout', '200']);
      expect(busy.code).toBe(1);
      expect(busy.stderr).toMatch(/^redeliver: cannot open the error store .*locked\.db: /);
    } finally {
      holder.exec('ROLLBACK');
      holder.close();
    }
    expect(await errorQueueCount(file)).toBe(10);
  });

  it('stops with exit 1 when the broker refuses the connection, having stored and acknowledged nothing', async () => {
    const store = folder.path('refused-store.db');
    const run = await cli(['errors', 'ingest', 'amqp://guest:guest@127.0.0.1:1', '--store', store, '--once']);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^redeliver: .*ECONNREFUSED/);
    expect(run.stderr).not.toContain('guest:guest');
    const s = ErrorStore.open(store);
    try {
      expect(s.count({ status: 'any' })).toBe(0);
    } finally {
      s.close();
    }
  });

  it('stops cleanly when interrupted: what it read is stored, and it says so', async () => {
    const { file, store } = await filled();
    const controller = new AbortController();
    const running = cli(['errors', 'ingest', file, '--store', store, '--json'], { signal: controller.signal });
    // Without --once it runs until stopped: wait for the queue to be empty, then stop it.
    for (let i = 0; i < 500 && (await errorQueueCount(file)) > 0; i++) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    const run = json(await running);
    expect(run.stored).toBe(10);
  });
});

describe('the --store commands', () => {
  let store = '';
  let ids: Filled['ids'];
  let keys: Map<string, string>;
  beforeAll(async () => {
    const f = await filled();
    store = f.store;
    ids = f.filled.ids;
    json(await cli(['errors', 'ingest', f.file, '--store', store, '--once', '--json']));
    const s = ErrorStore.open(store);
    try {
      keys = new Map(s.search({}, { limit: 100 }).entries.map((e) => [e.messageId, e.key]));
    } finally {
      s.close();
    }
  });

  it('lists groups from the store, largest first, with retry history columns', async () => {
    const list = json(await cli(['errors', 'list', '--store', store, '--json']));
    expect(list).toMatchObject({ store, status: 'failed', total: 10, groupCount: 4 });
    expect(list.groups.map((g: any) => [g.errorName, g.count])).toEqual([
      ['TimeoutError', 4],
      ['ValidationError', 3],
      ['Error', 2],
      ['DeserializationError', 1],
    ]);
    expect(list.groups[0]).toMatchObject({ reason: 'retries-exhausted', message: 'charge <n> for order <id> timed out after <n> ms', retried: 0 });
    const human = await cli(['errors', 'list', '--store', store]);
    expect(human.code).toBe(0);
    expect(human.stdout.split('\n')[0]).toBe(`error store ${store}: 10 failed entries in 4 failure groups`);
    expect(human.stdout).toMatch(/\nSIGNATURE\s+COUNT\s+REASON\s+ERROR\s+MESSAGE\s+FIRST FAILED\s+LAST FAILED\s+RETRIED\s+HANDLED\s+FAILED AGAIN\n/);
    const top = json(await cli(['errors', 'list', '--store', store, '--json', '--limit', '2']));
    expect(top.groups).toHaveLength(2);
    expect(top.groupCount).toBe(4);
  });

  it('pages entries with --entries, --limit and --after, newest or oldest first, each entry once', async () => {
    const seen: string[] = [];
    let after: string | undefined;
    let pagesRead = 0;
    do {
      const page = json(await cli(['errors', 'list', '--store', store, '--entries', '--limit', '3', '--sort', 'oldest', '--json', ...(after ? ['--after', after] : [])]));
      seen.push(...page.entries.map((e: any) => e.messageId));
      after = page.next;
      pagesRead++;
    } while (after !== undefined);
    expect(pagesRead).toBe(4);
    expect(new Set(seen).size).toBe(10);
    expect([...seen].sort()).toEqual([...ids.timeout, ...ids.invalid, ...ids.refused, ...ids.binary].sort());
    const newest = json(await cli(['errors', 'list', '--store', store, '--entries', '--json']));
    expect(newest.entries.map((e: any) => e.messageId)).toEqual([...seen].reverse());
    const human = await cli(['errors', 'list', '--store', store, '--entries', '--limit', '2']);
    expect(human.stdout).toMatch(/^KEY\s+FAILED AT\s+STATUS\s+ERROR QUEUE\s+QUEUE\s+SIGNATURE\s+ERROR\s+MESSAGE\n/);
    expect(human.stdout).toMatch(/\nnext page: add --after \d+\.\d+\n$/);
    const bad = await cli(['errors', 'list', '--store', store, '--entries', '--after', 'nonsense']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--after nonsense: not a cursor a previous page printed');
  });

  it('filters by error name, reason, text, original queue, endpoint, error queue and time', async () => {
    const count = async (...args: string[]) => json(await cli(['errors', 'list', '--store', store, '--entries', '--json', '--limit', '100', ...args])).entries.length;
    expect(await count('--error-name', 'TimeoutError')).toBe(4);
    expect(await count('--reason', 'unrecoverable')).toBe(3);
    expect(await count('--text', 'econnrefused')).toBe(2);
    expect(await count('--queue', 'orders')).toBe(10);
    expect(await count('--queue', 'payments')).toBe(0);
    expect(await count('--endpoint', 'orders')).toBe(10);
    expect(await count('--error-queue', 'error')).toBe(10);
    expect(await count('--error-queue', 'other.error')).toBe(0);
    expect(await count('--since', '1h')).toBe(10);
    expect(await count('--until', '1h')).toBe(0);
    expect(await count('--since', '2000-01-01T00:00:00Z', '--until', '2999-01-01T00:00:00Z')).toBe(10);
    const group = json(await cli(['errors', 'list', '--store', store, '--json'])).groups[1].signature;
    expect(await count('--group', group)).toBe(3);
    const badTime = await cli(['errors', 'list', '--store', store, '--since', 'yesterday']);
    expect(badTime.code).toBe(2);
    expect(badTime.stderr).toContain('--since yesterday: expected an ISO 8601 time');
    const noStore = await cli(['errors', 'list', folder.path('broker-1.db'), '--error-name', 'TimeoutError']);
    expect(noStore).toMatchObject({ code: 2, stderr: 'redeliver: --error-name work on the error store only: add --store <file>\n' });
  });

  it('shows an entry with its store history, before and after a retry was recorded', async () => {
    const key = keys.get(ids.timeout[0]!)!;
    const before = json(await cli(['errors', 'show', '--store', store, key, '--json']));
    expect(before).toMatchObject({ key, messageId: ids.timeout[0], errorQueue: 'error', originalQueue: 'orders', store: { status: 'failed', retriedCount: 0 } });
    expect(before.headers['redeliver-failure-error-name']).toBe('TimeoutError');
    const s = ErrorStore.open(store);
    try {
      expect(await s.claim([key], 'test', Date.now() + 60_000)).toEqual([key]);
      expect(await s.markRetried(key, 'test', { queue: 'orders', by: 'alice' })).toBe(true);
      expect(await s.recordHandled([ids.timeout[0]!])).toBe(1);
    } finally {
      s.close();
    }
    const after = json(await cli(['errors', 'show', '--store', store, key, '--json']));
    expect(after.store).toMatchObject({ status: 'retried', retriedCount: 1, lastRetriedBy: 'alice', retriedTo: 'orders', outcome: 'handled' });
    const human = await cli(['errors', 'show', '--store', store, key]);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/\nstore\n {2}status {10}retried\n {2}ingested at {5}\S+Z\n {2}retried {9}1 time, last at \S+Z by alice to orders\n {2}outcome {9}handled at \S+Z\n/);
    expect(human.stdout).toContain('\nheaders\n');
    // The retried entry left the failed selection and appears under --status retried and any.
    expect(json(await cli(['errors', 'list', '--store', store, '--json'])).total).toBe(9);
    expect(json(await cli(['errors', 'list', '--store', store, '--json', '--status', 'retried'])).total).toBe(1);
    expect(json(await cli(['errors', 'list', '--store', store, '--json', '--status', 'any'])).groups[0].retried).toBe(1);
    const missing = await cli(['errors', 'show', '--store', store, 'no-such-key']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`redeliver: no entry with key no-such-key in the error store ${store}\n`);
  });

  it('exports NDJSON with status and failedAt, filtered, and to a file', async () => {
    const run = await cli(['errors', 'export', '--store', store, '--status', 'any']);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(10);
    for (const line of lines) {
      expect(Object.keys(line).sort()).toEqual(expect.arrayContaining(['key', 'messageId', 'errorQueue', 'signature', 'headers', 'bodyBase64', 'status', 'failedAt']));
      expect(Date.parse(line.failedAt)).not.toBeNaN();
    }
    const binary = lines.find((l) => l.messageId === ids.binary[0]);
    expect(binary.bodyText).toBeUndefined();
    expect(Buffer.from(binary.bodyBase64, 'base64')[0]).toBe(0xff);
    const out = folder.path('export.ndjson');
    const toFile = await cli(['errors', 'export', '--store', store, '--error-name', 'ValidationError', '--out', out]);
    expect(toFile.code).toBe(0);
    expect(toFile.stderr).toBe(`exported 3 entries from the error store to ${out}\n`);
    expect(readFileSync(out, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l).status)).toEqual(['failed', 'failed', 'failed']);
    const limited = await cli(['errors', 'export', '--store', store, '--limit', '2']);
    expect(limited.stdout.trimEnd().split('\n')).toHaveLength(2);
  });

  it('reads REDELIVER_STORE when no target is given; a target given means the error queue in place', async () => {
    const env = { REDELIVER_STORE: store };
    expect(json(await cli(['errors', 'list', '--json'], { env })).store).toBe(store);
    const key = keys.get(ids.invalid[0]!)!;
    expect(json(await cli(['errors', 'show', key, '--json'], { env })).key).toBe(key);
    const inPlace = json(await cli(['errors', 'list', folder.path('broker-1.db'), '--json'], { env }));
    expect(inPlace).toMatchObject({ errorQueue: 'error', total: 0 });
    const both = await cli(['errors', 'list', folder.path('broker-1.db'), '--store', store]);
    expect(both).toMatchObject({ code: 2, stderr: 'redeliver: with --store, errors list takes no target: it works on the store, never on a broker\n' });
    const missing = await cli(['errors', 'list', '--store', folder.path('missing.db')]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no error store at');
  });

  it('shows the store by error queue and status in stats, next to the broker, or alone', async () => {
    const alone = json(await cli(['stats', '--store', store, '--json']));
    expect(alone.store.errorQueues).toEqual([{ errorQueue: 'error', byStatus: expect.objectContaining({ failed: expect.any(Number), retried: 1 }), total: 10 }]);
    const both = json(await cli(['stats', folder.path('broker-1.db'), '--json'], { env: { REDELIVER_STORE: store } }));
    expect(both.queues.map((q: any) => q.queue)).toContain('error');
    expect(both.store.errorQueues[0].total).toBe(10);
    const human = await cli(['stats', folder.path('broker-1.db'), '--store', store]);
    expect(human.stdout).toMatch(/\nerror store .*:\nERROR QUEUE\s+FAILED\s+RETRYING\s+RETRIED\s+REPLACED\s+DELETED\s+TOTAL\nerror\s+\d+\s+0\s+1\s+0\s+\d+\s+10\n$/);
  });

  it('deletes one key, a group or a filter with --yes, never without', async () => {
    const key = keys.get(ids.refused[0]!)!;
    expect(json(await cli(['errors', 'delete', '--store', store, key, '--json']))).toEqual({ deleted: 1, notFailed: 0 });
    expect(json(await cli(['errors', 'delete', '--store', store, key, '--json']))).toEqual({ deleted: 0, notFailed: 1, status: 'deleted' });
    const group = json(await cli(['errors', 'list', '--store', store, '--json', '--error-name', 'ValidationError'])).groups[0].signature;
    const unconfirmed = await cli(['errors', 'delete', '--store', store, '--group', group]);
    expect(unconfirmed).toMatchObject({ code: 2, stderr: 'redeliver: this deletes 3 failed entries of the error store for good: add --yes to confirm\n' });
    expect(json(await cli(['errors', 'list', '--store', store, '--json', '--group', group])).total).toBe(3);
    expect(json(await cli(['errors', 'delete', '--store', store, '--group', group, '--yes', '--json']))).toEqual({ deleted: 3 });
    const nothing = await cli(['errors', 'delete', '--store', store, '--yes']);
    expect(nothing.code).toBe(2);
    expect(json(await cli(['errors', 'delete', '--store', store, '--text', 'ECONNREFUSED', '--yes', '--json']))).toEqual({ deleted: 1 });
    const left = json(await cli(['errors', 'list', '--store', store, '--json']));
    expect(left.total).toBe(4);
    expect(json(await cli(['errors', 'delete', '--store', store, '--all', '--yes']).then((r) => ({ ...r, stdout: JSON.stringify({ line: r.stdout }) }))).line).toBe('deleted 4\n');
    expect(json(await cli(['errors', 'list', '--store', store, '--json', '--status', 'deleted'])).total).toBe(9);
    // The deleted entries keep their failure story; their bodies are dropped.
    const shown = json(await cli(['errors', 'show', '--store', store, key, '--json']));
    expect(shown.store.status).toBe('deleted');
    expect(shown.body.size).toBe(0);
    // Recorded as the operating-system user who ran the command, with when.
    expect(shown.store).toMatchObject({ deletedBy: `cli:${userInfo().username}`, deletedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) });
    const human = await cli(['errors', 'show', '--store', store, key]);
    expect(human.stdout).toMatch(new RegExp(`status\\s+deleted at \\S+ by cli:${userInfo().username} \\(its body was dropped\\)`));
  });
});
