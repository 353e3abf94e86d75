/**
 * A Redis consumer whose connection holds back what the server sends (a
 * link that stalls and recovers without breaking): an entry its blocking
 * read took arrives after the entry's lease ran out on the server and
 * another consumer took it over. It must not count as a lease this
 * consumer still holds: it is not handed out.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/transport/types.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { until } from '../support/own-servers.js';
import { recordingLogger } from '../support/recording-logger.js';
import { RedisNode, redisNodeSkipReason } from '../support/redis-node.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const skip = redisNodeSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 3_000;

describe.skipIf(Boolean(skip))('Redis: replies held back past the lease', () => {
  let node: RedisNode;
  const cleanups: (() => Promise<unknown>)[] = [];
  beforeAll(async () => {
    node = await RedisNode.start();
  }, 60_000);
  afterAll(async () => {
    await node?.stop();
  }, 60_000);
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  const open = (port: number, logger = recordingLogger()) => {
    const t = new RedisTransport({ url: `redis://127.0.0.1:${port}`, keyPrefix: 'held', pollIntervalMs: 1_000, logger });
    cleanups.push(() => t.close());
    return { t, logger };
  };

  it('an entry whose read reply reaches its consumer after the lease ran out is not handed out; the other consumer takes it over', { timeout: 30_000 }, async () => {
    const proxy = await TcpProxy.start(node.port);
    cleanups.push(() => proxy.close());
    const { t: held, logger } = open(proxy.port);
    const heldGot: Delivery[] = [];
    await held.consume('q', (d) => void heldGot.push(d), { prefetch: 1, leaseMs: LEASE_MS });
    // Its blocking read is on the server before the link stalls.
    const blockedInRead = async () => String(await node.command('CLIENT', 'LIST')).split('\n').some((line) => / flags=b /.test(line) && / cmd=xreadgroup /.test(line));
    await until('the blocking read on the server', 10_000, blockedInRead, 20);
    proxy.holdReplies();
    const { t: other } = open(node.port);
    await other.send('q', { id: 'late-1', body: text('x'), headers: {} });
    // The held consumer's read took the entry; once its lease ran out on the server, the other consumer takes it over.
    await sleep(LEASE_MS + 200);
    const otherGot: Delivery[] = [];
    await other.consume('q', (d) => void otherGot.push(d), { prefetch: 1, leaseMs: LEASE_MS });
    await until('the takeover by the other consumer', 10_000, () => otherGot.length === 1, 20);
    expect(otherGot[0]!.deliveryCount).toBe(2);
    proxy.releaseReplies();
    const dropped = () => logger.lines.some((l) => l.message.includes('arrived after its lease ran out'));
    await until('the held reply to arrive', 10_000, () => dropped() || heldGot.length > 0, 20);
    expect(heldGot).toEqual([]);
    expect(dropped()).toBe(true);
    await otherGot[0]!.ack();
  });
});
