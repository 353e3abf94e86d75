/** The dashboard's API on a real Redis, under a key prefix of its own. */
import { describe, expect, it } from 'vitest';
import { createDashboard } from '../../src/dashboard/index.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { REDIS_URL, redisSkipReason } from '../support/brokers.js';
import { redisScratch } from '../support/redis-scratch.js';
import { bearer, csrfOf, operatorRequest, postHeaders, sendAll, type TestMessage, waitFor } from './support.js';

const skip = await redisSkipReason();

describe.skipIf(Boolean(skip))('dashboard on Redis', () => {
  it('groups the error queue, shows and deletes an entry, sends a group back once, and the endpoint handles it', async () => {
    const scratch = redisScratch('dash');
    const queue = 'orders';
    const errorQueue = 'error';
    const transport = new RedisTransport({ url: REDIS_URL, keyPrefix: scratch.prefix, connectionName: scratch.connectionName, checkServer: false });
    let poisoned = true;
    const handled: string[] = [];
    const endpoint = new Endpoint<TestMessage>({
      name: queue,
      transport,
      recoverability: { immediateRetries: 0, delayedRetries: 0, errorQueue },
      handler: (m, ctx) => {
        if (m.fail && poisoned) throw new RangeError(m.fail.message);
        handled.push(ctx.messageId);
      },
    });
    const dashboard = await createDashboard({ transport, errorQueues: [errorQueue] });
    const request = operatorRequest(() => dashboard.token);
    try {
      await endpoint.start();
      await sendAll(transport, queue, [1, 2, 3, 4].map((n) => ({ n, fail: { name: 'RangeError', message: `amount ${n * 7} is over the limit` } })));
      await waitFor(() => endpoint.stats.deadLettered === 4, 20_000, 'four dead letters');
      await waitFor(async () => (await transport.errorQueue.count(errorQueue)) === 4, 10_000, 'the error queue to hold 4');

      const url = dashboard.url;
      const { groups } = (await request(`${url}api/groups`)).json();
      expect(groups).toHaveLength(1);
      expect(groups[0]).toMatchObject({ errorQueue, count: 4, signature: { errorName: 'RangeError', message: 'amount <n> is over the limit' } });

      const page = (await request(`${url}api/entries?errorQueue=${errorQueue}&limit=2&offset=1`)).json();
      expect(page).toMatchObject({ total: 4, offset: 1 });
      expect(page.entries).toHaveLength(2);
      const key: string = page.entries[0].key;
      expect(key).toMatch(/^\d+-\d+$/);
      const detail = await request(`${url}api/entries/${errorQueue}/${key}`);
      expect(detail.status).toBe(200);
      expect(detail.json()).toMatchObject({ key, messageId: 'msg-2' });

      const stats = (await request(`${url}api/stats`)).json();
      expect(stats.transport).toBe('redis');
      expect(stats.queues).toContainEqual({ queue: errorQueue, kind: 'error', ready: 4, delayed: 0, inFlight: 0 });
      expect(stats.queues).toContainEqual(expect.objectContaining({ queue, kind: 'work', ready: 0 }));

      const csrf = await csrfOf(url, bearer(dashboard.token));
      const removed = await request(`${url}api/delete`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue, key }) });
      expect(removed.json()).toEqual({ deleted: true });
      expect((await request(`${url}api/entries/${errorQueue}/${key}`)).status).toBe(404);

      poisoned = false;
      const retry = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue, group: groups[0].signature.id }) });
      expect(retry.json()).toEqual({ sent: 3, missing: 0, failed: 0 });
      await waitFor(() => handled.length === 3, 20_000, 'the replayed messages to be handled');
      expect(handled.sort()).toEqual(['msg-1', 'msg-3', 'msg-4']);
      expect((await request(`${url}api/groups`)).json().groups).toHaveLength(0);
    } finally {
      await dashboard.close();
      await endpoint.stop();
      await transport.close();
      await scratch.cleanup();
    }
  }, 60_000);
});
