import { spawnSync } from 'node:child_process';
import { Writable } from 'node:stream';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { registerDashboard, serveDashboard } from '../../src/cli/commands/dashboard.js';
import { UsageError } from '../../src/cli/open-transport.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { deadLetterAll, request, sqliteWithErrorQueue } from './support.js';

const sqlite = await sqliteWithErrorQueue();

function program(): Command {
  const p = new Command().exitOverride();
  registerDashboard(p);
  return p;
}

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

describe('redeliver dashboard', () => {
  afterAll(() => sqlite?.cleanup());

  it('refuses a non-loopback address without a token, before opening the store', async () => {
    await expect(program().parseAsync(['node', 'redeliver', 'dashboard', '/no/such/file.db', '--host', '0.0.0.0'])).rejects.toThrow(UsageError);
    await expect(program().parseAsync(['node', 'redeliver', 'dashboard', '/no/such/file.db', '--host', '0.0.0.0'])).rejects.toThrow(/without a token/);
  });

  it('names a missing SQLite file', async () => {
    await expect(program().parseAsync(['node', 'redeliver', 'dashboard', '/no/such/file.db'])).rejects.toThrow(/no SQLite file/);
  });

  it('documents its options in --help', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'dashboard', '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(0);
    for (const option of ['--port', '--host', '--token', '--error-queue', '--public-url', '--allow-queue', '[target]', 'REDELIVER_URL']) expect(run.stdout).toContain(option);
  });

  it.skipIf(!sqlite)('serves a SQLite file until stopped', async () => {
    const transport = await sqlite!.create('cli');
    await deadLetterAll(transport, [{ n: 1, fail: { name: 'Boom', message: 'boom 1' } }]);
    await transport.close();
    const stop = new AbortController();
    const out = sink();
    let url = '';
    const served = serveDashboard(
      sqlite!.path('cli'),
      { port: 0, host: '127.0.0.1', errorQueue: [] },
      { out, signal: stop.signal, env: {}, onReady: (u) => (url = u) },
    ).catch((e: unknown) => e);
    while (!url) {
      const early = await Promise.race([served, new Promise((r) => setTimeout(() => r(undefined), 20))]);
      if (early) throw early;
    }
    const groups = (await request(`${url}api/groups`)).json();
    expect(groups.groups[0]).toMatchObject({ count: 1, signature: { errorName: 'Boom' } });
    expect(out.text).toContain(url);
    stop.abort();
    expect(await served).toBeUndefined();
  });

  it.skipIf(!sqlite)('reads the target from REDELIVER_URL, prints the public URL, and passes the allowed queues on', async () => {
    const transport = await sqlite!.create('cli-env');
    await deadLetterAll(transport, [{ n: 1, fail: { name: 'Boom', message: 'boom 1' } }]);
    await transport.close();
    const stop = new AbortController();
    const out = sink();
    let url = '';
    const served = serveDashboard(
      '-',
      { port: 0, host: '127.0.0.1', errorQueue: [], publicUrl: 'https://ops.example.com/redeliver', allowQueue: ['elsewhere'] },
      { out, signal: stop.signal, env: { REDELIVER_URL: sqlite!.path('cli-env') }, onReady: (u) => (url = u) },
    ).catch((e: unknown) => e);
    while (!url) {
      const early = await Promise.race([served, new Promise((r) => setTimeout(() => r(undefined), 20))]);
      if (early) throw early;
    }
    expect(out.text).toContain(`redeliver dashboard for ${sqlite!.path('cli-env')} at https://ops.example.com/redeliver/ (listening on ${url})`);
    const page = await request(url);
    const csrf = /<meta name="redeliver-csrf" content="([^"]+)">/.exec(page.text)![1]!;
    const key = (await request(`${url}api/entries?errorQueue=error`)).json().entries[0].key;
    const retry = await request(`${url}api/retry`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Origin: new URL(url).origin, 'X-Redeliver-CSRF': csrf },
      body: JSON.stringify({ errorQueue: 'error', key }),
    });
    expect(retry.status).toBe(409);
    expect(retry.json().error).toContain("'orders' is not one of the queues allowed");
    stop.abort();
    expect(await served).toBeUndefined();
  });

  it('never prints the password of an amqp:// target', async () => {
    const stop = new AbortController();
    const out = sink();
    let url = '';
    const served = serveDashboard(
      undefined,
      { port: 0, host: '127.0.0.1', errorQueue: [] },
      {
        out,
        signal: stop.signal,
        env: { REDELIVER_URL: 'amqp://ops:s3cret@127.0.0.1:1/' },
        onReady: (u) => (url = u),
        openTransport: async () => new MemoryTransport(),
      },
    ).catch((e: unknown) => e);
    while (!url) {
      const early = await Promise.race([served, new Promise((r) => setTimeout(() => r(undefined), 20))]);
      if (early) throw early;
    }
    expect(out.text).toContain(`redeliver dashboard for amqp://ops:***@127.0.0.1:1/ at ${url}`);
    expect(out.text).not.toContain('s3cret');
    stop.abort();
    expect(await served).toBeUndefined();
  });
});
