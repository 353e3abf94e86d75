/**
 * The `errors` and `stats` commands against a real NATS JetStream, through
 * a nats:// URL as an operator would type it, the stream prefix in
 * `REDELIVER_NATS_PREFIX`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { Transport } from '../../src/transport/types.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';
import { cli, drain, fillErrorQueue, tempFolder, waitFor, wrap, type Filled } from './support.js';

const skip = await natsSkipReason();

const prefix = jetStreamPrefix('cli');
const env = { REDELIVER_NATS_PREFIX: prefix };
const queue = 'orders';
const errorQueue = 'error';
const replayQueue = 'replay';
/** How long the streams this file makes remember a message id: a send of the same id within it stores nothing. */
const open = () => new JetStreamTransport({ servers: NATS_URL, prefix, connectionName: `redeliver-${prefix}` });

afterAll(async () => {
  if (!skip) await deleteJetStreamPrefix(prefix);
});

describe.skipIf(Boolean(skip))('redeliver errors and stats on NATS JetStream', () => {
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
    const elsewhere = await cli(['errors', 'list', NATS_URL, ...errorArgs], { env: { REDELIVER_NATS_PREFIX: `${prefix}-other` } });
    expect(elsewhere.stdout).toBe(`error queue '${errorQueue}' is empty\n`);

    const list = JSON.parse((await cli(['errors', 'list', NATS_URL, ...errorArgs, '--json'], { env })).stdout);
    expect(list.total).toBe(7);
    expect(list.groups.map((g: { errorName: string; count: number }) => [g.errorName, g.count])).toEqual([
      ['TimeoutError', 4],
      ['ValidationError', 2],
      ['DeserializationError', 1],
    ]);
    const timeouts = list.groups[0];
    expect(timeouts.keys[0]).toMatch(/^[1-9]\d*$/);

    const show = await cli(['errors', 'show', NATS_URL, timeouts.keys[0], ...errorArgs, '--json'], { env });
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ originalQueue: queue, signature: { id: timeouts.signature } });
    const badKey = await cli(['errors', 'show', NATS_URL, '1-0', ...errorArgs], { env });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).toContain('jetstream keys are stream sequence numbers such as 17');
    const gone = await cli(['errors', 'show', NATS_URL, '999999', ...errorArgs], { env });
    expect(gone).toMatchObject({ code: 1, stderr: "redeliver: no entry with key 999999 in error queue 'error' (sent back or deleted already?)\n" });

    const stats = JSON.parse((await cli(['stats', NATS_URL, '--json'], { env })).stdout);
    expect(stats.queues).toEqual([
      expect.objectContaining({ queue, kind: 'work', ready: 0, inFlight: 0, delayed: 0 }),
      expect.objectContaining({ queue: errorQueue, kind: 'error', ready: 7, inFlight: 0, delayed: 0 }),
    ]);

    // A send-back goes only to a queue that exists: the operator makes this one by consuming it.
    const nowhere = await cli(['errors', 'retry', NATS_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs], { env });
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
      const first = await cli(['errors', 'retry', NATS_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs], {
        openTransport: interrupting,
        signal: stop.signal,
        env,
      });
      expect(first.code).toBe(130);
      expect(first.stdout).toBe(`sent back 2 (${replayQueue}: 2), already gone 0\n`);
      const second = await cli(['errors', 'retry', NATS_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs], { env });
      expect(second).toEqual({ code: 0, stdout: `sent back 2 (${replayQueue}: 2), already gone 0\n`, stderr: '' });

      const replayDepth = JSON.parse((await cli(['stats', NATS_URL, '--queue', replayQueue, '--json'], { env })).stdout);
      expect(replayDepth.queues).toEqual([expect.objectContaining({ queue: replayQueue, kind: 'work', ready: 4 })]);
      const got = await drain(consumer, replayQueue, 4, 300);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout].sort());
      expect(got.every((d) => d.headers[HEADER.replayCount] === '1' && d.deliveryCount === 1)).toBe(true);
    } finally {
      await consumer.close();
    }

    const [binary] = JSON.parse((await cli(['errors', 'list', NATS_URL, ...errorArgs, '--json'], { env })).stdout).groups.filter(
      (g: { errorName: string }) => g.errorName === 'DeserializationError',
    );
    const deletedOne = await cli(['errors', 'delete', NATS_URL, binary.keys[0], ...errorArgs], { env });
    expect(deletedOne).toEqual({ code: 0, stdout: 'deleted 1, already gone 0\n', stderr: '' });
    const again = await cli(['errors', 'delete', NATS_URL, binary.keys[0], ...errorArgs], { env });
    expect(again).toEqual({ code: 0, stdout: 'deleted 0, already gone 1\n', stderr: '' });

    const refused = await cli(['errors', 'delete', NATS_URL, '--all', ...errorArgs], { env });
    expect(refused.code).toBe(2);
    const deleted = await cli(['errors', 'delete', NATS_URL, '--all', '--yes', ...errorArgs], { env });
    expect(deleted).toEqual({ code: 0, stdout: 'deleted 2\n', stderr: '' });
    const empty = await cli(['errors', 'list', NATS_URL, ...errorArgs], { env });
    expect(empty.stdout).toBe(`error queue '${errorQueue}' is empty\n`);
  });

  it('ingests the error queue into an error store once, and retries from the store', { timeout: 60_000 }, async () => {
    const folder = tempFolder();
    const store = folder.path('errors.db');
    const transport = open();
    try {
      const filled = await fillErrorQueue(transport, { timeout: 3, invalid: 2 }, 'billing', 'billing-error');
      await waitFor(async () => (await transport.errorQueue.count('billing-error')) === 5, 10_000, 'the error queue to hold 5');
      const ingestArgs = ['errors', 'ingest', NATS_URL, '--store', store, '--error-queue', 'billing-error', '--once', '--json'];
      const first = await cli(ingestArgs, { env });
      expect(first.stderr).toBe('');
      expect(JSON.parse(first.stdout)).toMatchObject({ stored: 5, duplicates: 0, ackFailures: 0 });
      expect(await transport.errorQueue.count('billing-error')).toBe(0);
      expect(JSON.parse((await cli(ingestArgs, { env })).stdout)).toMatchObject({ stored: 0 });

      // Right after the first sends, inside the streams' duplicate window: a replay is a new send all the same.
      const retried = await cli(['errors', 'retry', NATS_URL, '--store', store, '--all', '--json'], { env });
      expect(retried.code).toBe(0);
      expect(JSON.parse(retried.stdout)).toMatchObject({ state: 'done', total: 5, sent: 5, refused: 0, failed: 0 });
      const got = await drain(transport, 'billing', 5, 300);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout, ...filled.ids.invalid].sort());
    } finally {
      await transport.close();
      folder.cleanup();
    }
  });

  it('a prefix the transport refuses is a usage error naming the variable', async () => {
    const bad = await cli(['stats', NATS_URL], { env: { REDELIVER_NATS_PREFIX: 'a_b' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('REDELIVER_NATS_PREFIX');
  });

  it('a server it cannot reach fails the command at once, without the password', async () => {
    const started = performance.now();
    const run = await cli(['errors', 'list', 'nats://ops:s3cret@127.0.0.1:1'], { env });
    expect(run).toEqual({ code: 1, stdout: '', stderr: 'redeliver: cannot reach NATS at nats://ops:***@127.0.0.1:1: connection refused\n' });
    expect(performance.now() - started).toBeLessThan(5_000);
    const hostless = await cli(['stats', 'nats://'], { env });
    expect(hostless).toMatchObject({ code: 2, stderr: expect.stringContaining('is not a NATS URL such as nats://127.0.0.1:4222') });
  });
});
