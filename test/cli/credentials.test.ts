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

  // Every credential form each client accepts: ioredis takes any query parameter as an option.
  it.each([
    ['amqp', 'amqp://ops:pw-secret@rabbit:5672/prod?heartbeat=10', 'amqp://ops:***@rabbit:5672/prod?heartbeat=10'],
    ['amqp', 'amqps://rabbit:5671/?user=ops&password=pw-secret', 'amqps://rabbit:5671/?user=***&password=***'],
    ['redis', 'redis://cache:6379/0?password=pw-secret', 'redis://cache:6379/0?password=***'],
    ['redis', 'redis://cache/0?db=2&username=ops&password=pw-secret&family=6', 'redis://cache/0?db=2&username=***&password=***&family=6'],
    ['redis', 'redis://ops:pw-secret@cache:6379/0', 'redis://ops:***@cache:6379/0'],
    ['redis', 'redis://:pw-secret@cache:6379', 'redis://:***@cache:6379'],
    ['rediss', 'rediss://cache:6380/1?password=pw-secret#x', 'rediss://cache:6380/1?password=***#x'],
    ['rediss', 'rediss://default:pw-secret@cache:6380?pass=pw-secret', 'rediss://default:***@cache:6380?pass=***'],
    ['nats', 'nats://pw-secret@nats:4222', 'nats://***@nats:4222'],
    ['nats', 'nats://ops:pw-secret@nats:4222', 'nats://ops:***@nats:4222'],
    ['nats', 'nats://nats:4222?token=pw-secret', 'nats://nats:4222?token=***'],
    ['nsq', 'nsq://ops:pw-secret@nsqd:4150?auth_secret=pw-secret', 'nsq://ops:***@nsqd:4150?auth_secret=***'],
    ['rocketmq', 'rocketmq://ak:pw-secret@ns:9876?accessKey=ak&secretKey=pw-secret', 'rocketmq://ak:***@ns:9876?accessKey=ak&secretKey=***'],
    ['redis in JSON', '{"url":"redis://cache/0?password=pw-secret","n":1}', '{"url":"redis://cache/0?password=***","n":1}'],
  ])('%s: %s', (_client, text, expected) => {
    expect(redactCredentials(text)).toBe(expected);
    expect(redactCredentials(text)).not.toContain('pw-secret');
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

  it.each([
    'amqp://ops:pw-secret@rabbit:5672/',
    'redis://cache:6379/0?password=pw-secret',
    'rediss://cache:6380/0?username=ops&password=pw-secret',
    'nats://nats:4222?token=pw-secret',
    'nats://pw-secret@nats:4222',
  ])('prints no credential of %s, neither in the target nor in an error', async (url) => {
    const failing = async (target: string): Promise<Transport> => {
      throw new Error(`cannot connect to ${target}`);
    };
    const run = await cli(['errors', 'list', url], { openTransport: failing });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^redeliver: cannot connect to .*\*\*\*/);
    expect(run.stderr + run.stdout).not.toContain('pw-secret');
    const stats = await cli(['stats', url], { openTransport: empty });
    expect(stats.stdout).toMatch(/^no queues in .*\*\*\*/);
    expect(stats.stdout).not.toContain('pw-secret');
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
      expect(run.stderr).toContain('no target: give the SQLite file an endpoint uses, an amqp:// URL, a redis:// URL, a nats:// URL, an nsq:// target or a rocketmq:// proxy address, or set REDELIVER_URL');
    }
  });
});
