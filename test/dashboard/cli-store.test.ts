/**
 * `redeliver dashboard <target> --store <file> [--ingest] [--outcome-queue q]`
 * on a real SQLite transport: the dashboard serves from the store, ingests
 * the error queue while running, and stops ingesting when it stops.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { serveDashboard, type DashboardCommandOptions } from '../../src/cli/commands/dashboard.js';
import { UsageError } from '../../src/cli/open-transport.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { SqliteTransport } from '../../src/transports/sqlite/index.js';
import { deadLetter, failureHeaders, scratchDir } from '../error-store/support.js';
import { operatorRequest, tokenFromFile, waitFor } from './support.js';

const dir = scratchDir();
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function sink(): Writable & { text: string } {
  const out = new Writable({
    write(chunk, _enc, done) {
      out.text += String(chunk);
      done();
    },
  }) as Writable & { text: string };
  out.text = '';
  return out;
}

const base: DashboardCommandOptions = { port: 0, host: '127.0.0.1', errorQueue: [] };

describe('redeliver dashboard --store', () => {
  it('refuses --ingest without --store, and --outcome-queue without --ingest, before opening anything', async () => {
    const io = { out: sink(), signal: new AbortController().signal, env: {} };
    await expect(serveDashboard('/no/such/file.db', { ...base, ingest: true }, io)).rejects.toThrow(UsageError);
    await expect(serveDashboard('/no/such/file.db', { ...base, store: 'x.db', outcomeQueue: 'outcomes' }, io)).rejects.toThrow(/needs --ingest/);
  });

  it('serves from the store and ingests the error queue until stopped', async () => {
    const target = join(dir, 'broker.db');
    const storePath = join(dir, 'errors.db');
    const transport = new SqliteTransport({ path: target, pollIntervalMs: 20 });
    await deadLetter(transport, 'orders', 'error', [1, 2].map((i) => ({ id: `m-${i}`, headers: failureHeaders({ message: `boom ${i}` }) })));
    const abort = new AbortController();
    const out = sink();
    let url = '';
    const served = serveDashboard(target, { ...base, store: storePath, ingest: true }, { out, err: sink(), signal: abort.signal, env: { REDELIVER_STATE_DIR: dir }, onReady: (u) => (url = u) });
    try {
      await waitFor(() => url !== '', 10_000, 'the dashboard to listen');
      expect(out.text).toContain(`from store ${storePath} (ingesting)`);
      const token = tokenFromFile({ REDELIVER_STATE_DIR: dir }, url);
      const request = operatorRequest(() => token);
      await waitFor(async () => (await request(`${url}api/summary`)).json().failed === 2, 15_000, 'two entries ingested');
      const page = await request(`${url}?token=${encodeURIComponent(token)}`);
      expect(page.status).toBe(303);
      expect((await request(url)).text).toContain('id="f-text"');
      const entries = (await request(`${url}api/entries?text=boom%202`)).json();
      expect(entries.entries.map((e: { messageId: string }) => e.messageId)).toEqual(['m-2']);
    } finally {
      abort.abort();
      await served;
    }
    expect(await transport.errorQueue!.count('error')).toBe(0);
    const store = ErrorStore.open(storePath);
    expect(store.count()).toBe(2);
    store.close();
    await transport.close();
  });
});
