/**
 * The `errors` commands against a real RocketMQ 5, through a
 * `rocketmq://host:port` target as an operator would type it, the name
 * server and consumer group from the flags or the environment; and the
 * broker's own dead-letter topic, `%DLQ%<group>`, read like redeliver's
 * error topic.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { SimpleConsumer } from 'rocketmq-client-nodejs';
import { openTransport, rocketMqEndpoints, UsageError } from '../../src/cli/open-transport.js';
import { ErrorStore } from '../../src/error-store/store.js';
import { removalTopic } from '../../src/transports/rocketmq/operations.js';
import { REQUEST, request } from '../../src/transports/rocketmq/remoting.js';
import { ROCKETMQ_ENDPOINTS, ROCKETMQ_NAMESRV, RocketScratch, rocketSkipReason } from '../transports/rocketmq/scratch.js';
import { cli, fillErrorQueue, tempFolder, waitFor } from './support.js';

const skip = await rocketSkipReason();
const target = `rocketmq://${ROCKETMQ_ENDPOINTS}`;

describe('rocketmq:// targets', () => {
  it('name the gRPC proxy, 8081 when the port is left out', () => {
    expect(rocketMqEndpoints('rocketmq://10.0.0.5:9081')).toBe('10.0.0.5:9081');
    expect(rocketMqEndpoints('rocketmq://broker.example')).toBe('broker.example:8081');
    expect(rocketMqEndpoints('ROCKETMQ://127.0.0.1:8081/')).toBe('127.0.0.1:8081');
    for (const bad of ['rocketmq://', 'rocketmq://host:8081/topic', 'rocketmq:host']) expect(() => rocketMqEndpoints(bad)).toThrow(UsageError);
  });

  it('fail at once, naming the name server and how to set it, when it does not answer', async () => {
    const run = await cli(['errors', 'list', 'rocketmq://127.0.0.1:8081', '--name-server', '127.0.0.1:1']);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/cannot reach the RocketMQ name server at 127\.0\.0\.1:1: .*--name-server or REDELIVER_ROCKETMQ_NAME_SERVER/);
  });
});

describe.skipIf(Boolean(skip))('redeliver errors on RocketMQ', () => {
  const scratch = new RocketScratch('cli');
  afterAll(() => scratch.cleanup(), 60_000);
  const queue = `${scratch.group}-orders`;
  const errorQueue = `${scratch.group}-error`;

  it('lists and shows redeliver error-topic entries, with the name server and group from the flags or the environment', { timeout: 60_000 }, async () => {
    const transport = scratch.transport();
    try {
      await fillErrorQueue(transport, { timeout: 2, invalid: 1 }, queue, errorQueue);
      await waitFor(async () => (await transport.errorQueue.count(errorQueue)) === 3, 20_000, 'the error topic to hold 3');
    } finally {
      await transport.close();
    }
    const flags = await cli(['errors', 'list', target, '--name-server', ROCKETMQ_NAMESRV, '--consumer-group', scratch.group, '--error-queue', errorQueue, '--json']);
    expect(flags.stderr).toBe('');
    const list = JSON.parse(flags.stdout);
    expect(list.total).toBe(3);
    const env = { REDELIVER_ROCKETMQ_NAME_SERVER: ROCKETMQ_NAMESRV, REDELIVER_ROCKETMQ_GROUP: scratch.group };
    const fromEnv = JSON.parse((await cli(['errors', 'list', target, '--error-queue', errorQueue, '--json'], { env })).stdout);
    expect(fromEnv.total).toBe(3);
    const key = list.groups[0].keys[0] as string;
    expect(key).toMatch(/^[\d.]+:\d+:\d+:\d+$/);
    const shown = await cli(['errors', 'show', target, key, '--error-queue', errorQueue], { env });
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(key);
  });

  it("reads a message the broker dead-lettered on its own (%DLQ%<group>) with its id, as it reads redeliver's error topic", { timeout: 120_000 }, async () => {
    const group = `${scratch.group}-dlq`;
    const topic = `${scratch.group}-poison`;
    // The group gives up after two deliveries: the first, then one redelivery.
    const body = Buffer.from(JSON.stringify({ groupName: group, consumeEnable: true, consumeFromMinEnable: true, consumeBroadcastEnable: false, retryQueueNums: 1, retryMaxTimes: 1, brokerId: 0, whichBrokerWhenConsumeSlowly: 1 }));
    for (const broker of await scratch.admin.masters()) await request(broker, REQUEST.updateAndCreateSubscriptionGroup, {}, 5_000, body);
    const transport = scratch.transport({ consumerGroup: group });
    const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
    const consumer = new SimpleConsumer({ endpoints: ROCKETMQ_ENDPOINTS, namespace: '', logger: silent as never, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 5_000 });
    const dlq = `%DLQ%${group}`;
    try {
      await transport.send(topic, { id: 'poison-1', body: new TextEncoder().encode('{"n":1}'), headers: {} });
      await consumer.startup();
      // Received and never acknowledged: after its second invisible duration ran out the broker moves it to %DLQ%<group>.
      await waitFor(
        async () => {
          await consumer.receive(1, 10_000).catch(() => []);
          return (await scratch.admin.route(dlq)) !== undefined && (await transport.errorQueue.count(dlq)) === 1;
        },
        100_000,
        `${dlq} to hold the message`,
      );
    } finally {
      await consumer.shutdown();
      await transport.close();
      await scratch.admin.deleteTopic(topic).catch(() => undefined);
      await scratch.admin.deleteGroup(group).catch(() => undefined);
    }
    const env = { REDELIVER_ROCKETMQ_NAME_SERVER: ROCKETMQ_NAMESRV, REDELIVER_ROCKETMQ_GROUP: group };
    const exported = await cli(['errors', 'export', target, '--error-queue', dlq], { env });
    expect(exported.stderr).toBe('');
    const entries = exported.stdout.trim().split('\n').map((line) => JSON.parse(line) as { messageId: string });
    expect(entries.map((e) => e.messageId)).toEqual(['poison-1']);
    await scratch.admin.deleteTopic(dlq).catch(() => undefined);
  });

  it('ingests an error topic into an error store with --once, which finishes with every entry stored and the topic read empty', { timeout: 90_000 }, async () => {
    const ingestQueue = `${scratch.group}-ingest-error`;
    scratch.topics.add(removalTopic(ingestQueue));
    const folder = tempFolder();
    const storePath = folder.path('errors.db');
    const transport = scratch.transport();
    try {
      const filled = await fillErrorQueue(transport, { timeout: 3, invalid: 2 }, `${scratch.group}-billing`, ingestQueue);
      await waitFor(async () => (await transport.errorQueue.count(ingestQueue)) === 5, 20_000, 'the error topic to hold 5');
      const env = { REDELIVER_ROCKETMQ_NAME_SERVER: ROCKETMQ_NAMESRV, REDELIVER_ROCKETMQ_GROUP: scratch.group };
      const ingestArgs = ['errors', 'ingest', target, '--store', storePath, '--error-queue', ingestQueue, '--once', '--json'];
      const first = await cli(ingestArgs, { env });
      expect(first.stderr).toBe('');
      expect(JSON.parse(first.stdout)).toMatchObject({ stored: 5, duplicates: 0 });
      expect(await transport.errorQueue.count(ingestQueue)).toBe(0);
      const store = ErrorStore.open(storePath);
      try {
        expect(store.search({}, { limit: 10 }).entries.map((e) => e.messageId).sort()).toEqual([...filled.ids.timeout, ...filled.ids.invalid].sort());
      } finally {
        store.close();
      }
      expect(JSON.parse((await cli(ingestArgs, { env })).stdout)).toMatchObject({ stored: 0 });
    } finally {
      await transport.close();
      folder.cleanup();
    }
  });

  it('opens the transport with the proxy, name server and group of the target', async () => {
    const transport = await openTransport(target, { REDELIVER_ROCKETMQ_NAME_SERVER: ROCKETMQ_NAMESRV, REDELIVER_ROCKETMQ_GROUP: 'ops' });
    try {
      expect(transport.name).toBe('rocketmq');
      expect((transport as unknown as { consumerGroup: string }).consumerGroup).toBe('ops');
    } finally {
      await transport.close();
    }
  });
});
