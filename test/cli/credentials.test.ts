/**
 * The broker URL carries a password: the CLI never prints it, and takes the
 * URL from REDELIVER_URL so it need not appear in the process list.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { redactCredentials } from '../../src/util/redact.js';
import type { Transport } from '../../src/transport/types.js';
import { MemoryTransport } from '../../src/transports/memory/index.js';
import { cli, sqlite, tempFolder } from './support.js';

const folder = tempFolder();
afterAll(() => folder.cleanup());

const SECRET_URL = 'amqp://ops:s3cr%40t-pw@rabbit.internal:5672/prod';

describe('redactCredentials', () => {
  it.each([
    [SECRET_URL, 'amqp://ops:***@rabbit.internal:5672/prod'],
    ['amqps://ops:p@ss:word@rabbit:5671', 'amqps://ops:***@rabbit:5671'],
    ['amqp://just-a-token@rabbit/', 'amqp://***@rabbit/'],
    [`failed to reach ${SECRET_URL}: ECONNREFUSED (${SECRET_URL})`, 'failed to reach amqp://ops:***@rabbit.internal:5672/prod: ECONNREFUSED (amqp://ops:***@rabbit.internal:5672/prod)'],
    ['amqp://rabbit:5672/ and orders.db and http://host/path?a=b@c', 'amqp://rabbit:5672/ and orders.db and http://host/path?a=b@c'],
  ])('%s', (text, expected) => {
    expect(redactCredentials(text)).toBe(expected);
  });
});

describe('the CLI and a URL with a password', () => {
  /** A transport that knows no queues, opened for any target. */
  const empty = async (): Promise<Transport> => new MemoryTransport();

  it('prints the target without its password', async () => {
    const run = await cli(['stats', SECRET_URL], { openTransport: empty });
    expect(run).toEqual({ code: 0, stdout: 'no queues in amqp://ops:***@rabbit.internal:5672/prod\n', stderr: '' });
  });

  it('redacts the password from an error that repeats the URL', async () => {
    const failing = async (target: string): Promise<Transport> => {
      throw new Error(`cannot connect to ${target}`);
    };
    const run = await cli(['errors', 'list', SECRET_URL], { openTransport: failing });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe('redeliver: cannot connect to amqp://ops:***@rabbit.internal:5672/prod\n');
    expect(run.stdout).toBe('');
  });

  it('takes the target from REDELIVER_URL when it is omitted or given as -', async () => {
    const file = folder.path('env.db');
    const transport = sqlite(file);
    await transport.send('orders', { id: 'a', body: new Uint8Array(), headers: {} });
    await transport.close();
    const opened: string[] = [];
    const spy = async (target: string): Promise<Transport> => {
      opened.push(target);
      return sqlite(target);
    };
    expect(await cli(['stats'], { env: { REDELIVER_URL: file }, openTransport: spy })).toMatchObject({ code: 0, stderr: '' });
    expect(await cli(['stats', '-', '--json'], { env: { REDELIVER_URL: file }, openTransport: spy })).toMatchObject({ code: 0, stderr: '' });
    expect(await cli(['errors', 'list', '-'], { env: { REDELIVER_URL: file }, openTransport: spy })).toMatchObject({ code: 0, stdout: "error queue 'error' is empty\n" });
    expect(opened).toEqual([file, file, file]);
  });

  it('says how to give a target when there is none', async () => {
    for (const args of [['stats'], ['errors', 'list', '-'], ['errors', 'show', '-', '1']]) {
      const run = await cli(args, { env: { REDELIVER_URL: '' } });
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr).toContain('no target: give the SQLite file an endpoint uses, an amqp:// URL, a redis:// URL or a nats:// URL, or set REDELIVER_URL');
    }
  });
});
