/**
 * The real `redeliver` process: exit codes as a shell sees them. Everything
 * else is tested in-process (errors.test.ts), which is much faster.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { cli, fillErrorQueue, sqlite, tempFolder } from './support.js';

const folder = tempFolder();
afterAll(() => folder.cleanup());

function redeliver(args: readonly string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], { encoding: 'utf8', timeout: 30_000 }, (error, stdout, stderr) => {
      resolve({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}

describe('the redeliver process', () => {
  it('exits 0 on success, 2 on bad input, and closes the transport so it exits at all', async () => {
    const file = folder.path('main.db');
    const transport = sqlite(file);
    await fillErrorQueue(transport, { timeout: 2, invalid: 1 });
    await transport.close();

    const [list, missing, unknown, help] = await Promise.all([
      redeliver(['errors', 'list', file]),
      redeliver(['errors', 'list', folder.path('missing.db')]),
      redeliver(['errors', 'list', file, '--colour']),
      redeliver(['--help']),
    ]);

    expect(list.stderr).toBe('');
    expect(list.status).toBe(0);
    expect(list.stdout).toMatch(/^error queue 'error': 3 messages in 2 failure groups\n/);
    expect(list.stdout).toMatch(/\n[0-9a-f]{8}\s+2\s+retries-exhausted\s+TimeoutError\s+charge <n> for order <id> timed out after <n> ms/);

    expect(missing.status).toBe(2);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toBe(`redeliver: no SQLite file at ${folder.path('missing.db')} (give the SQLite file an endpoint uses, an amqp:// URL, a redis:// URL, a nats:// URL, an nsq:// target or a rocketmq:// proxy address)\n`);

    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toBe("error: unknown option '--colour'\n(add --help for usage)\n");

    expect(help.status).toBe(0);
    for (const command of ['demo', 'dashboard', 'errors', 'simulate', 'stats']) expect(help.stdout).toMatch(new RegExp(`\\n  ${command} `));
  });

  it('prints the package version for --version and -V, and exits 0', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) expect(await cli([flag])).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
  });
});
