/**
 * The `errors` and `stats` commands against a real Redis, through a
 * redis:// URL as an operator would type it, the key prefix in
 * `REDELIVER_REDIS_PREFIX`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { Transport } from '../../src/transport/types.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { REDIS_URL, redisSkipReason } from '../support/brokers.js';
import { redisScratch } from '../support/redis-scratch.js';
import { cli, drain, fillErrorQueue, tempFolder, waitFor, wrap, type Filled } from './support.js';

const skip = await redisSkipReason();

const scratch = redisScratch('cli');
const env = { REDELIVER_REDIS_PREFIX: scratch.prefix };
const queue = 'orders';
const errorQueue = 'error';
const replayQueue = 'replay';
const open = () => new RedisTransport({ url: REDIS_URL, keyPrefix: scratch.prefix, connectionName: scratch.connectionName, checkServer: false });

afterAll(async () => {
  if (!skip) await scratch.cleanup();
});

describe.skipIf(Boolean(skip))('redeliver errors and stats on Redis', () => {
  const errorArgs = ['--error-queue', errorQueue];

  it('lists, shows, retries a group once (also after an interruption), deletes one entry and the rest, and reads depths', { timeout: 60_000 }, async () => {
    const transport: Transport = open();
    let filled: Filled;
    try {
      filled = await fillErrorQueue(transport, { timeout: 4, invalid: 2, binary: 1 }, queue, errorQueue);
      await waitFor(async () => (await transport.errorQueue!.count(errorQueue)) === 7, 10_000, 'the error queue to hold 7');
    } finally {
      await transport.close();
    }

    // Under another prefix the same URL sees nothing.
    const elsewhere = await cli(['errors', 'list', REDIS_URL, ...errorArgs], { env: { REDELIVER_REDIS_PREFIX: `${scratch.prefix}-other` } });
    expect(elsewhere.stdout).toBe(`error queue '${errorQueue}' is empty\n`);

    const list = JSON.parse((await cli(['errors', 'list', REDIS_URL, ...errorArgs, '--json'], { env })).stdout);
    expect(list.total).toBe(7);
    expect(list.groups.map((g: { errorName: string; count: number }) => [g.errorName, g.count])).toEqual([
      ['TimeoutError', 4],
      ['ValidationError', 2],
      ['DeserializationError', 1],
    ]);
    const timeouts = list.groups[0];
    expect(timeouts.keys[0]).toMatch(/^\d+-\d+$/);

    const show = await cli(['errors', 'show', REDIS_URL, timeouts.keys[0], ...errorArgs, '--json'], { env });
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ originalQueue: queue, signature: { id: timeouts.signature } });
    const badKey = await cli(['errors', 'show', REDIS_URL, 'not-a-key', ...errorArgs], { env });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain('redis keys are stream entry ids such as 1700000000000-0');
    const gone = await cli(['errors', 'show', REDIS_URL, '1-0', ...errorArgs], { env });
    expect(gone).toMatchObject({ code: 1, stderr: "redeliver: no entry with key 1-0 in error queue 'error' (sent back or deleted already?)\n" });

    const stats = JSON.parse((await cli(['stats', REDIS_URL, '--json'], { env })).stdout);
    expect(stats.queues).toEqual([
      expect.objectContaining({ queue, kind: 'work', ready: 0, inFlight: 0, delayed: 0 }),
      expect.objectContaining({ queue: errorQueue, kind: 'error', ready: 7, inFlight: 0, delayed: 0 }),
    ]);

    // A send-back goes only to a queue that exists: the operator makes this one by consuming it.
    const nowhere = await cli(['errors', 'retry', REDIS_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs], { env });
    expect(nowhere.code).toBe(1);
    expect(nowhere.stdout).toBe('sent back 0, already gone 0, refused 4\n');
    expect(nowhere.stderr).toContain(`no queue '${replayQueue}' exists`);
    const consumer = open();
    try {
      await (await consumer.consume(replayQueue, () => undefined, { prefetch: 1 })).close();

      // The first replay is interrupted after two messages; the second finishes.
      const stop = new AbortController();
      const interrupting = async (): Promise<Transport> => {
        const real = open();
        let selected = 0;
        return wrap(real, {
          onClose: () => real.close(),
          errorQueue: {
            sendBackEach: (q, o) =>
              real.errorQueue.sendBackEach(q, {
                ...o,
                select: (entry) => {
                  const chosen = o.select(entry);
                  if (chosen && ++selected === 2) stop.abort();
                  return chosen;
                },
              }),
          },
        });
      };
      const first = await cli(['errors', 'retry', REDIS_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs], {
        openTransport: interrupting,
        signal: stop.signal,
        env,
      });
      expect(first.code).toBe(130);
      expect(first.stdout).toBe(`sent back 2 (${replayQueue}: 2), already gone 0\n`);
      const second = await cli(['errors', 'retry', REDIS_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs], { env });
      expect(second).toEqual({ code: 0, stdout: `sent back 2 (${replayQueue}: 2), already gone 0\n`, stderr: '' });

      const replayDepth = JSON.parse((await cli(['stats', REDIS_URL, '--queue', replayQueue, '--json'], { env })).stdout);
      expect(replayDepth.queues).toEqual([expect.objectContaining({ queue: replayQueue, kind: 'work', ready: 4 })]);
      const got = await drain(consumer, replayQueue, 4, 300);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout].sort());
      expect(got.every((d) => d.headers[HEADER.replayCount] === '1' && d.deliveryCount === 1)).toBe(true);
    } finally {
      await consumer.close();
    }

    const [binary] = JSON.parse((await cli(['errors', 'list', REDIS_URL, ...errorArgs, '--json'], { env })).stdout).groups.filter(
      (g: { errorName: string }) => g.errorName === 'DeserializationError',
    );
    const deletedOne = await cli(['errors', 'delete', REDIS_URL, binary.keys[0], ...errorArgs], { env });
    expect(deletedOne).toEqual({ code: 0, stdout: 'deleted 1, already gone 0\n', stderr: '' });
    const again = await cli(['errors', 'delete', REDIS_URL, binary.keys[0], ...errorArgs], { env });
    expect(again).toEqual({ code: 0, stdout: 'deleted 0, already gone 1\n', stderr: '' });

    const refused = await cli(['errors', 'delete', REDIS_URL, '--all', ...errorArgs], { env });
    expect(refused.code).toBe(2);
    const deleted = await cli(['errors', 'delete', REDIS_URL, '--all', '--yes', ...errorArgs], { env });
    expect(deleted).toEqual({ code: 0, stdout: 'deleted 2\n', stderr: '' });
    const empty = await cli(['errors', 'list', REDIS_URL, ...errorArgs], { env });
    expect(empty.stdout).toBe(`error queue '${errorQueue}' is empty\n`);
  });

  it('ingests the error stream into an error store once, and retries from the store', { timeout: 60_000 }, async () => {
    const folder = tempFolder();
    const store = folder.path('errors.db');
    const transport = open();
    try {
      const filled = await fillErrorQueue(transport, { timeout: 3, invalid: 2 }, 'billing', 'billing-error');
      await waitFor(async () => (await transport.errorQueue.count('billing-error')) === 5, 10_000, 'the error queue to hold 5');
      const ingestArgs = ['errors', 'ingest', REDIS_URL, '--store', store, '--error-queue', 'billing-error', '--once', '--json'];
      const first = await cli(ingestArgs, { env });
      expect(first.stderr).toBe('');
      expect(JSON.parse(first.stdout)).toMatchObject({ stored: 5, duplicates: 0, ackFailures: 0 });
      expect(await transport.errorQueue.count('billing-error')).toBe(0);
      expect(JSON.parse((await cli(ingestArgs, { env })).stdout)).toMatchObject({ stored: 0 });

      const retried = await cli(['errors', 'retry', REDIS_URL, '--store', store, '--all', '--json'], { env });
      expect(retried.code).toBe(0);
      expect(JSON.parse(retried.stdout)).toMatchObject({ state: 'done', total: 5, sent: 5, refused: 0, failed: 0 });
      const got = await drain(transport, 'billing', 5, 300);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout, ...filled.ids.invalid].sort());
    } finally {
      await transport.close();
      folder.cleanup();
    }
  });

  it('a prefix with braces is a usage error naming the variable', async () => {
    const braces = await cli(['stats', REDIS_URL], { env: { REDELIVER_REDIS_PREFIX: 'a{b}' } });
    expect(braces.code).toBe(2);
    expect(braces.stderr).toContain('REDELIVER_REDIS_PREFIX');
  });

  it('a server it cannot reach fails the command at once, without the password', async () => {
    const started = performance.now();
    const run = await cli(['errors', 'list', 'redis://ops:s3cret@127.0.0.1:1'], { env });
    expect(run).toEqual({ code: 1, stdout: '', stderr: 'redeliver: cannot reach Redis at redis://ops:***@127.0.0.1:1: connect ECONNREFUSED 127.0.0.1:1\n' });
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
