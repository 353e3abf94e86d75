/**
 * The `errors` and `stats` commands against a Redis Cluster of the test's
 * own (three primaries, no replicas, on ports 7100-7199), through the
 * cluster targets an operator types: the seed nodes separated by commas,
 * or one seed with `?cluster=1`. A cluster that cannot be reached is an
 * error naming the target, not a wait. The demo runs on a cluster and
 * replaces its earlier run's keys there.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DEMO_REDIS_PREFIX, runDemo } from '../../src/cli/demo.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { redisClusterPerFile } from '../support/redis-cluster-per-file.js';
import { capture, cli, fillErrorQueue, waitFor } from './support.js';

const prefix = `cli-cluster-${randomUUID().slice(0, 8)}`;
const env = { REDELIVER_REDIS_PREFIX: prefix };
const queue = 'orders';
const errorQueue = 'error';
const errorArgs = ['--error-queue', errorQueue];
const cluster = redisClusterPerFile();

describe('redeliver errors and stats on a Redis Cluster', () => {
  it('lists, shows and deletes error-queue entries and reads depths through either cluster target', { timeout: 60_000 }, async () => {
    const seeds = `redis://${cluster().nodes.map((node) => `127.0.0.1:${node.port}`).join(',')}`;
    // A seed that does not hold the prefix's slot: the client finds the node that does.
    const owner = await cluster().primaryOf(`{${prefix}}:queues`);
    const other = cluster().nodes.find((node) => node.port !== owner)!.port;
    const oneSeed = `redis://127.0.0.1:${other}?cluster=1`;

    const transport = new RedisTransport({ url: seeds, keyPrefix: prefix, checkServer: false });
    try {
      await fillErrorQueue(transport, { timeout: 3, invalid: 2 }, queue, errorQueue);
      await waitFor(async () => (await transport.errorQueue.count(errorQueue)) === 5, 10_000, 'the error queue to hold 5');
    } finally {
      await transport.close();
    }

    for (const target of [seeds, oneSeed]) {
      const list = await cli(['errors', 'list', target, ...errorArgs, '--json'], { env });
      expect(list.code).toBe(0);
      const parsed = JSON.parse(list.stdout);
      expect(parsed.total).toBe(5);
      expect(parsed.groups.map((g: { errorName: string; count: number }) => [g.errorName, g.count])).toEqual([
        ['TimeoutError', 3],
        ['ValidationError', 2],
      ]);
      const stats = JSON.parse((await cli(['stats', target, '--json'], { env })).stdout);
      expect(stats.queues).toEqual([
        expect.objectContaining({ queue, kind: 'work', ready: 0, inFlight: 0, delayed: 0 }),
        expect.objectContaining({ queue: errorQueue, kind: 'error', ready: 5, inFlight: 0, delayed: 0 }),
      ]);
    }

    const keys = JSON.parse((await cli(['errors', 'list', oneSeed, ...errorArgs, '--json'], { env })).stdout).groups[0].keys as string[];
    const show = await cli(['errors', 'show', oneSeed, keys[0]!, ...errorArgs, '--json'], { env });
    expect(show.code).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ originalQueue: queue });
    const deleted = await cli(['errors', 'delete', seeds, keys[0]!, ...errorArgs], { env });
    expect(deleted.code).toBe(0);
    expect(JSON.parse((await cli(['errors', 'list', seeds, ...errorArgs, '--json'], { env })).stdout).total).toBe(4);
  });

  it('fails at once, naming the target, when no seed answers', async () => {
    const dead = 'redis://127.0.0.1:7198,127.0.0.1:7199';
    const started = Date.now();
    const run = await cli(['errors', 'list', dead, ...errorArgs], { env });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain(`cannot reach Redis at ${dead}`);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('refuses a cluster target it cannot use, with a usage error', async () => {
    const run = await cli(['errors', 'list', 'redis://127.0.0.1:7100,127.0.0.1:7101/3', ...errorArgs], { env });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('a cluster has only database 0');
  });

  it('runs the demo on a cluster, and a second run replaces the first one\'s keys', { timeout: 60_000 }, async () => {
    const url = `redis://127.0.0.1:${cluster().nodes[0]!.port}?cluster=1`;
    const demoEnv = { REDELIVER_REDIS_PREFIX: DEMO_REDIS_PREFIX };
    const totals: number[] = [];
    for (const run of [1, 2]) {
      const out = capture();
      await runDemo({ messages: 40, delayScale: 0.05, transport: 'redis', url, out: out as unknown as NodeJS.WriteStream });
      expect(out.text).toContain(`orders through an endpoint on Redis at ${url}, key prefix ${DEMO_REDIS_PREFIX}`);
      if (run === 2) expect(out.text).toContain('of an earlier run)');
      const list = await cli(['errors', 'list', url, '--json'], { env: demoEnv });
      expect(list.code).toBe(0);
      totals.push(JSON.parse(list.stdout).total);
    }
    // Each run dead-letters the same orders; the first run's entries are gone, not added to.
    expect(totals[0]).toBeGreaterThan(0);
    expect(totals[1]).toBe(totals[0]);
  });
});
