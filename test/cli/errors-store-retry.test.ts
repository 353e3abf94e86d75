import { writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listEdits } from '../../src/error-store/edit.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { HEADER } from '../../src/headers/names.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { failureHeaders, scratchDir } from '../error-store/support.js';
import { cli } from './support.js';

const closers: (() => unknown)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function setup() {
  const dir = scratchDir();
  const app = join(dir, 'app.db');
  const transport = new SqliteTransport({ path: app });
  await (await transport.consume('orders', () => undefined, { prefetch: 1 })).close();
  await transport.close();
  const storePath = join(dir, 'errors.db');
  const store = ErrorStore.open(storePath);
  closers.push(() => store.close());
  const entries = Array.from({ length: 150 }, (_, i) => ({
    errorQueue: 'error',
    messageId: `order-${i}`,
    headers: { ...failureHeaders({ message: i < 100 ? 'db timeout' : 'card declined', errorName: i < 100 ? 'TimeoutError' : 'CardError', queue: i < 140 ? 'orders' : 'gone' }), [HEADER.entryId]: `entry-${i}`, 'x-tenant': 'acme' },
    body: Buffer.from(`{"n":${i}}`),
  }));
  await store.ingest(entries);
  return { dir, app, storePath, store };
}

describe('redeliver errors retry --store / jobs / edit', () => {
  it('retries a filter from the store, prints every outcome count and the job id, and lists the job', async () => {
    const { app, storePath, store } = await setup();
    const run = await cli(['errors', 'retry', app, '--store', storePath, '--error-name', 'TimeoutError', '--rate', '12000/min', '--by', 'alice']);
    expect(run.stderr).toMatch(/retry job job-\S+: 100 entries/);
    expect(run.stdout).toMatch(/^retry job (job-\S+): done\n {2}sent 100, handled elsewhere 0, refused 0, failed 0, pending 0 of 100\n$/);
    expect(run.code).toBe(0);
    expect(store.count({ status: 'retried' })).toBe(100);
    expect(store.search({ status: 'retried' }, { limit: 1 }).entries[0]!.lastRetriedBy).toBe(`cli:${userInfo().username} as alice`);
    const jobs = await cli(['errors', 'jobs', app, '--store', storePath, '--json']);
    const [job] = JSON.parse(jobs.stdout) as { id: string; sent: number; ratePerSecond: number; state: string }[];
    expect(job).toMatchObject({ sent: 100, ratePerSecond: 200, state: 'done' });
    expect(run.stdout).toContain(job!.id);
  });

  it('exits non-zero when entries are refused, and names them', async () => {
    const { app, storePath, store } = await setup();
    const run = await cli(['errors', 'retry', app, '--store', storePath, '--all', '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ state: 'done', total: 150, sent: 140, refused: 10, pending: 0 });
    expect(run.stderr).toContain('10 entries were refused and 0 failed; they stay failed in the store');
    expect(store.count({ status: 'failed' })).toBe(10);
    expect(store.search({ status: 'retried' }, { limit: 1 }).entries[0]!.lastRetriedBy).toBe(`cli:${userInfo().username}`);
  });

  it('resumes an interrupted job with --resume, and refuses bad input clearly', async () => {
    const { app, storePath, store } = await setup();
    const controller = new AbortController();
    controller.abort();
    const first = await cli(['errors', 'retry', app, '--store', storePath, '--queue', 'orders'], { signal: controller.signal });
    expect(first.code).toBe(130);
    const id = /retry job (job-\S+): paused/.exec(first.stdout)![1]!;
    expect(store.count({ status: 'failed' })).toBe(150);
    const resumed = await cli(['errors', 'retry', app, '--store', storePath, '--resume', id]);
    expect(resumed.stdout).toContain('sent 140,');
    expect(resumed.code).toBe(0);
    expect((await cli(['errors', 'retry', app, '--store', storePath, '--all', '--rate', 'fast'])).stderr).toContain('rate must look like 200/s, 200 or 12000/min');
    expect((await cli(['errors', 'retry', app, '--store', storePath, '--resume', 'job-nope'])).stderr).toContain('no retry job job-nope');
    expect((await cli(['errors', 'retry', app, '--store', storePath])).code).toBe(2);
  });

  it('a canary takes --rate as its ceiling and its ramp from flags; bad canary flags exit 2 and create nothing', async () => {
    const { app, storePath, store } = await setup();
    const retry = (...flags: string[]) => cli(['errors', 'retry', app, '--store', storePath, '--queue', 'orders', ...flags]);
    const refused = [
      await retry('--canary-growth', '3'),
      await retry('--canary', '--canary-growth', '0.5'),
      await retry('--canary', '--rate', '1/s', '--canary-start-rate', '5/s'),
      await retry('--canary', '--canary-window', 'soon'),
      await retry('--canary', '--canary-max-failed-again', '-1'),
    ];
    expect(refused.map((r) => r.code)).toEqual([2, 2, 2, 2, 2]);
    expect(refused[0]!.stderr).toContain('--canary-growth needs --canary');
    expect(refused[1]!.stderr).toContain('--canary-growth');
    expect(refused[2]!.stderr).toContain('--canary-start-rate (5/s) is above the canary\'s ceiling --rate (1/s)');
    expect(JSON.parse((await cli(['errors', 'jobs', app, '--store', storePath, '--json'])).stdout)).toEqual([]);
    // No ingester records outcomes here: the canary sends one entry and stops when none arrives in time.
    const run = await retry('--canary', '--rate', '50/s', '--canary-start-rate', '2/s', '--canary-growth', '3', '--canary-window', '2s', '--canary-outcome-timeout', '300ms', '--canary-max-failed-again', '1', '--json');
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ state: 'stopped', sent: 1, canary: { sent: 1, handled: 0, failedAgain: 0 } });
    expect(run.stderr).toContain('no outcome record arrived');
    const [job] = JSON.parse((await cli(['errors', 'jobs', app, '--store', storePath, '--json'])).stdout) as { canary: { options: object } }[];
    expect(job!.canary.options).toEqual({ startRate: 2, maxRate: 50, growth: 3, windowMs: 2_000, outcomeTimeoutMs: 300, maxFailedAgain: 1, pollMs: 250 });
    expect(store.count({ status: 'failed' })).toBe(149);
  });

  it('edit sends an edited copy once: the same command again sends nothing', async () => {
    const { dir, app, storePath, store } = await setup();
    const bodyFile = join(dir, 'fixed.json');
    writeFileSync(bodyFile, '{"n":3,"fixed":true}');
    const args = ['errors', 'edit', app, 'entry-3', '--store', storePath, '--body-file', bodyFile, '--set-header', 'x-note=fixed', '--remove-header', 'x-tenant'];
    const first = await cli(args);
    // Who edited is the operating-system user, not a name given on the command line.
    const actor = `cli:${userInfo().username}`;
    expect(listEdits({ store }, 'entry-3')[0]!.by).toBe(actor);
    expect(first.stdout).toBe('sent the edited copy of entry-3 (message order-3) to orders; the original is marked replaced\n');
    expect(first.code).toBe(0);
    const again = await cli(args);
    expect(again.stdout).toBe('this edit of entry-3 was sent before (to orders); nothing sent\n');
    expect(store.get('entry-3')!.status).toBe('replaced');
    expect(listEdits({ store }, 'entry-3')[0]!.changedHeaders).toEqual({ 'x-note': [null, 'fixed'], 'x-tenant': ['acme', null] });
    const transport = new SqliteTransport({ path: app });
    closers.push(() => transport.close());
    expect(await transport.inspection.queueDepths(['orders'])).toMatchObject([{ ready: 1 }]);
    const other = await cli(['errors', 'edit', app, 'entry-3', '--store', storePath, '--set-header', 'x-note=other']);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain(`entry entry-3 is replaced (by ${actor}): only a failed entry can be edited and retried`);
    const shown = await cli(['errors', 'show', 'entry-3', '--store', storePath]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(` by ${actor}, sent to orders; body`);
    expect(shown.stdout).toMatch(/edited +at .* sent to orders; body \d+ -> \d+ bytes; headers changed: x-note, x-tenant/);
    const json = JSON.parse((await cli(['errors', 'show', 'entry-3', '--store', storePath, '--json'])).stdout);
    expect(json.store.edits).toEqual([expect.objectContaining({ by: actor, sentTo: 'orders', changedHeaders: { 'x-note': [null, 'fixed'], 'x-tenant': ['acme', null] } })]);
    });

  it('edit refuses to set or change a redeliver-* header, and sends the entry\'s own', async () => {
    const { app, storePath, store } = await setup();
    for (const header of ['redeliver-replay-count=999999', 'Redeliver-Replay-Count=999999', 'redeliver-failure-reason=forged']) {
      const run = await cli(['errors', 'edit', app, 'entry-4', '--store', storePath, '--set-header', header, '--set-header', 'x-note=n']);
      expect(run.code, header).toBe(1);
      expect(run.stderr).toContain("an edit cannot set redeliver's own headers");
    }
    expect(store.get('entry-4')!.status).toBe('failed');
    expect((await cli(['errors', 'edit', app, 'entry-4', '--store', storePath, '--remove-header', HEADER.failureReason, '--set-header', 'x-note=n'])).code).toBe(0);
    expect(listEdits({ store }, 'entry-4')[0]!.changedHeaders).toEqual({ 'x-note': [null, 'n'] });
  });

  it('edit escapes a stored queue name before printing it', async () => {
    const { dir, storePath, store } = await setup();
    const hostile = 'orders\u001b]0;owned\u0007';
    const app = join(dir, 'hostile.db');
    const transport = new SqliteTransport({ path: app });
    await (await transport.consume(hostile, () => undefined, { prefetch: 1 })).close();
    await transport.close();
    await store.ingest([{ errorQueue: 'error', messageId: 'evil\u001b[2J', headers: { ...failureHeaders({ message: 'x', errorName: 'E', queue: hostile }), [HEADER.entryId]: 'evil-1', 'x-tenant': 'acme' }, body: Buffer.from('{}') }]);
    const run = await cli(['errors', 'edit', app, 'evil-1', '--store', storePath, '--set-header', 'x-note=n']);
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('sent the edited copy of evil-1 (message evil\\x1b[2J) to orders\\x1b]0;owned\\x07; the original is marked replaced\n');
  });
});
