/**
 * `redeliver demo` leaves its SQLite file for the CLI and the dashboard:
 * `redeliver-demo.db` in the current folder by default (an earlier one is
 * replaced), or a new file named with `--file`, and ends with the commands
 * to try next, whose `errors show` key names a real entry.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { DEMO_NATS_PREFIX, DEMO_NSQ_CHANNEL, DEMO_REDIS_PREFIX, DEMO_ROCKETMQ } from '../../src/cli/demo.js';
import { NsqdHttpApi } from '../../src/transports/nsq/http-api.js';
import { RocketMqAdmin } from '../../src/transports/rocketmq/index.js';
import { ROCKETMQ_NAMESRV, rocketSkipReason } from '../transports/rocketmq/scratch.js';
import { Redis } from 'ioredis';
import { natsSkipReason, REDIS_URL, redisSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix } from '../support/jetstream-scratch.js';
import { deletePrefix } from '../support/redis-scratch.js';
import { NSQD_HTTP, nsqSkipReason } from '../transports/nsq/support.js';
import { cli, sqlite, tempFolder } from './support.js';

const redisSkip = await redisSkipReason();
const natsSkip = await natsSkipReason();
const nsqSkip = await nsqSkipReason();
const rocketSkip = await rocketSkipReason();

const folder = tempFolder();
afterAll(() => folder.cleanup());

const main = resolve('src/cli/main.ts');
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/** Runs the real `redeliver demo` process in `cwd`. */
function demo(cwd: string, args: readonly string[]): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(process.execPath, ['--import', tsx, main, 'demo', ...args], { cwd, encoding: 'utf8', timeout: 60_000 }, (error, stdout, stderr) => {
      done({ status: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr });
    });
  });
}

/** The three lines after `next:`. */
function nextLines(stdout: string): string[] {
  const at = stdout.indexOf('next:\n');
  expect(at).toBeGreaterThan(0);
  return stdout.slice(at + 'next:\n'.length).trimEnd().split('\n').map((l) => l.trim());
}

