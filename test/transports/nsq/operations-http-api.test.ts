/**
 * The nsqd and nsqlookupd HTTP clients against the real nodes: stats of
 * topics and channels, create/empty/pause/delete, configuration, discovery,
 * and the errors that name the node.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NsqdHttpApi, NsqHttpError, NsqLookupdHttpApi, producerAddresses } from '../../../src/transports/nsq/http-api.js';
import { deleteTopics, NSQD_HTTP, NSQD_TCP, NSQLOOKUPD_HTTP, nsqSkipReason, scratchTopic, untilDepth } from './operations-fixtures.js';

const skip = await nsqSkipReason();
const text = (s: string) => new TextEncoder().encode(s);

describe.skipIf(Boolean(skip))('nsqd HTTP API client', () => {
  const api = new NsqdHttpApi(NSQD_HTTP);
  const made = new Set<string>();
  const topic = (label: string) => {
    const name = scratchTopic(label);
    made.add(name);
    return name;
  };

  afterEach(async () => {
    await deleteTopics(api, made);
    made.clear();
  });

  it('pings and reads /info', async () => {
    await api.ping();
    const info = await api.info();
    expect(info.version).toMatch(/^1\./);
    expect(`127.0.0.1:${info.tcp_port}`).toBe(NSQD_TCP);
    expect(api.address).toBe(NSQD_HTTP);
  });

  it('counts a channel: waiting, deferred, and none for unknown topics or channels', async () => {
    const t = topic('stats');
    expect(await api.topicStats(t)).toBeUndefined();
    await api.createChannel(t, 'ops');
    await api.publish(t, text('one'));
    await api.publish(t, text('two'));
    await api.publish(t, text('later'), { deferMs: 60_000 });
    await untilDepth(api, t, 'ops', 2, 1);
    const channel = await api.channelStats(t, 'ops');
    expect(channel).toMatchObject({ channel_name: 'ops', depth: 2, deferred_count: 1, in_flight_count: 0, clients: [] });
    expect(await api.channelStats(t, 'other')).toBeUndefined();
    const topicStats = await api.topicStats(t);
    expect(topicStats?.message_count).toBe(3);
    expect(topicStats?.channels.map((c) => c.channel_name)).toEqual(['ops']);
  });

  it('empties, pauses and deletes channels and topics', async () => {
    const t = topic('life');
    await api.createChannel(t, 'a');
    await api.createChannel(t, 'b');
    await api.publish(t, text('x'));
    await untilDepth(api, t, 'a', 1);
    await untilDepth(api, t, 'b', 1);
    await api.emptyChannel(t, 'a');
    expect((await api.channelStats(t, 'a'))?.depth).toBe(0);
    expect((await api.channelStats(t, 'b'))?.depth).toBe(1);
    await api.pauseChannel(t, 'b');
    expect((await api.channelStats(t, 'b'))?.paused).toBe(true);
    await api.unpauseChannel(t, 'b');
    expect((await api.channelStats(t, 'b'))?.paused).toBe(false);
    await api.pauseTopic(t);
    expect((await api.topicStats(t))?.paused).toBe(true);
    await api.unpauseTopic(t);
    expect(await api.deleteChannel(t, 'a')).toBe(true);
    expect(await api.deleteChannel(t, 'a')).toBe(false);
    expect((await api.topicStats(t))?.channels.map((c) => c.channel_name)).toEqual(['b']);
    expect(await api.deleteTopic(t)).toBe(true);
    expect(await api.deleteTopic(t)).toBe(false);
    expect(await api.topicStats(t)).toBeUndefined();
  });

  it('reads durations in milliseconds and sizes from /config', async () => {
    expect(await api.durationMs('max_req_timeout')).toBe(3_600_000);
    expect(await api.durationMs('msg_timeout')).toBe(60_000);
    expect(await api.durationMs('max_msg_timeout')).toBeGreaterThanOrEqual(60_000);
    expect(await api.numberOption('max_msg_size')).toBeGreaterThan(0);
  });

  it("refuses a bad topic name with nsqd's reason and the address", async () => {
    const error = await api.createTopic('bad name').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NsqHttpError);
    expect(error).toMatchObject({ status: 400, reason: 'INVALID_TOPIC', address: NSQD_HTTP });
    expect((error as Error).message).toContain(`POST /topic/create on ${NSQD_HTTP}`);
    const option = await api.config('no_such_option').catch((e: unknown) => e);
    expect(option).toMatchObject({ status: 400, reason: 'INVALID_OPTION' });
  });
});

describe.skipIf(Boolean(skip))('nsqlookupd HTTP API client', () => {
  const api = new NsqdHttpApi(NSQD_HTTP);
  const lookupd = new NsqLookupdHttpApi(NSQLOOKUPD_HTTP);
  const t = scratchTopic('lookup');

  afterAll(() => deleteTopics(api, [t]));

  it('lists the nsqd and finds the nodes of a topic', async () => {
    const nodes = await lookupd.nodes();
    expect(nodes.map((n) => producerAddresses(n).tcp)).toContain(NSQD_TCP);
    expect(await lookupd.lookup(t)).toEqual([]);
    await api.createTopic(t);
    // nsqd registers a new topic with nsqlookupd over its TCP connection; poll until it shows.
    let found: string[] = [];
    const deadline = Date.now() + 5_000;
    while (found.length === 0 && Date.now() < deadline) {
      found = (await lookupd.lookup(t)).map((p) => producerAddresses(p).http);
      if (found.length === 0) await new Promise((r) => setTimeout(r, 10));
    }
    expect(found).toEqual([NSQD_HTTP]);
  });
});

describe('HTTP client errors', () => {
  let server: Server;
  let port: number;
  let seen: { url?: string; authorization?: string } = {};
  const hang: Array<() => void> = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen = { url: req.url ?? '', authorization: req.headers.authorization ?? '' };
      if (req.url?.startsWith('/ping')) return void hang.push(() => res.end('OK'));
      res.statusCode = 500;
      res.end('{"message":"EXITING"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    for (const release of hang) release();
    await new Promise((r) => server.close(r));
  });

  it('times out naming the node, never its credentials', async () => {
    const api = new NsqdHttpApi(`http://admin:s3cret@127.0.0.1:${port}`, { timeoutMs: 50 });
    const error = (await api.ping().catch((e: unknown) => e)) as NsqHttpError;
    expect(error.message).toBe(`nsq: GET /ping on 127.0.0.1:${port} failed: no answer within 50 ms`);
    expect(error.message).not.toContain('s3cret');
    expect(seen.authorization).toBe(`Basic ${Buffer.from('admin:s3cret').toString('base64')}`);
  });

  it("reports the status and nsqd's reason", async () => {
    const error = (await new NsqdHttpApi(`127.0.0.1:${port}`).emptyTopic('x').catch((e: unknown) => e)) as NsqHttpError;
    expect(error).toMatchObject({ status: 500, reason: 'EXITING' });
    expect(seen.url).toBe('/topic/empty?topic=x');
  });

  it('names an unreachable node', async () => {
    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const free = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const error = (await new NsqdHttpApi(`127.0.0.1:${free}`).ping().catch((e: unknown) => e)) as NsqHttpError;
    expect(error).toBeInstanceOf(NsqHttpError);
    expect(error.message).toBe(`nsq: GET /ping on 127.0.0.1:${free} failed: fetch failed (ECONNREFUSED)`);
  });
});
