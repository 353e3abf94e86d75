/**
 * The `errors` and `stats` commands against a real RabbitMQ, through an
 * amqp:// URL as an operator would type it.
 */
import { randomUUID } from 'node:crypto';
import amqp from 'amqplib';
import { afterAll, describe, expect, it } from 'vitest';
import { HEADER } from '../../src/headers/names.js';
import type { Transport } from '../../src/transport/types.js';
import { errorQueueMarkerName } from '../../src/transports/rabbitmq/error-queue-marker.js';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { deleteDelayTopology } from '../support/delay-topology.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { cli, drain, fillErrorQueue, waitFor, wrap, type Filled } from './support.js';

const skip = await rabbitSkipReason();

const run = randomUUID().slice(0, 8);
const queue = `cli-orders-${run}`;
const errorQueue = `cli-error-${run}`;
const replayQueue = `cli-replay-${run}`;

afterAll(async () => {
  if (skip) return;
  const connection = await amqp.connect(RABBITMQ_URL);
  for (const name of [queue, errorQueue, replayQueue]) {
    const channel = await connection.createChannel();
    channel.on('error', () => undefined);
    await channel.deleteQueue(name).catch(() => undefined);
    await channel.close().catch(() => undefined);
  }
  await connection.close();
});

describe.skipIf(Boolean(skip))('redeliver errors and stats on RabbitMQ', () => {
  const errorArgs = ['--error-queue', errorQueue];

  it('knows error queues marked under another topology prefix: $REDELIVER_RABBITMQ_PREFIX or --topology-prefix', { timeout: 60_000 }, async () => {
    const prefix = `cli-prefix-${run}`;
    const work = `cli-p-orders-${run}`;
    const errors = `cli-p-error-${run}`;
    const transport: Transport = new RabbitMqTransport({ url: RABBITMQ_URL, topologyPrefix: prefix });
    try {
      await fillErrorQueue(transport, { timeout: 1 }, work, errors);
      await waitFor(async () => (await transport.errorQueue!.count(errors)) === 1, 10_000, 'the error queue to hold 1');
    } finally {
      await transport.close();
    }
    try {
      const statsArgs = ['stats', RABBITMQ_URL, '--queue', errors, '--json'];
      expect(JSON.parse((await cli(statsArgs)).stdout).queues).toEqual([expect.objectContaining({ queue: errors, kind: 'work' })]);
      for (const told of [await cli([...statsArgs, '--topology-prefix', prefix]), await cli(statsArgs, { env: { REDELIVER_RABBITMQ_PREFIX: prefix } })]) {
        expect(told.code).toBe(0);
        expect(JSON.parse(told.stdout).queues).toEqual([expect.objectContaining({ queue: errors, kind: 'error', ready: 1 })]);
      }
      const wrong = await cli([...statsArgs, '--topology-prefix', '']);
      expect(wrong.code).toBe(2);
    } finally {
      const connection = await amqp.connect(RABBITMQ_URL);
      await deleteDelayTopology(connection, prefix, [work, errors]);
      const channel = await connection.createChannel();
      channel.on('error', () => undefined);
      await channel.deleteExchange(errorQueueMarkerName(prefix, errors)).catch(() => undefined);
      await connection.close();
    }
  });

  it('lists, shows, exports, retries a group once (also after an interruption), and deletes the rest', { timeout: 60_000 }, async () => {
    const transport: Transport = new RabbitMqTransport({ url: RABBITMQ_URL });
    let filled: Filled;
    try {
      filled = await fillErrorQueue(transport, { timeout: 4, invalid: 2, binary: 1 }, queue, errorQueue);
      await waitFor(async () => (await transport.errorQueue!.count(errorQueue)) === 7, 10_000, 'the error queue to hold 7');
    } finally {
      await transport.close();
    }

    const list = JSON.parse((await cli(['errors', 'list', RABBITMQ_URL, ...errorArgs, '--json'])).stdout);
    expect(list.total).toBe(7);
    expect(list.groups.map((g: { errorName: string; count: number }) => [g.errorName, g.count])).toEqual([
      ['TimeoutError', 4],
      ['ValidationError', 2],
      ['DeserializationError', 1],
    ]);
    const timeouts = list.groups[0];

    const show = await cli(['errors', 'show', RABBITMQ_URL, timeouts.keys[0], ...errorArgs, '--json']);
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ originalQueue: queue, signature: { id: timeouts.signature } });

    const exported = await cli(['errors', 'export', RABBITMQ_URL, ...errorArgs]);
    expect(exported.stdout.trimEnd().split('\n').map((l) => JSON.parse(l).messageId).sort()).toEqual(
      [...filled.ids.timeout, ...filled.ids.invalid, ...filled.ids.binary].sort(),
    );

    const stats = JSON.parse((await cli(['stats', RABBITMQ_URL, '--queue', queue, errorQueue, '--json'])).stdout);
    expect(stats.queues).toEqual([
      expect.objectContaining({ queue, ready: 0 }),
      expect.objectContaining({ queue: errorQueue, kind: 'error', ready: 7 }),
    ]);

    // A send-back goes only to a queue that exists: the operator made this one.
    const nowhere = await cli(['errors', 'retry', RABBITMQ_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs]);
    expect(nowhere.code).toBe(1);
    expect(nowhere.stdout).toBe('sent back 0, already gone 0, refused 4\n');
    expect(nowhere.stderr).toContain(`no queue '${replayQueue}' exists`);
    const admin = await amqp.connect(RABBITMQ_URL);
    await (await admin.createChannel()).assertQueue(replayQueue, { durable: true });
    await admin.close();

    // The first replay is interrupted after two messages; the second finishes.
    const stop = new AbortController();
    const interrupting = async (url: string): Promise<Transport> => {
      const real: Transport = new RabbitMqTransport({ url, connectionName: 'redeliver-cli-test' });
      let selected = 0;
      return wrap(real, {
        onClose: () => real.close(),
        errorQueue: {
          sendBackEach: (q, o) =>
            real.errorQueue!.sendBackEach(q, {
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
    const first = await cli(['errors', 'retry', RABBITMQ_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs], {
      openTransport: interrupting,
      signal: stop.signal,
    });
    expect(first.code).toBe(130);
    expect(first.stdout).toBe(`sent back 2 (${replayQueue}: 2), already gone 0\n`);
    const second = await cli(['errors', 'retry', RABBITMQ_URL, '--group', timeouts.signature, '--to', replayQueue, ...errorArgs]);
    expect(second).toEqual({ code: 0, stdout: `sent back 2 (${replayQueue}: 2), already gone 0\n`, stderr: '' });

    const consumer = new RabbitMqTransport({ url: RABBITMQ_URL });
    try {
      const got = await drain(consumer, replayQueue, 4, 1_000);
      expect(got.map((d) => d.id).sort()).toEqual([...filled.ids.timeout].sort());
      expect(got.every((d) => d.headers[HEADER.replayCount] === '1')).toBe(true);
    } finally {
      await consumer.close();
    }

    const refused = await cli(['errors', 'delete', RABBITMQ_URL, '--all', ...errorArgs]);
    expect(refused.code).toBe(2);
    const deleted = await cli(['errors', 'delete', RABBITMQ_URL, '--all', '--yes', ...errorArgs]);
    expect(deleted).toEqual({ code: 0, stdout: 'deleted 3\n', stderr: '' });
    const empty = await cli(['errors', 'list', RABBITMQ_URL, ...errorArgs]);
    expect(empty.stdout).toBe(`error queue '${errorQueue}' is empty\n`);
  });
});