describe('redeliver demo', () => {
  it('keeps redeliver-demo.db in the current folder, names it, and replaces it on the next run', async () => {
    const cwd = folder.path('default');
    mkdirSync(cwd);
    const first = await demo(cwd, ['--messages', '40']);
    expect(first.stderr).toBe('');
    expect(first.status).toBe(0);
    expect(first.stdout).toMatch(/^redeliver demo: 40 orders through an endpoint on redeliver-demo\.db\n/);
    expect(existsSync(join(cwd, 'redeliver-demo.db'))).toBe(true);

    const [list, show, dashboard] = nextLines(first.stdout);
    expect(list).toBe('npx redeliver errors list redeliver-demo.db');
    expect(dashboard).toBe('npx redeliver dashboard redeliver-demo.db');
    const key = /^npx redeliver errors show redeliver-demo\.db (\S+)$/.exec(show!)?.[1];
    expect(key).toBeDefined();
    const shown = await cli(['errors', 'show', join(cwd, 'redeliver-demo.db'), key!]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toMatch(/message id\s+order-17\n/);
    expect(shown.stdout).toContain('ValidationError: order 17 has a negative amount (-5)');

    writeFileSync(join(cwd, 'redeliver-demo.db-wal'), 'left over from a crash');
    const second = await demo(cwd, ['--messages', '40']);
    expect(second.status).toBe(0);
    expect(second.stdout).toMatch(/^redeliver demo: 40 orders through an endpoint on redeliver-demo\.db \(replaced the redeliver-demo\.db of an earlier run\)\n/);
    const transport = sqlite(join(cwd, 'redeliver-demo.db'));
    try {
      const entries = await transport.errorQueue.browse('error');
      expect(entries.map((e) => e.messageId).sort()).toEqual(['order-17', 'order-garbled']);
    } finally {
      await transport.close();
    }
  });

  it('writes a new file named with --file, and refuses one that exists', async () => {
    const cwd = folder.path('named');
    mkdirSync(cwd);
    const file = folder.path('my demo.db');
    const run = await demo(cwd, ['--messages', '20', '--file', file]);
    expect(run.status, run.stdout).toBe(0);
    expect(existsSync(file)).toBe(true);
    expect(existsSync(join(cwd, 'redeliver-demo.db'))).toBe(false);
    expect(nextLines(run.stdout)[0]).toBe(`npx redeliver errors list '${file}'`);

    const again = await demo(cwd, ['--messages', '20', '--file', file]);
    expect(again.status).toBe(2);
    expect(again.stderr).toContain(`${file} already exists; the demo writes a new file`);
    expect(again.stdout).toBe('');
  });

  it.skipIf(Boolean(redisSkip))('runs on Redis with --transport redis, under its own key prefix, and names the commands that reach it', async () => {
    try {
      const cwd = folder.path('redis');
      mkdirSync(cwd);
      const run = await demo(cwd, ['--messages', '40', '--transport', 'redis']);
      expect(run.stderr).toBe('');
      expect(run.status, run.stdout).toBe(0);
      expect(run.stdout).toMatch(/^redeliver demo: 40 orders through an endpoint on Redis at redis:\/\/127\.0\.0\.1:6379, key prefix redeliver-demo/);
      expect(existsSync(join(cwd, 'redeliver-demo.db'))).toBe(false);
      const [list, show] = nextLines(run.stdout);
      expect(list).toBe('REDELIVER_REDIS_PREFIX=redeliver-demo npx redeliver errors list redis://127.0.0.1:6379');
      const key = /^REDELIVER_REDIS_PREFIX=redeliver-demo npx redeliver errors show redis:\/\/127\.0\.0\.1:6379 (\d+-\d+)$/.exec(show!)?.[1];
      expect(key).toBeDefined();
      const shown = await cli(['errors', 'show', 'redis://127.0.0.1:6379', key!], { env: { REDELIVER_REDIS_PREFIX: 'redeliver-demo' } });
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/message id\s+order-17\n/);

      const again = await demo(cwd, ['--messages', '40', '--transport', 'redis']);
      expect(again.status).toBe(0);
      expect(again.stdout).toContain('(replaced the Redis at redis://127.0.0.1:6379, key prefix redeliver-demo of an earlier run)');
      const listed = await cli(['errors', 'list', 'redis://127.0.0.1:6379', '--json'], { env: { REDELIVER_REDIS_PREFIX: 'redeliver-demo' } });
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain('"errorName": "DeserializationError"');
      expect(listed.stdout).toContain('"errorName": "ValidationError"');
    } finally {
      // The demo's keys on the shared server go with the test.
      const client = new Redis(REDIS_URL, { connectionName: 'redeliver-test-demo-cleanup' });
      await deletePrefix(client, DEMO_REDIS_PREFIX).finally(() => client.disconnect());
    }
  });

  it.skipIf(Boolean(natsSkip))('runs on NATS JetStream with --transport jetstream, under its own stream prefix, and names the commands that reach it', async () => {
    const cwd = folder.path('jetstream');
    mkdirSync(cwd);
    const env = { REDELIVER_NATS_PREFIX: DEMO_NATS_PREFIX };
    try {
      const run = await demo(cwd, ['--messages', '40', '--transport', 'jetstream']);
      expect(run.stderr).toBe('');
      expect(run.status, run.stdout).toBe(0);
      expect(run.stdout).toMatch(/^redeliver demo: 40 orders through an endpoint on NATS JetStream at nats:\/\/127\.0\.0\.1:4222, stream prefix redeliver-demo/);
      expect(existsSync(join(cwd, 'redeliver-demo.db'))).toBe(false);
      const [list, show] = nextLines(run.stdout);
      expect(list).toBe('REDELIVER_NATS_PREFIX=redeliver-demo npx redeliver errors list nats://127.0.0.1:4222');
      const key = /^REDELIVER_NATS_PREFIX=redeliver-demo npx redeliver errors show nats:\/\/127\.0\.0\.1:4222 (\d+)$/.exec(show!)?.[1];
      expect(key).toBeDefined();
      const shown = await cli(['errors', 'show', 'nats://127.0.0.1:4222', key!], { env });
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/message id\s+order-17\n/);

      const again = await demo(cwd, ['--messages', '40', '--transport', 'jetstream']);
      expect(again.status).toBe(0);
      expect(again.stdout).toContain('(replaced the NATS JetStream at nats://127.0.0.1:4222, stream prefix redeliver-demo of an earlier run)');
      const listed = await cli(['errors', 'list', 'nats://127.0.0.1:4222', '--json'], { env });
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout).total).toBe(2);
      expect(listed.stdout).toContain('"errorName": "DeserializationError"');
      expect(listed.stdout).toContain('"errorName": "ValidationError"');
    } finally {
      await deleteJetStreamPrefix(DEMO_NATS_PREFIX);
    }
  });

  it.skipIf(Boolean(nsqSkip))('runs on NSQ with --transport nsq, on the topics orders and error, and names the commands that reach it', async () => {
    const cwd = folder.path('nsq');
    mkdirSync(cwd);
    const http = new NsqdHttpApi(NSQD_HTTP);
    try {
      const run = await demo(cwd, ['--messages', '40', '--transport', 'nsq']);
      expect(run.stderr).toBe('');
      expect(run.status, run.stdout).toBe(0);
      expect(run.stdout).toMatch(/^redeliver demo: 40 orders through an endpoint on nsqd at 127\.0\.0\.1:4150, topics orders and error[\n ]/);
      expect(existsSync(join(cwd, 'redeliver-demo.db'))).toBe(false);
      expect((await http.topicStats('orders'))?.channels.map((c) => c.channel_name)).toEqual([DEMO_NSQ_CHANNEL]);
      const [list, show] = nextLines(run.stdout);
      expect(list).toBe('npx redeliver errors list nsq://127.0.0.1:4150');
      const key = /^npx redeliver errors show nsq:\/\/127\.0\.0\.1:4150 '([^']+)'$/.exec(show!)?.[1];
      expect(key).toMatch(/^order-17#[0-9a-f]{16}$/);
      const shown = await cli(['errors', 'show', 'nsq://127.0.0.1:4150', key!]);
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/message id\s+order-17\n/);

      const again = await demo(cwd, ['--messages', '40', '--transport', 'nsq']);
      expect(again.status).toBe(0);
      expect(again.stdout).toContain('(replaced the nsqd at 127.0.0.1:4150, topics orders and error of an earlier run)');
      const listed = await cli(['errors', 'list', 'nsq://127.0.0.1:4150', '--json']);
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout).total).toBe(2);
      expect(listed.stdout).toContain('"errorName": "DeserializationError"');
      expect(listed.stdout).toContain('"errorName": "ValidationError"');
    } finally {
      await http.deleteTopic('orders');
      await http.deleteTopic('error');
    }
  });

  it.skipIf(Boolean(rocketSkip))('runs on RocketMQ with --transport rocketmq, in topics and a group of its own, and names the commands that reach it', { timeout: 120_000 }, async () => {
    const cwd = folder.path('rocketmq');
    mkdirSync(cwd);
    const env = { REDELIVER_ROCKETMQ_GROUP: DEMO_ROCKETMQ.group };
    const errorArgs = ['--error-queue', DEMO_ROCKETMQ.errorQueue];
    const admin = new RocketMqAdmin(ROCKETMQ_NAMESRV, 'DefaultCluster', 1, 5_000);
    try {
      const run = await demo(cwd, ['--messages', '40', '--transport', 'rocketmq']);
      expect(run.stderr).toBe('');
      expect(run.status, run.stdout).toBe(0);
      expect(run.stdout).toMatch(/^redeliver demo: 40 orders through an endpoint on RocketMQ at 127\.0\.0\.1:8081 \(name server 127\.0\.0\.1:9876\), topics redeliver-demo-orders and redeliver-demo-error/);
      const [list, show, dashboard] = nextLines(run.stdout);
      expect(list).toBe('REDELIVER_ROCKETMQ_GROUP=redeliver-demo npx redeliver errors list rocketmq://127.0.0.1:8081 --error-queue redeliver-demo-error');
      expect(dashboard).toBe('REDELIVER_ROCKETMQ_GROUP=redeliver-demo npx redeliver dashboard rocketmq://127.0.0.1:8081 --error-queue redeliver-demo-error');
      const key = /^REDELIVER_ROCKETMQ_GROUP=redeliver-demo npx redeliver errors show rocketmq:\/\/127\.0\.0\.1:8081 (\S+) --error-queue redeliver-demo-error$/.exec(show!)?.[1];
      expect(key).toBeDefined();
      const shown = await cli(['errors', 'show', 'rocketmq://127.0.0.1:8081', key!, ...errorArgs], { env });
      expect(shown.code).toBe(0);
      expect(shown.stdout).toMatch(/message id\s+order-17\n/);

      const again = await demo(cwd, ['--messages', '40', '--transport', 'rocketmq']);
      expect(again.status).toBe(0);
      expect(again.stdout).toContain('of an earlier run)');
      const listed = await cli(['errors', 'list', 'rocketmq://127.0.0.1:8081', ...errorArgs, '--json'], { env });
      expect(listed.code).toBe(0);
      expect(JSON.parse(listed.stdout).total).toBe(2);
    } finally {
      for (const topic of [DEMO_ROCKETMQ.queue, DEMO_ROCKETMQ.errorQueue, `%REMOVED%${DEMO_ROCKETMQ.errorQueue}`, `%RETRY%${DEMO_ROCKETMQ.group}`, `%DLQ%${DEMO_ROCKETMQ.group}`]) {
        await admin.deleteTopic(topic).catch(() => undefined);
      }
      for (const group of [DEMO_ROCKETMQ.group, `${DEMO_ROCKETMQ.group}-operator`]) await admin.deleteGroup(group).catch(() => undefined);
    }
  });

  it('refuses an unknown --transport', async () => {
    const run = await demo(folder.path(''), ['--messages', '10', '--transport', 'kafka']);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/--transport.*kafka.*invalid.*sqlite, redis, jetstream, nsq/s);
  });
});
