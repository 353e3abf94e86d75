/**
 * The `errors` and `stats` commands against a real nsqd, through an nsq://
 * target as an operator would type it; every topic is named with a run
 * token and deleted afterwards.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { Transport } from '../../src/transport/types.js';
import { NsqdHttpApi } from '../../src/transports/nsq/http-api.js';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import { DEFAULT_ERROR_CHANNEL } from '../../src/transports/nsq/operations.js';
import { deleteTopics, dieHolding, NSQD_HTTP, NSQD_TCP, nsqSkipReason, publishMany, scratchTopic, untilDepth } from '../transports/nsq/operations-fixtures.js';
import { cli, drain, fillErrorQueue, tempFolder, waitFor } from './support.js';

const skip = await nsqSkipReason();

const target = `nsq://${NSQD_TCP}`;
const http = new NsqdHttpApi(NSQD_HTTP);
const made = new Set<string>();
/** A topic of this run, deleted after the file. */
const topic = (label: string) => {
  const name = scratchTopic(label);
  made.add(name);
  return name;
};
const open = () => new NsqTransport({ nsqd: [NSQD_TCP], connectionName: 'redeliver-test-cli' });

afterAll(async () => {
  if (!skip) await deleteTopics(http, made);
});

describe.skipIf(Boolean(skip))('redeliver errors and stats on NSQ', () => {
  it('lists, shows, retries a group, deletes one entry and the rest, and reads depths', { timeout: 60_000 }, async () => {
    const queue = topic('orders');
    const errorQueue = topic('orders.error');
    const replayQueue = topic('replay');
    const errorArgs = ['--error-queue', errorQueue];
    const transport: Transport = open();
    try {
      const filled = await fillErrorQueue(transport, { timeout: 4, invalid: 2, binary: 1 }, queue, errorQueue);
      await waitFor(async () => (await transport.errorQueue!.count(errorQueue)) === 7, 10_000, 'the error queue to hold 7');

      const list = JSON.parse((await cli(['errors', 'list', target, ...errorArgs, '--json'])).stdout);
      expect(list.total).toBe(7);
      expect(list.groups.map((g: { errorName: string; count: number }) => [g.errorName, g.count])).toEqual([
        ['TimeoutError', 4],
        ['ValidationError', 2],
        ['DeserializationError', 1],
      ]);
      const timeouts = list.groups[0];

      const show = await cli(['errors', 'show', target, timeouts.keys[0], ...errorArgs, '--json']);
      expect(show.code).toBe(0);
      expect(JSON.parse(show.stdout)).toMatchObject({ originalQueue: queue, signature: { id: timeouts.signature } });
      const gone = await cli(['errors', 'show', target, 'no-such-key', ...errorArgs]);
      expect(gone).toMatchObject({ code: 1, stderr: `redeliver: no entry with key no-such-key in error queue '${errorQueue}' (sent back or deleted already?)\n` });

      const stats = JSON.parse((await cli(['stats', target, '--queue', queue, '--queue', errorQueue, '--json'])).stdout);
      expect(stats.queues).toEqual([
        expect.objectContaining({ queue, kind: 'work', ready: 0, inFlight: 0, delayed: 0 }),
        expect.objectContaining({ queue: errorQueue, kind: 'error', ready: 7, inFlight: 0, delayed: 0 }),
      ]);

      // A send-back goes only to a topic that exists: the operator makes this one by consuming it.
      const nowhere = await cli(['errors', 'retry', target, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs]);
      expect(nowhere.code).toBe(1);
      expect(nowhere.stdout).toBe('sent back 0, already gone 0, refused 4\n');
      expect(nowhere.stderr).toContain(`no queue '${replayQueue}' exists`);
      await (await transport.consume(replayQueue, () => undefined, { prefetch: 1 })).close();
      const retried = await cli(['errors', 'retry', target, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs]);
      expect(retried).toEqual({ code: 0, stdout: `sent back 4 (${replayQueue}: 4), already gone 0\n`, stderr: '' });
      const got = await drain(transport, replayQueue, 4, 300);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout].sort());
      expect(got.every((d) => d.headers[HEADER.replayCount] === '1')).toBe(true);

      const [binary] = JSON.parse((await cli(['errors', 'list', target, ...errorArgs, '--json'])).stdout).groups.filter(
        (g: { errorName: string }) => g.errorName === 'DeserializationError',
      );
      expect(await cli(['errors', 'delete', target, binary.keys[0], ...errorArgs])).toEqual({ code: 0, stdout: 'deleted 1, already gone 0\n', stderr: '' });
      expect(await cli(['errors', 'delete', target, binary.keys[0], ...errorArgs])).toEqual({ code: 0, stdout: 'deleted 0, already gone 1\n', stderr: '' });

      expect((await cli(['errors', 'delete', target, '--all', ...errorArgs])).code).toBe(2);
      expect(await cli(['errors', 'delete', target, '--all', '--yes', ...errorArgs])).toEqual({ code: 0, stdout: 'deleted 2\n', stderr: '' });
      expect((await cli(['errors', 'list', target, ...errorArgs])).stdout).toBe(`error queue '${errorQueue}' is empty\n`);
    } finally {
      await transport.close();
    }
  });

  it('retries --all every entry, also those a reader that died was holding', { timeout: 60_000 }, async () => {
    const queue = topic('billing');
    const errorQueue = topic('billing.error');
    const transport = open();
    try {
      const filled = await fillErrorQueue(transport, { timeout: 3, invalid: 3 }, queue, errorQueue);
      await waitFor(async () => (await transport.errorQueue.count(errorQueue)) === 6, 10_000, 'the error queue to hold 6');
      // A reader of the error channel (a retry killed -9) takes every entry in flight and dies.
      await dieHolding(NSQD_TCP, errorQueue, DEFAULT_ERROR_CHANNEL, 6, 1_000);
      expect((await http.channelStats(errorQueue, DEFAULT_ERROR_CHANNEL))?.in_flight_count).toBe(6);

      const retried = await cli(['errors', 'retry', target, '--all', '--error-queue', errorQueue]);
      expect(retried).toEqual({ code: 0, stdout: `sent back 6 (${queue}: 6), already gone 0\n`, stderr: '' });
      expect(await transport.errorQueue.count(errorQueue)).toBe(0);
      const got = await drain(transport, queue, 6, 300);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout, ...filled.ids.invalid].sort());
    } finally {
      await transport.close();
    }
  });

  it('ingests the error queue into an error store once, and retries from the store', { timeout: 60_000 }, async () => {
    const folder = tempFolder();
    const store = folder.path('errors.db');
    const queue = topic('ship');
    const errorQueue = topic('ship.error');
    const transport = open();
    try {
      const filled = await fillErrorQueue(transport, { timeout: 3, invalid: 2 }, queue, errorQueue);
      await waitFor(async () => (await transport.errorQueue.count(errorQueue)) === 5, 10_000, 'the error queue to hold 5');
      const ingestArgs = ['errors', 'ingest', target, '--store', store, '--error-queue', errorQueue, '--once', '--json'];
      const first = await cli(ingestArgs);
      expect(first.stderr).toBe('');
      expect(JSON.parse(first.stdout)).toMatchObject({ stored: 5, duplicates: 0, ackFailures: 0 });
      expect(await transport.errorQueue.count(errorQueue)).toBe(0);
      expect(JSON.parse((await cli(ingestArgs)).stdout)).toMatchObject({ stored: 0 });

      const retried = await cli(['errors', 'retry', target, '--store', store, '--all', '--json']);
      expect(retried.code).toBe(0);
      expect(JSON.parse(retried.stdout)).toMatchObject({ state: 'done', total: 5, sent: 5, refused: 0, failed: 0 });
      const got = await drain(transport, queue, 5, 300);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout, ...filled.ids.invalid].sort());
    } finally {
      await transport.close();
      folder.cleanup();
    }
  });

  it('ingests an error queue larger than one pass may hold (nsqd --max-rdy-count) with --once', { timeout: 120_000 }, async () => {
    const folder = tempFolder();
    const errorQueue = topic('big.error');
    const maxRdy = await http.numberOption('max_rdy_count');
    const total = maxRdy + 600;
    try {
      await http.createChannel(errorQueue, DEFAULT_ERROR_CHANNEL);
      for (let at = 0; at < total; at += 1_000) {
        await publishMany(http, errorQueue, Array.from({ length: Math.min(1_000, total - at) }, (_, i) => `plain message ${at + i}`));
      }
      await untilDepth(http, errorQueue, DEFAULT_ERROR_CHANNEL, total);
      // Browsing refuses a queue this large in one pass; ingesting moves it in batches.
      const list = await cli(['errors', 'list', target, '--error-queue', errorQueue]);
      expect(list.code).toBe(1);
      expect(list.stderr).toContain(`holds ${total} entries, more than one pass can hold in flight (${maxRdy}`);

      const run = await cli(['errors', 'ingest', target, '--store', folder.path('errors.db'), '--error-queue', errorQueue, '--once', '--json']);
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ stored: total, duplicates: 0, commitFailures: 0 });
      expect((await http.channelStats(errorQueue, DEFAULT_ERROR_CHANNEL))).toMatchObject({ depth: 0, in_flight_count: 0 });
    } finally {
      folder.cleanup();
    }
  });

  it('ingests continuously until stopped: entries that arrive later are moved too', { timeout: 60_000 }, async () => {
    const folder = tempFolder();
    const errorQueue = topic('later.error');
    const stop = new AbortController();
    try {
      await http.createChannel(errorQueue, DEFAULT_ERROR_CHANNEL);
      await publishMany(http, errorQueue, ['first 1', 'first 2', 'first 3']);
      await untilDepth(http, errorQueue, DEFAULT_ERROR_CHANNEL, 3);
      const running = cli(['errors', 'ingest', target, '--store', folder.path('errors.db'), '--error-queue', errorQueue, '--json'], { signal: stop.signal });
      const empty = async () => {
        const stats = await http.channelStats(errorQueue, DEFAULT_ERROR_CHANNEL);
        return stats !== undefined && stats.depth === 0 && stats.in_flight_count === 0;
      };
      await waitFor(empty, 10_000, 'the first entries to be moved');
      await publishMany(http, errorQueue, ['later 1', 'later 2']);
      await waitFor(async () => (await http.channelStats(errorQueue, DEFAULT_ERROR_CHANNEL))!.message_count === 5 && (await empty()), 10_000, 'the later entries to be moved');
      stop.abort();
      const run = await running;
      expect(run.code).toBe(0);
      expect(JSON.parse(run.stdout)).toMatchObject({ stored: 5, duplicates: 0 });
    } finally {
      stop.abort();
      folder.cleanup();
    }
  });

  it('a node it cannot reach fails the command at once', async () => {
    const started = performance.now();
    const run = await cli(['errors', 'list', 'nsq://127.0.0.1:1']);
    expect(run).toEqual({ code: 1, stdout: '', stderr: 'redeliver: nsq: GET /stats on 127.0.0.1:2 failed: fetch failed (ECONNREFUSED)\n' });
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(await cli(['stats', 'nsq://'])).toMatchObject({ code: 2, stderr: expect.stringContaining('an NSQ target needs an nsqd host or a lookupd= address, such as nsq://127.0.0.1:4150') });
  });
});
