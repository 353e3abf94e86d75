/**
 * The Redis transport while its server cannot be reached (a proxy in front
 * of a `redis-server` of the test's own stops accepting connections): a
 * pause, an endpoint's stop and the transport's close end on time instead of
 * waiting for a blocking read queued in ioredis until the server is back.
 * Wall time with wide margins: the timers are ioredis's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Endpoint } from '../../src/endpoint/endpoint.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { RedisNode, redisNodeSkipReason } from '../support/redis-node.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const skip = redisNodeSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves how long `work` took, or rejects once it took longer than `limitMs`. */
async function within(limitMs: number, work: Promise<unknown>, what: string): Promise<number> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} still pending after ${limitMs} ms`)), limitMs);
  });
  try {
    await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
  return Date.now() - started;
}

describe.skipIf(Boolean(skip))('the Redis transport while the server is unreachable', () => {
  let node: RedisNode;

  beforeAll(async () => {
    node = await RedisNode.start();
  }, 60_000);

  afterAll(async () => {
    await node?.stop();
  }, 60_000);

  /** A transport through a proxy of its own; resolves both. */
  async function reachable(keyPrefix: string) {
    const proxy = await TcpProxy.start(node.port);
    const transport = new RedisTransport({ url: `redis://127.0.0.1:${proxy.port}`, keyPrefix, checkServer: false, pollIntervalMs: 200, reconnect: () => 200 });
    return { proxy, transport };
  }

  it('an endpoint stops within its timeout, and the transport closes, during an outage', async () => {
    const { proxy, transport } = await reachable('outage-stop');
    const handled: string[] = [];
    const endpoint = new Endpoint({ name: 'q', transport, handler: async (_body, ctx) => void handled.push(ctx.messageId) });
    await endpoint.start();
    await transport.send('q', { id: 'm', body: text('1'), headers: {} });
    while (handled.length === 0) await sleep(10);
    await proxy.close();
    // Long enough for the consumer's next blocking read to be queued in ioredis.
    await sleep(500);
    expect(await within(6_000, endpoint.stop({ timeoutMs: 1_000 }), 'stop({ timeoutMs: 1000 })')).toBeLessThan(6_000);
    expect(await within(6_000, transport.close(), 'transport.close()')).toBeLessThan(6_000);
  }, 30_000);

  it('a pause resolves, and a close after it, during an outage', async () => {
    const { proxy, transport } = await reachable('outage-pause');
    const sub = await transport.consume('q', () => undefined, { prefetch: 1 });
    await sleep(300);
    await proxy.close();
    await sleep(500);
    await within(6_000, sub.pause(), 'pause()');
    await within(6_000, transport.close(), 'transport.close()');
  }, 30_000);
});
