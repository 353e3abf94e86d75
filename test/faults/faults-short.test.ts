/**
 * The short fault suite inside `npm test`: the cheapest scenarios, with few
 * messages, on SQLite, on a RabbitMQ node, on a Redis server, on a NATS
 * server, on an nsqd of the test's own and on RocketMQ nodes of the test's own. Each must lose nothing. The whole suite is
 * `npm run faults`. Under `REDELIVER_FULL_FAULTS_FOLLOW=1` (set by
 * `.ci/run`, whose next step is that whole suite: every scenario here, on
 * every adapter here, with more messages) the file is skipped.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { natsNodeSkipReason } from '../support/nats-node.js';
import { nsqNodeSkipReason } from '../support/nsq-node.js';
import { rabbitNodeSkipReason } from '../support/rabbit-node.js';
import { redisNodeSkipReason } from '../support/redis-node.js';
import { JetStreamFaultAdapter } from './adapters/jetstream.js';
import { NsqFaultAdapter } from './adapters/nsq.js';
import { RabbitMqFaultAdapter } from './adapters/rabbitmq.js';
import { RedisFaultAdapter } from './adapters/redis.js';
import { RocketMqFaultAdapter } from './adapters/rocketmq.js';
import { SqliteFaultAdapter } from './adapters/sqlite.js';
import type { FaultAdapter } from './adapters/types.js';
import { rocketMqNodesSkipReason } from './rocketmq-nodes.js';
import { runScenario } from './run.js';
import { SCENARIOS } from './scenarios.js';

const fullSuiteFollows = process.env['REDELIVER_FULL_FAULTS_FOLLOW'] === '1';
if (fullSuiteFollows) console.warn('fault suite, short: skipped, the whole fault suite runs next (REDELIVER_FULL_FAULTS_FOLLOW=1)');

const dir = mkdtempSync(join(tmpdir(), 'redeliver-faults-short-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const scenario = (name: string) => SCENARIOS.find((s) => s.name === name)!;

async function expectNoLoss(adapter: FaultAdapter, name: string): Promise<void> {
  const result = await runScenario(adapter, scenario(name), { messages: 300, dir, seed: 1, log: () => undefined });
  expect(result.skipped).toBeUndefined();
  expect(result.notes?.filter((n) => /stopped early|did not drain|stalled/.test(n))).toEqual([]);
  expect(result.messages).toBeGreaterThan(0);
  expect(result.lostSample).toEqual([]);
  expect(result.lost).toBe(0);
  expect(result.recoverySeconds).not.toBeNull();
}

describe.skipIf(fullSuiteFollows)('fault suite, short: SQLite', () => {
  const sqlite = new SqliteFaultAdapter();

  it('loses nothing when the worker is killed -9 three times mid-flight', async () => {
    await expectNoLoss(sqlite, 'worker-kill');
  }, 120_000);

  it('stores every send that resolved before the producer was killed -9', async () => {
    await expectNoLoss(sqlite, 'producer-kill');
  }, 120_000);
});

describe.skipIf(fullSuiteFollows || Boolean(rabbitNodeSkipReason()))('fault suite, short: RabbitMQ on a node of its own', () => {
  const rabbit = new RabbitMqFaultAdapter();
  afterAll(() => rabbit.stop(), 60_000);

  it('loses nothing when connections are cut three times with delayed retries pending', async () => {
    await rabbit.start();
    await expectNoLoss(rabbit, 'connection-cut');
  }, 240_000);
});

describe.skipIf(fullSuiteFollows || Boolean(redisNodeSkipReason()))('fault suite, short: Redis on a server of its own', () => {
  const redis = new RedisFaultAdapter();
  beforeAll(() => redis.start());
  afterAll(() => redis.stop(), 60_000);

  it('loses nothing when the worker is killed -9 three times mid-flight', async () => {
    await expectNoLoss(redis, 'worker-kill');
  }, 120_000);

  it('loses nothing when the server is killed -9 with over 1,000 delayed retries pending (AOF, appendfsync always)', async () => {
    await expectNoLoss(redis, 'broker-kill');
  }, 240_000);
});

describe.skipIf(fullSuiteFollows || Boolean(redisNodeSkipReason()))('fault suite, short: Redis failover through Sentinel, waitReplicas 1', () => {
  const redis = new RedisFaultAdapter({ failover: { setup: 'sentinel', waitReplicas: 1, basePort: 7240 } });
  beforeAll(() => redis.start(), 60_000);
  afterAll(() => redis.stop(), 60_000);

  it('loses nothing when the primary is killed -9 mid-run, and reports the set-up on its row', async () => {
    const result = await runScenario(redis, scenario('failover'), { messages: 300, dir, seed: 1, log: () => undefined });
    expect(result).toMatchObject({ transport: 'redis-sentinel-w1', setup: 'sentinel', waitReplicas: 1, lost: 0 });
    expect(result.notes?.filter((n) => /stopped early|did not drain|stalled/.test(n))).toEqual([]);
    expect(result.notes?.some((n) => /handled again \d+(\.\d)? s after the kill/.test(n))).toBe(true);
  }, 240_000);
});

describe.skipIf(fullSuiteFollows || Boolean(natsNodeSkipReason()))('fault suite, short: JetStream on a server of its own', () => {
  const jetstream = new JetStreamFaultAdapter();
  beforeAll(() => jetstream.start());
  afterAll(() => jetstream.stop(), 60_000);

  it('loses nothing when the worker is killed -9 three times mid-flight', async () => {
    await expectNoLoss(jetstream, 'worker-kill');
  }, 120_000);

  it('loses nothing when the server is killed -9 with over 1,000 delayed retries pending', async () => {
    await expectNoLoss(jetstream, 'broker-kill');
  }, 240_000);
});

describe.skipIf(fullSuiteFollows || Boolean(nsqNodeSkipReason()))('fault suite, short: NSQ on nsqd of its own', () => {
  // Ports 4270-4275: apart from `npm run faults` (4250-4265) and the bench (4290-4293).
  const nsq = new NsqFaultAdapter({ basePort: 4270 });
  beforeAll(() => nsq.start());
  afterAll(() => nsq.stop(), 60_000);

  it('loses nothing when the worker is killed -9 three times mid-flight', async () => {
    await expectNoLoss(nsq, 'worker-kill');
  }, 120_000);

  it('loses nothing when connections are cut three times with delayed retries pending', async () => {
    await expectNoLoss(nsq, 'connection-cut');
  }, 240_000);
});

describe.skipIf(fullSuiteFollows || Boolean(rocketMqNodesSkipReason()))('fault suite, short: RocketMQ on nodes of its own', () => {
  const rocketmq = new RocketMqFaultAdapter();
  beforeAll(() => rocketmq.start(), 240_000);
  afterAll(() => rocketmq.stop(), 60_000);

  it('loses nothing when the worker is killed -9 three times mid-flight', async () => {
    await expectNoLoss(rocketmq, 'worker-kill');
  }, 180_000);

  it('loses nothing when the name server is killed -9 for 15 s with delayed retries pending', async () => {
    await expectNoLoss(rocketmq, 'name-server-kill');
  }, 240_000);
});
