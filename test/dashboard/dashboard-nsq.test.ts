/**
 * `redeliver dashboard nsq://…` on a real nsqd: the dashboard opens the
 * target as the command does, groups the error topic, shows, deletes and
 * sends back entries; topics are named with a run token and deleted after.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { serveDashboard } from '../../src/cli/commands/dashboard.js';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { NsqdHttpApi } from '../../src/transports/nsq/http-api.js';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import { deleteTopics, NSQD_HTTP, NSQD_TCP, nsqSkipReason, scratchTopic } from '../transports/nsq/operations-fixtures.js';
import { bearer, csrfOf, operatorRequest, postHeaders, sendAll, type TestMessage, waitFor } from './support.js';

const skip = await nsqSkipReason();
const http = new NsqdHttpApi(NSQD_HTTP);
const queue = scratchTopic('dash');
const errorQueue = `${queue}.error`;
const stateDir = mkdtempSync(join(tmpdir(), 'redeliver-state-'));

afterAll(async () => {
  rmSync(stateDir, { recursive: true, force: true });
  if (!skip) await deleteTopics(http, [queue, errorQueue]);
});

const sink = () => new Writable({ write: (_chunk, _enc, done) => done() });

describe.skipIf(Boolean(skip))('dashboard on NSQ', () => {
  it('serves an nsq:// target: groups the error topic, shows and deletes an entry, sends a group back once, and the endpoint handles it', async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionName: 'redeliver-test-dashboard' });
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
    const token = 'nsq-dashboard-test-token-0123456789';
    const stop = new AbortController();
    let url = '';
    let onReady!: () => void;
    const ready = new Promise<void>((resolve) => (onReady = resolve));
    const serving = serveDashboard(
      `nsq://${NSQD_TCP}`,
      { port: 0, host: '127.0.0.1', token, errorQueue: [errorQueue], chartFeed: false },
      {
        out: sink(),
        err: sink(),
        signal: stop.signal,
        env: { REDELIVER_STATE_DIR: stateDir },
        onReady: (at) => {
          url = at;
          onReady();
        },
      },
    );
    const request = operatorRequest(() => token);
    try {
      await endpoint.start();
      await sendAll(transport, queue, [1, 2, 3, 4].map((n) => ({ n, fail: { name: 'RangeError', message: `amount ${n * 7} is over the limit` } })));
      await waitFor(() => endpoint.stats.deadLettered === 4, 20_000, 'four dead letters');
      await waitFor(async () => (await transport.errorQueue.count(errorQueue)) === 4, 10_000, 'the error queue to hold 4');
      await Promise.race([ready, serving]);
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);

      const { groups } = (await request(`${url}api/groups`)).json();
      expect(groups).toHaveLength(1);
      expect(groups[0]).toMatchObject({ errorQueue, count: 4, signature: { errorName: 'RangeError', message: 'amount <n> is over the limit' } });

      const page = (await request(`${url}api/entries?errorQueue=${errorQueue}&limit=2&offset=1`)).json();
      expect(page).toMatchObject({ total: 4, offset: 1 });
      expect(page.entries.map((e: { messageId: string }) => e.messageId)).toEqual(['msg-2', 'msg-3']);
      const key: string = page.entries[0].key;
      const entryUrl = `${url}api/entries/${errorQueue}/${encodeURIComponent(key)}`;
      const detail = await request(entryUrl);
      expect(detail.status).toBe(200);
      expect(detail.json()).toMatchObject({ key, messageId: 'msg-2' });

      const stats = (await request(`${url}api/stats`)).json();
      expect(stats.transport).toBe('nsq');
      expect(stats.queues).toContainEqual({ queue: errorQueue, kind: 'error', ready: 4, delayed: 0, inFlight: 0 });
      expect(stats.queues).toContainEqual(expect.objectContaining({ queue, kind: 'work', ready: 0 }));

      const csrf = await csrfOf(url, bearer(token));
      const removed = await request(`${url}api/delete`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue, key }) });
      expect(removed.json()).toEqual({ deleted: true });
      expect((await request(entryUrl)).status).toBe(404);

      poisoned = false;
      const retry = await request(`${url}api/retry`, { method: 'POST', headers: postHeaders(url, csrf), body: JSON.stringify({ errorQueue, group: groups[0].signature.id }) });
      expect(retry.json()).toEqual({ sent: 3, missing: 0, failed: 0 });
      await waitFor(() => handled.length === 3, 20_000, 'the replayed messages to be handled');
      expect(handled.sort()).toEqual(['msg-1', 'msg-3', 'msg-4']);
      expect((await request(`${url}api/groups`)).json().groups).toHaveLength(0);
    } finally {
      stop.abort();
      await serving;
      await endpoint.stop();
      await transport.close();
    }
  }, 60_000);
});
