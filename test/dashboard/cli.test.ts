import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Command } from 'commander';
import { afterAll, describe, expect, it } from 'vitest';
import { registerDashboard, serveDashboard, type DashboardCommandOptions } from '../../src/cli/commands/dashboard.js';
import { UsageError } from '../../src/cli/open-transport.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import type { Transport } from '../../src/transport/types.js';
import { tokenFilePath } from '../../src/dashboard/token-file.js';
import { bearer, csrfOf, deadLetterAll, operatorRequest, postHeaders, request, sqliteWithErrorQueue } from './support.js';

const sqlite = await sqliteWithErrorQueue();
/** Where the dashboards started here write their runtime and token files. */
const stateDir = mkdtempSync(join(tmpdir(), 'redeliver-state-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

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

  it('names a missing SQLite file', async () => {
    await expect(program().parseAsync(['node', 'redeliver', 'dashboard', '/no/such/file.db'])).rejects.toThrow(UsageError);
    await expect(program().parseAsync(['node', 'redeliver', 'dashboard', '/no/such/file.db'])).rejects.toThrow(/no SQLite file/);
  });

  it('documents its options in --help', () => {
    const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'dashboard', '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(0);
    for (const option of ['--port', '--host', '--token', '--error-queue', '--public-url', '--allow-queue', '--no-chart-feed', 'REDELIVER_STATE_DIR', '[target]', 'REDELIVER_URL']) expect(run.stdout).toContain(option);
  });

  /** The token file of the dashboard listening at `url`. */
  const tokenFile = (url: string) => tokenFilePath({ REDELIVER_STATE_DIR: stateDir }, Number(new URL(url).port));

  /**
   * Runs `serveDashboard` until it is listening; `token` is the one given, else
   * the one read from its token file, as the operator does. `stop()` ends it
   * and resolves what it settled with.
   */
  async function serve(
    target: string | undefined,
    opts: Partial<DashboardCommandOptions>,
    io: { env?: NodeJS.ProcessEnv; openTransport?: () => Promise<Transport> } = {},
  ): Promise<{ url: string; token: string; out: string; stop: () => Promise<unknown> }> {
    const abort = new AbortController();
    const out = sink();
    let url = '';
    const served = serveDashboard(
      target,
      { port: 0, host: '127.0.0.1', errorQueue: [], ...opts },
      { out, signal: abort.signal, env: { REDELIVER_STATE_DIR: stateDir, ...io.env }, onReady: (u) => (url = u), ...(io.openTransport ? { openTransport: io.openTransport } : {}) },
    ).catch((e: unknown) => e);
    while (!url) {
      const early = await Promise.race([served, new Promise((r) => setTimeout(() => r(undefined), 20))]);
      if (early) throw early;
    }
    return {
      url,
      token: opts.token ?? io.env?.['REDELIVER_DASHBOARD_TOKEN'] ?? readFileSync(tokenFile(url), 'utf8').trim(),
      out: out.text,
      stop: () => {
        abort.abort();
        return served;
      },
    };
  }

  it.skipIf(!sqlite)('serves a SQLite file until stopped', async () => {
    const transport = await sqlite!.create('cli');
    await deadLetterAll(transport, [{ n: 1, fail: { name: 'Boom', message: 'boom 1' } }]);
    await transport.close();
    const { url, token, out, stop } = await serve(sqlite!.path('cli'), {});
    const groups = (await operatorRequest(() => token)(`${url}api/groups`)).json();
    expect(groups.groups[0]).toMatchObject({ count: 1, signature: { errorName: 'Boom' } });
    expect(out).toContain(url);
    expect(await stop()).toBeUndefined();
  });

  it.skipIf(!sqlite)('reads the target from REDELIVER_URL, prints the public URL, and passes the allowed queues on', async () => {
    const transport = await sqlite!.create('cli-env');
    await deadLetterAll(transport, [{ n: 1, fail: { name: 'Boom', message: 'boom 1' } }]);
    await transport.close();
    const { url, token, out, stop } = await serve(
      '-',
      { publicUrl: 'https://ops.example.com/redeliver', allowQueue: ['elsewhere'] },
      { env: { REDELIVER_URL: sqlite!.path('cli-env') } },
    );
    expect(out).toContain(`redeliver dashboard for ${sqlite!.path('cli-env')} at https://ops.example.com/redeliver/ (listening on ${url})`);
    const operator = operatorRequest(() => token);
    const csrf = await csrfOf(url, bearer(token));
    const key = (await operator(`${url}api/entries?errorQueue=error`)).json().entries[0].key;
    const retry = await operator(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue: 'error', key }) });
    expect(retry.status).toBe(409);
    expect(retry.json().error).toContain("'orders' is not one of the queues allowed");
    expect(await stop()).toBeUndefined();
  });

  it('never prints the password of an amqp:// target', async () => {
    const { url, out, stop } = await serve(undefined, {}, { env: { REDELIVER_URL: 'amqp://ops:s3cret@127.0.0.1:1/' }, openTransport: async () => new MemoryTransport() });
    expect(out).toContain(`redeliver dashboard for amqp://ops:***@127.0.0.1:1/ at ${url}`);
    expect(out).not.toContain('s3cret');
    expect(await stop()).toBeUndefined();
  });

  it('makes up a token, writes it to a file only its user can read, and prints where it is, never the token', async () => {
    const { url, token, out, stop } = await serve('memory', {}, { openTransport: async () => new MemoryTransport() });
    const file = tokenFile(url);
    expect(token).toMatch(/^[A-Za-z0-9_-]{32,}$/);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(out).not.toContain(token);
    expect(out).toContain(`sign in: open ${url}?token=<token> once, with the token in ${file} (readable by you only)`);
    // Without the token (another user of the machine, who cannot read the file) nothing is served.
    expect((await request(url)).status).toBe(403);
    expect((await request(`${url}api/groups`)).status).toBe(403);
    expect((await request(`${url}api/groups`, { headers: bearer(token) })).status).toBe(200);
    expect(await stop()).toBeUndefined();
    expect(existsSync(file)).toBe(false);
  });

  it('with a token given (--token or REDELIVER_DASHBOARD_TOKEN) writes no token file and prints no token', async () => {
    const given = 'a-token-of-the-operator-0123456789';
    for (const [opts, env] of [[{ token: given }, {}], [{}, { REDELIVER_DASHBOARD_TOKEN: given }]] as const) {
      const { url, out, stop } = await serve('memory', opts, { env, openTransport: async () => new MemoryTransport() });
      expect(out).not.toContain(given);
      expect(out).toContain('with the token you gave (--token or REDELIVER_DASHBOARD_TOKEN)');
      expect(existsSync(tokenFile(url))).toBe(false);
      expect((await request(`${url}api/groups`, { headers: bearer(given) })).status).toBe(200);
      expect(await stop()).toBeUndefined();
    }
  });
});
