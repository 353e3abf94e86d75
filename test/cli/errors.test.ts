/**
 * `redeliver errors ...` against SQLite files filled through a real
 * endpoint, run in-process (see support.ts).
 */
import { chmodSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { ErrorEntry } from '../../src/transport/error-queue.js';
import type { Transport } from '../../src/transport/types.js';
import { cli, drain, fillErrorQueue, sqlite, tempFolder, wrap, type Filled } from './support.js';

const folder = tempFolder();
afterAll(() => folder.cleanup());

let files = 0;
/** A fresh SQLite file with a filled error queue: 4 timeouts, 3 invalid, 2 refused, 1 binary, and 2 messages handled fine. */
async function filledFile(counts = { timeout: 4, invalid: 3, refused: 2, binary: 1, ok: 2 }): Promise<{ file: string; filled: Filled }> {
  const file = folder.path(`errors-${++files}.db`);
  const transport = sqlite(file);
  try {
    return { file, filled: await fillErrorQueue(transport, counts) };
  } finally {
    await transport.close();
  }
}

/** Every entry of the error queue of `file`, oldest first. */
async function entries(file: string, errorQueue = 'error'): Promise<ErrorEntry[]> {
  const transport = sqlite(file);
  try {
    return await transport.errorQueue.browse(errorQueue, { limit: 10_000 });
  } finally {
    await transport.close();
  }
}

async function keyOf(file: string, messageId: string): Promise<string> {
  const found = (await entries(file)).find((e) => e.messageId === messageId);
  if (!found) throw new Error(`${messageId} is not in the error queue`);
  return found.key;
}

/** Consumes `queue` of `file` and resolves the ids that arrived, with their replay counts. */
async function arrivals(file: string, queue: string, expected: number): Promise<{ id: string; replayCount: string | undefined }[]> {
  const transport = sqlite(file);
  try {
    const got = await drain(transport, queue, expected);
    return got.map((d) => ({ id: d.id, replayCount: d.headers[HEADER.replayCount] }));
  } finally {
    await transport.close();
  }
}

/** Makes `queue` exist in `file` the way an endpoint does: by consuming it. */
async function consumeOnce(file: string, queue: string): Promise<void> {
  const transport = sqlite(file);
  try {
    await (await transport.consume(queue, (d) => void d.release(), { prefetch: 1 })).close();
  } finally {
    await transport.close();
  }
}

/**
 * Puts an entry into the error queue of `file` the way a broker dead-letter
 * exchange or anyone who can write to it could: its headers name `queue` as
 * the queue it failed on. Resolves its message id.
 */
async function deadLetterForged(file: string, queue: string): Promise<string> {
  const transport = sqlite(file);
  const id = 'forged-1';
  try {
    await transport.send('inbox', { id, body: new TextEncoder().encode('{}'), headers: {} });
    const settled = new Promise<void>((resolve, reject) => {
      void transport.consume('inbox', (d) => {
        d.deadLetter('error', { [HEADER.failureQueue]: queue, [HEADER.failureReason]: 'unrecoverable', [HEADER.failureMessage]: 'forged' }).then(resolve, reject);
      }, { prefetch: 1 });
    });
    await settled;
  } finally {
    await transport.close();
  }
  return id;
}

/** Puts an entry into the error queue of `file` that redeliver did not write: no failure headers at all. Resolves its message id. */
async function deadLetterForeign(file: string): Promise<string> {
  const transport = sqlite(file);
  const id = 'foreign-1';
  try {
    await transport.send('inbox', { id, body: new TextEncoder().encode('{}'), headers: { 'x-origin': 'legacy-system' } });
    await new Promise<void>((resolve, reject) => {
      void transport.consume('inbox', (d) => void d.deadLetter('error', { 'x-origin': 'legacy-system' }).then(resolve, reject), { prefetch: 1 });
    });
  } finally {
    await transport.close();
  }
  return id;
}

describe('errors list, show and export (read only)', () => {
  let file = '';
  let filled: Filled;
  beforeAll(async () => {
    ({ file, filled } = await filledFile());
  });

  it('groups the error queue by failure signature, with counts and first and last seen', async () => {
    const run = await cli(['errors', 'list', file, '--json']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const json = JSON.parse(run.stdout);
    expect(json.errorQueue).toBe('error');
    expect(json.total).toBe(10);
    const byName = new Map<string, any>(json.groups.map((g: any) => [g.errorName, g]));
    expect(json.groups.map((g: any) => g.count)).toEqual([4, 3, 2, 1]);
    // Numbers, uuids and quoted values differ from message to message; the signature does not.
    expect(byName.get('TimeoutError')).toMatchObject({ count: 4, reason: 'retries-exhausted', message: 'charge <n> for order <id> timed out after <n> ms' });
    expect(byName.get('TimeoutError').topFrame).toMatch(/^at chargeCard \(.*support\.ts\)$/);
    expect(byName.get('ValidationError')).toMatchObject({ count: 3, reason: 'unrecoverable', message: 'order <n> has an invalid sku <value>' });
    expect(byName.get('Error')).toMatchObject({ count: 2, reason: 'retries-exhausted' });
    expect(byName.get('Error').message).not.toMatch(/\d/);
    expect(byName.get('DeserializationError')).toMatchObject({ count: 1, reason: 'deserialization' });
    for (const g of json.groups) {
      expect(g.signature).toMatch(/^[0-9a-f]{8}$/);
      expect(g.firstSeen <= g.lastSeen).toBe(true);
      expect(Date.parse(g.firstSeen)).not.toBeNaN();
    }
    // Each group's keys are exactly the messages of that kind.
    const all = await entries(file);
    const idsOf = (g: any) => g.keys.map((k: string) => all.find((e) => e.key === k)?.messageId).sort();
    expect(idsOf(byName.get('TimeoutError'))).toEqual([...filled.ids.timeout].sort());
    expect(idsOf(byName.get('ValidationError'))).toEqual([...filled.ids.invalid].sort());
    expect(idsOf(byName.get('Error'))).toEqual([...filled.ids.refused].sort());
    expect(idsOf(byName.get('DeserializationError'))).toEqual(filled.ids.binary);
  });

  it('prints a table for people', async () => {
    const run = await cli(['errors', 'list', file]);
    expect(run.code).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toBe("error queue 'error': 10 messages in 4 failure groups");
    expect(lines[2]).toMatch(/^SIGNATURE\s+COUNT\s+REASON\s+ERROR\s+MESSAGE\s+FIRST SEEN\s+LAST SEEN$/);
    expect(lines[3]).toMatch(/^[0-9a-f]{8}\s+4\s+retries-exhausted\s+TimeoutError\s+charge <n> for order <id> timed out after <n> ms\s+\d{4}-\d\d-\d\dT[\d:]+Z\s+\d{4}-/);
    expect(lines[4]).toMatch(/^ {2}oldest key \d+ · at chargeCard \(/);
    expect(run.stdout).toContain('ValidationError');
    expect(run.stdout).toContain(`redeliver errors retry ${file} --group <signature>`);
  });

  it('reads another error queue, and says when it is empty', async () => {
    const run = await cli(['errors', 'list', file, '--error-queue', 'payments.error']);
    expect(run).toMatchObject({ code: 0, stdout: "error queue 'payments.error' is empty\n" });
    const json = JSON.parse((await cli(['errors', 'list', file, '--error-queue', 'payments.error', '--json'])).stdout);
    expect(json).toEqual({ errorQueue: 'payments.error', total: 0, groups: [] });
  });

  it('shows one entry: headers, body, stack, attempt history and original queue', async () => {
    const key = await keyOf(file, filled.ids.timeout[0]!);
    const run = await cli(['errors', 'show', file, key]);
    expect(run.code).toBe(0);
    const out = run.stdout;
    expect(out).toContain(`entry ${key} in error queue 'error'`);
    expect(out).toMatch(/message id\s+timeout-1\n/);
    expect(out).toMatch(/original queue\s+orders\n/);
    expect(out).toMatch(/reason\s+retries-exhausted\n/);
    expect(out).toMatch(/attempts\s+3 \(last round of immediate retries: 3, delayed retries: 0\)/);
    expect(out).toMatch(/\n {2}TimeoutError: charge 1 for order [0-9a-f-]{36} timed out after 1007 ms\n {6}at chargeCard \(/);
    expect(out).toContain('attempt history (oldest first, the last 3 failures)');
    expect(out).toMatch(/\n {2}1 {2}\S+Z +1 +0 {2}TimeoutError {2}charge 1 for order/);
    expect(out).toMatch(/\n {2}3 {2}\S+Z +3 +0 {2}TimeoutError/);
    expect(out).toContain('  x-tenant: acme\n');
    expect(out).toContain('  redeliver-failure-queue: orders\n');
    expect(out).toContain('body (UTF-8, 24 bytes)\n  {"kind":"timeout","n":1}\n');
  });

  it('shows an entry as JSON, with the history parsed', async () => {
    const key = await keyOf(file, filled.ids.invalid[0]!);
    const json = JSON.parse((await cli(['errors', 'show', file, key, '--json'])).stdout);
    expect(json).toMatchObject({
      key,
      messageId: filled.ids.invalid[0],
      errorQueue: 'error',
      originalQueue: 'orders',
      signature: { errorName: 'ValidationError', reason: 'unrecoverable' },
      failure: { reason: 'unrecoverable', errorName: 'ValidationError', attempts: '1', replayCount: 0 },
      body: { encoding: 'utf8', text: '{"kind":"invalid","n":2}', size: 24, truncated: false },
    });
    expect(json.failure.message).toBe('order 2 has an invalid sku "SKU-26"');
    expect(json.history).toHaveLength(1);
    expect(json.history[0]).toMatchObject({ errorName: 'ValidationError', immediateAttempt: 1, delayedAttempt: 0 });
    expect(json.headers['x-tenant']).toBe('acme');
  });

  it('shows a binary body as hex, and a long body truncated', async () => {
    const key = await keyOf(file, filled.ids.binary[0]!);
    const run = await cli(['errors', 'show', file, key]);
    expect(run.stdout).toContain('body (binary, hex, 6 bytes)\n  00000000  ff 00 fe 04 10 80');
    const short = await cli(['errors', 'show', file, await keyOf(file, filled.ids.timeout[0]!), '--body-bytes', '10']);
    expect(short.stdout).toContain('body (UTF-8, 24 bytes, first 10 shown)\n  {"kind":"t\n');
    const json = JSON.parse((await cli(['errors', 'show', file, key, '--json', '--body-bytes', '2'])).stdout);
    expect(json.body).toEqual({ encoding: 'hex', text: `00000000  ${'ff 00'.padEnd(47)}  ..`, size: 6, shownBytes: 2, truncated: true });
  });

  it('fails with exit code 1 for a key that is not there, and 2 for a key that cannot be one', async () => {
    const missing = await cli(['errors', 'show', file, '999999']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe("redeliver: no entry with key 999999 in error queue 'error' (sent back or deleted already?)\n");
    const bad = await cli(['errors', 'show', file, 'abc']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("'abc' is not an error-queue key: sqlite keys are whole numbers");
  });

  it('exports every entry as NDJSON, one a line, body as base64 and as text when UTF-8', async () => {
    const run = await cli(['errors', 'export', file]);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(10);
    const all = await entries(file);
    expect(lines.map((l) => l.key)).toEqual(all.map((e) => e.key));
    for (const [i, line] of lines.entries()) {
      const entry = all[i]!;
      expect(line.messageId).toBe(entry.messageId);
      expect(line.errorQueue).toBe('error');
      expect(line.headers).toEqual(entry.headers);
      expect(line.signature).toMatch(/^[0-9a-f]{8}$/);
      expect(new Uint8Array(Buffer.from(line.bodyBase64, 'base64'))).toEqual(entry.body);
      if (entry.messageId.startsWith('binary')) expect(line).not.toHaveProperty('bodyText');
      else expect(JSON.parse(line.bodyText)).toMatchObject({ kind: entry.messageId.split('-')[0] });
    }
  });

  it('exports to a file with --out', async () => {
    const out = folder.path('export.ndjson');
    const run = await cli(['errors', 'export', file, '--out', out]);
    expect(run).toMatchObject({ code: 0, stdout: '' });
    expect(run.stderr).toBe(`exported 10 entries from 'error' to ${out}\n`);
    const lines = readFileSync(out, 'utf8').trimEnd().split('\n');
    expect(lines).toHaveLength(10);
    expect(JSON.parse(lines[0]!).messageId).toBe('timeout-1');
    const bad = await cli(['errors', 'export', file, '--out', folder.path('no/such/dir/x.ndjson')]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^redeliver: cannot write .*x\.ndjson: ENOENT/);
  });

  it('creates the --out file 0600, tightens an existing one, and refuses a symbolic link', async () => {
    const out = folder.path('private.ndjson');
    expect((await cli(['errors', 'export', file, '--out', out])).code).toBe(0);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const loose = folder.path('loose.ndjson');
    writeFileSync(loose, 'old', { mode: 0o644 });
    chmodSync(loose, 0o644);
    expect((await cli(['errors', 'export', file, '--out', loose])).code).toBe(0);
    expect(statSync(loose).mode & 0o777).toBe(0o600);
    // A link planted by someone else, pointing at a file the operator can write.
    const victim = folder.path('victim.txt');
    writeFileSync(victim, 'untouched');
    const link = folder.path('planted.ndjson');
    symlinkSync(victim, link);
    const refused = await cli(['errors', 'export', file, '--out', link]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('is a symbolic link: refusing to follow it');
    expect(readFileSync(victim, 'utf8')).toBe('untouched');
  });
});

describe('errors retry', () => {
  it('sends one message back to its original queue, once, however often it is asked', async () => {
    const { file, filled } = await filledFile({ timeout: 2, invalid: 1, refused: 0, binary: 0, ok: 0 });
    const id = filled.ids.timeout[1]!;
    const key = await keyOf(file, id);
    const first = await cli(['errors', 'retry', file, key]);
    expect(first).toEqual({ code: 0, stdout: 'sent back 1 (orders: 1), already gone 0\n', stderr: '' });
    const second = await cli(['errors', 'retry', file, key]);
    expect(second).toEqual({ code: 0, stdout: 'sent back 0, already gone 1\n', stderr: '' });
    expect(await arrivals(file, 'orders', 1)).toEqual([{ id, replayCount: '1' }]);
    expect((await entries(file)).map((e) => e.messageId).sort()).toEqual([filled.ids.invalid[0], filled.ids.timeout[0]].sort());
  });

  it('sends a whole failure group back, and leaves the other groups', async () => {
    const { file, filled } = await filledFile({ timeout: 5, invalid: 2, refused: 2, binary: 0, ok: 0 });
    const groups = JSON.parse((await cli(['errors', 'list', file, '--json'])).stdout).groups;
    const timeouts = groups.find((g: any) => g.errorName === 'TimeoutError');
    const run = await cli(['errors', 'retry', file, '--group', timeouts.signature.toUpperCase(), '--json']);
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout)).toEqual({ sentBack: 5, alreadyGone: 0, refused: 0, failed: 0, unseen: 0, read: 9, selected: 5, queues: { orders: 5 }, interrupted: false });
    const got = await arrivals(file, 'orders', 5);
    expect(got.map((g) => g.id).sort()).toEqual([...filled.ids.timeout].sort());
    expect(got.every((g) => g.replayCount === '1')).toBe(true);
    expect((await entries(file)).map((e) => e.messageId).sort()).toEqual([...filled.ids.invalid, ...filled.ids.refused].sort());
    // The group is gone now: nothing more to do, and the operator is told.
    const again = await cli(['errors', 'retry', file, '--group', timeouts.signature]);
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('sent back 0, already gone 0\n');
    expect(again.stderr).toContain(`no message in error queue 'error' has signature ${timeouts.signature}`);
  });

  it('sends everything back with --all, to another queue with --to', async () => {
    const { file, filled } = await filledFile({ timeout: 3, invalid: 2, refused: 1, binary: 1, ok: 1 });
    await consumeOnce(file, 'orders.replay');
    const run = await cli(['errors', 'retry', file, '--all', '--to', 'orders.replay']);
    expect(run).toEqual({ code: 0, stdout: 'sent back 7 (orders.replay: 7), already gone 0\n', stderr: '' });
    const got = await arrivals(file, 'orders.replay', 7);
    expect(got.map((g) => g.id).sort()).toEqual([...filled.ids.timeout, ...filled.ids.invalid, ...filled.ids.refused, ...filled.ids.binary].sort());
    expect(await entries(file)).toEqual([]);
    expect(await arrivals(file, 'orders', 0)).toEqual([]);
  });

  it('leaves entries whose queue does not exist, sends the rest, and exits 1 naming the refusal', async () => {
    const { file, filled } = await filledFile({ timeout: 2, invalid: 0, refused: 0, binary: 0, ok: 0 });
    const forged = await deadLetterForged(file, 'payments.ledger');
    const run = await cli(['errors', 'retry', file, '--all', '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ sentBack: 2, refused: 1, queues: { orders: 2 } });
    expect(run.stderr).toContain("1 entry was refused and stay in the error queue; the first: refused to send message forged-1 back to 'payments.ledger'");
    expect(run.stderr).toContain('does not create queues');
    expect((await entries(file)).map((e) => e.messageId)).toEqual([forged]);
    expect((await arrivals(file, 'orders', 2)).map((a) => a.id).sort()).toEqual([...filled.ids.timeout].sort());
    const stats = JSON.parse((await cli(['stats', file, '--json'])).stdout);
    expect(stats.queues.map((q: { queue: string }) => q.queue)).not.toContain('payments.ledger');
  });

  it('refuses an entry redeliver did not write (no failure headers), by key and in bulk, and lists it without an error name', async () => {
    const { file, filled } = await filledFile({ timeout: 1, invalid: 0, refused: 0, binary: 0, ok: 0 });
    const foreign = await deadLetterForeign(file);
    const key = await keyOf(file, foreign);
    const list = JSON.parse((await cli(['errors', 'list', file, '--json'])).stdout);
    expect(list.groups.find((g: { keys: string[] }) => g.keys.includes(key))).toMatchObject({ errorName: '', reason: 'unknown' });
    const one = await cli(['errors', 'retry', file, key, '--json']);
    expect(one.code).toBe(1);
    expect(JSON.parse(one.stdout)).toMatchObject({ sentBack: 0, refused: 1, failed: 0 });
    expect(one.stderr).toContain('refused to send message foreign-1 back: it does not say which queue it failed on');
    expect(one.stderr).not.toContain('run the same command again');
    const all = await cli(['errors', 'retry', file, '--all', '--json']);
    expect(all.code).toBe(1);
    expect(JSON.parse(all.stdout)).toMatchObject({ sentBack: 1, refused: 1, failed: 0 });
    expect(all.stderr).toContain('1 entry was refused and stay in the error queue; the first: refused to send message foreign-1 back');
    expect(all.stderr).not.toContain('run the same command again');
    expect((await entries(file)).map((e) => e.messageId)).toEqual([foreign]);
    expect((await arrivals(file, 'orders', 1)).map((a) => a.id)).toEqual(filled.ids.timeout);
  });

  it('sends only to the --allow-queue queues', async () => {
    const { file, filled } = await filledFile({ timeout: 2, invalid: 0, refused: 0, binary: 0, ok: 0 });
    await consumeOnce(file, 'audit');
    const forged = await deadLetterForged(file, 'audit');
    const run = await cli(['errors', 'retry', file, '--all', '--allow-queue', 'orders']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('sent back 2 (orders: 2), already gone 0, refused 1\n');
    expect(run.stderr).toContain("'audit' is not one of the queues allowed as a destination");
    expect((await entries(file)).map((e) => e.messageId)).toEqual([forged]);
    const to = await cli(['errors', 'retry', file, '--all', '--to', 'audit', '--allow-queue', 'orders']);
    expect(to).toMatchObject({ code: 2, stderr: 'redeliver: --to audit is not one of the --allow-queue queues\n' });
    expect(await cli(['errors', 'retry', file, '--all', '--allow-queue', 'orders', '--allow-queue', 'audit'])).toMatchObject({
      code: 0,
      stdout: 'sent back 1 (audit: 1), already gone 0\n',
    });
    expect(filled.ids.timeout).toHaveLength(2);
  });

  it('refuses to send to an error queue', async () => {
    const { file } = await filledFile({ timeout: 1, invalid: 0, refused: 0, binary: 0, ok: 0 });
    const same = await cli(['errors', 'retry', file, '--all', '--to', 'error']);
    expect(same.code).toBe(2);
    expect(same.stderr).toContain('--to error is the error queue itself');
    // Another error queue on the same file.
    const transport = sqlite(file);
    try {
      await fillErrorQueue(transport, { invalid: 1 }, 'payments', 'payments.error');
    } finally {
      await transport.close();
    }
    const other = await cli(['errors', 'retry', file, '--all', '--to', 'payments.error']);
    expect(other.code).toBe(2);
    expect(other.stderr).toBe('redeliver: --to payments.error is an error queue; name a work queue\n');
    expect(await entries(file)).toHaveLength(1);
    expect(await entries(file, 'payments.error')).toHaveLength(1);
  });

  it('an interrupted replay run again sends each message exactly once', async () => {
    const { file, filled } = await filledFile({ timeout: 6, invalid: 4, refused: 2, binary: 0, ok: 0 });
    const failAfter = 5;
    let sent = 0;
    // The broker "goes away" after five messages: sendBack throws.
    const flaky = async (target: string): Promise<Transport> => {
      const real = sqlite(target);
      return wrap(real, {
        onClose: () => real.close(),
        errorQueue: {
          sendBack: async (q, k, o) => {
            if (sent >= failAfter) throw new Error('connection lost');
            sent++;
            return real.errorQueue.sendBack(q, k, o);
          },
        },
      });
    };
    const first = await cli(['errors', 'retry', file, '--all'], { openTransport: flaky });
    expect(first.code).toBe(1);
    expect(first.stdout).toBe('sent back 5 (orders: 5), already gone 0, failed 7\n');
    expect(first.stderr).toMatch(/^redeliver: could not send back 7 entries, the first \d+: connection lost; run the same command again to retry them\n$/);
    expect(await entries(file)).toHaveLength(7);

    // Ctrl-C half-way through the second run: it stops between two messages.
    const stop = new AbortController();
    let second = 0;
    const interrupting = async (target: string): Promise<Transport> => {
      const real = sqlite(target);
      return wrap(real, {
        onClose: () => real.close(),
        errorQueue: {
          sendBack: async (q, k, o) => {
            if (++second === 3) stop.abort();
            return real.errorQueue.sendBack(q, k, o);
          },
        },
      });
    };
    const interrupted = await cli(['errors', 'retry', file, '--all', '--json'], { openTransport: interrupting, signal: stop.signal });
    expect(interrupted.code).toBe(130);
    expect(JSON.parse(interrupted.stdout)).toEqual({ sentBack: 3, alreadyGone: 0, refused: 0, failed: 0, unseen: 0, read: 3, selected: 3, queues: { orders: 3 }, interrupted: true });
    expect(interrupted.stderr).toBe('redeliver: interrupted after reading 3 entries; run the same command again to continue\n');

    const third = await cli(['errors', 'retry', file, '--all']);
    expect(third).toEqual({ code: 0, stdout: 'sent back 4 (orders: 4), already gone 0\n', stderr: '' });
    const got = await arrivals(file, 'orders', 12);
    const ids = got.map((g) => g.id).sort();
    expect(ids).toEqual([...filled.ids.timeout, ...filled.ids.invalid, ...filled.ids.refused].sort());
    expect(new Set(ids).size).toBe(12);
    expect(got.every((g) => g.replayCount === '1')).toBe(true);
    expect(await entries(file)).toEqual([]);
  });

  it('counts entries another operator took between reading and sending back as already gone', async () => {
    const { file } = await filledFile({ timeout: 3, invalid: 0, refused: 0, binary: 0, ok: 0 });
    let calls = 0;
    const racing = async (target: string): Promise<Transport> => {
      const real = sqlite(target);
      return wrap(real, {
        onClose: () => real.close(),
        errorQueue: {
          sendBack: async (q, k, o) => {
            // Someone else deletes the second entry just before we reach it.
            if (++calls === 2) await real.errorQueue.delete(q, k);
            return real.errorQueue.sendBack(q, k, o);
          },
        },
      });
    };
    const run = await cli(['errors', 'retry', file, '--all'], { openTransport: racing });
    expect(run).toEqual({ code: 0, stdout: 'sent back 2 (orders: 2), already gone 1\n', stderr: '' });
  });
});

describe('errors delete', () => {
  it('deletes one entry, a group with --yes, and everything with --yes', async () => {
    const { file, filled } = await filledFile({ timeout: 3, invalid: 2, refused: 2, binary: 0, ok: 0 });
    const key = await keyOf(file, filled.ids.refused[0]!);
    expect(await cli(['errors', 'delete', file, key])).toEqual({ code: 0, stdout: 'deleted 1, already gone 0\n', stderr: '' });
    expect(await cli(['errors', 'delete', file, key])).toEqual({ code: 0, stdout: 'deleted 0, already gone 1\n', stderr: '' });

    const groups = JSON.parse((await cli(['errors', 'list', file, '--json'])).stdout).groups;
    const timeouts = groups.find((g: any) => g.errorName === 'TimeoutError').signature;
    const refused = await cli(['errors', 'delete', file, '--group', timeouts]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toBe(`redeliver: this deletes every message of group ${timeouts} for good: add --yes to confirm\n`);
    expect(await entries(file)).toHaveLength(6);

    const group = await cli(['errors', 'delete', file, '--group', timeouts, '--yes', '--json']);
    expect(JSON.parse(group.stdout)).toEqual({ deleted: 3, alreadyGone: 0, failed: 0, unseen: 0, read: 6, selected: 3, interrupted: false });
    expect((await entries(file)).map((e) => e.messageId).sort()).toEqual([...filled.ids.invalid, filled.ids.refused[1]].sort());

    const noYes = await cli(['errors', 'delete', file, '--all']);
    expect(noYes).toEqual({ code: 2, stdout: '', stderr: "redeliver: this deletes every message in 'error' for good: add --yes to confirm\n" });
    expect(await entries(file)).toHaveLength(3);
    expect(await cli(['errors', 'delete', file, '--all', '--yes'])).toEqual({ code: 0, stdout: 'deleted 3\n', stderr: '' });
    expect(await entries(file)).toEqual([]);
    // Nothing was sent anywhere.
    expect(await arrivals(file, 'orders', 0)).toEqual([]);
  });
});

describe('bad input', () => {
  let file = '';
  beforeAll(async () => {
    ({ file } = await filledFile({ timeout: 1, invalid: 0, refused: 0, binary: 0, ok: 0 }));
  });

  it.each([
    [['errors', 'list', '__FILE__', '--bogus'], /error: unknown option '--bogus'/],
    [['errors', 'frobnicate', '__FILE__'], /error: unknown command 'frobnicate'/],
    [['errors', 'list'], /no target: .* or set REDELIVER_URL/],
    [['errors', 'list', '/no/such/file.db'], /redeliver: no SQLite file at \/no\/such\/file\.db/],
    [['errors', 'show', '__FILE__', '12ab'], /'12ab' is not an error-queue key/],
    [['errors', 'retry', '__FILE__'], /name what to work on: one <key>, or --group <signature>, or --all/],
    [['errors', 'retry', '__FILE__', '1', '--all'], /name what to work on/],
    [['errors', 'retry', '__FILE__', '--group', 'not-a-sig'], /'not-a-sig' is not a failure signature: signatures are 8 hex digits/],
    [['errors', 'retry', '__FILE__', '1', '--to', ''], /error: option '--to <queue>' argument '' is invalid. expected a queue name/],
    [['errors', 'delete', '__FILE__', '--all'], /add --yes to confirm/],
    [['errors', 'show', '__FILE__', '1', '--body-bytes', '-1'], /expected a whole number of bytes/],
    [['stats', '__FILE__', '--depth'], /error: unknown option '--depth'/],
  ])('%j exits with code 2', async (args, message) => {
    const run = await cli(args.map((a) => (a === '__FILE__' ? file : a)));
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(message);
    expect(run.stdout).toBe('');
  });

  it('says so, with exit code 2, when the transport has no error-queue operations or no inspection', async () => {
    const { MemoryTransport } = await import('../../src/transports/memory/index.js');
    const bare = wrap(new MemoryTransport(), { errorQueue: null, inspection: null });
    const noOps = await cli(['errors', 'list', 'anything'], { openTransport: async () => bare });
    expect(noOps).toEqual({ code: 2, stdout: '', stderr: 'redeliver: the memory transport cannot read error queues yet (no error-queue operations)\n' });
    const noStats = await cli(['stats', 'anything'], { openTransport: async () => bare });
    expect(noStats).toEqual({ code: 2, stdout: '', stderr: 'redeliver: the memory transport cannot read queue depths yet (no queue inspection)\n' });
  });

  it('closes the transport after every command, also when it fails', async () => {
    const { MemoryTransport } = await import('../../src/transports/memory/index.js');
    let closed = 0;
    const open = async () => wrap(new MemoryTransport(), { onClose: async () => void closed++ });
    await cli(['errors', 'list', 'x'], { openTransport: open });
    await cli(['errors', 'show', 'x', 'abc'], { openTransport: open });
    await cli(['errors', 'retry', 'x', '--all'], { openTransport: open });
    await cli(['stats', 'x'], { openTransport: open });
    expect(closed).toBe(4);
  });
});
