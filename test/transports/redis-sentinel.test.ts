/**
 * The Redis transport on a Sentinel-aware ioredis client, against a
 * primary with two replicas and three Sentinels of the test's own (ports
 * 7210-7215): the consumer's and the settlement connection, duplicates of
 * the client, find the primary through the Sentinels too; after the
 * primary is killed -9, the consumer reads from the new one within 10 s,
 * every message confirmed with `waitReplicas: 1` is still there, and the
 * deliveries a consumer held when the primary died are taken over on the
 * new primary once their lease runs out.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../src/transport/types.js';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { MASTER_NAME, RedisReplicaSet } from '../support/redis-replica-set.js';
import { redisNodeSkipReason } from '../support/redis-node.js';

const skip = redisNodeSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const BASE_PORT = 7210;

async function waitFor(predicate: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!(await predicate())) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

describe.skipIf(Boolean(skip))('the Redis transport through Sentinel', () => {
  let set: RedisReplicaSet;
  const clients: Redis[] = [];

  beforeAll(async () => {
    set = await RedisReplicaSet.start({ basePort: BASE_PORT, replicas: 2, sentinels: 3 });
  }, 90_000);

  afterAll(async () => {
    for (const client of clients) client.disconnect();
    await set?.stop();
  }, 60_000);

  const sentinelClient = () => {
    const client = new Redis({ sentinels: set.sentinels, name: MASTER_NAME, connectionName: 'sentinel-test-app' });
    client.on('error', () => undefined);
    clients.push(client);
    return client;
  };

  it('follows a kill -9 failover: reads again within 10 s, loses nothing confirmed, takes over the dead primary\'s leases', async () => {
    const prefix = `sentinel-${process.pid}`;
    const open = () => new RedisTransport({ client: sentinelClient(), keyPrefix: prefix, checkServer: false, pollIntervalMs: 100, waitReplicas: 1 });
    const holder = open();
    const worker = open();
    const sent: string[] = [];
    const handled = new Map<string, number>();
    const handledAt: number[] = [];
    try {
      // A consumer that holds what it gets and never settles: its leases, on the primary about to die.
      const held: Delivery[] = [];
      for (let i = 0; i < 5; i++) await holder.send('q', { id: `held-${i}`, body: text('h'), headers: {} });
      await holder.consume('q', (d) => void held.push(d), { prefetch: 5, leaseMs: 2_000 });
      await waitFor(() => held.length === 5, 10_000, 'the holder to lease 5');
      await holder.close();
      // The worker handles one message in three only after a retry.
      await worker.consume(
        'q',
        (d) => {
          const n = Number(d.id.slice(2));
          if (d.id.startsWith('m-') && n % 3 === 0 && d.deliveryCount === 1 && d.headers['retried'] !== '1') void d.retryLater(200, { retried: '1' }).catch(() => undefined);
          else void d.ack().then(() => {
            handled.set(d.id, (handled.get(d.id) ?? 0) + 1);
            handledAt.push(Date.now());
          }, () => undefined);
        },
        { prefetch: 10, leaseMs: 2_000 },
      );
      const primary = await set.primaryPort();
      let stopSending = false;
      const sender = (async () => {
        for (let i = 0; !stopSending; i++) {
          const id = `m-${i}`;
          // A send that rejects (the primary went away, or the replicas fell short) may still be stored: tried again, it may be a duplicate.
          for (;;) {
            try {
              await worker.send('q', { id, body: text(String(i)), headers: {} });
              break;
            } catch {
              await sleep(100);
            }
          }
          sent.push(id);
          await sleep(5);
        }
      })();
      await waitFor(() => handled.size >= 100, 20_000, '100 handled before the kill');
      await set.kill9(primary);
      const killedAt = Date.now();
      const next = await set.newPrimary(primary);
      expect(next).not.toBe(primary);
      await waitFor(() => handledAt.some((at) => at > killedAt + 200), 10_000, 'a message handled after the failover');
      const backAfterMs = handledAt.find((at) => at > killedAt + 200)! - killedAt;
      expect(backAfterMs).toBeLessThan(10_000);
      console.log(`failover: primary ${primary} -> ${next}, handling again ${backAfterMs} ms after the kill`);
      await waitFor(() => sent.length >= 300, 30_000, '300 sent');
      stopSending = true;
      await sender;
      await waitFor(() => sent.every((id) => handled.has(id)), 30_000, 'every confirmed send handled');
      // The holder's five, leased on the dead primary, taken over on the new one.
      await waitFor(() => [0, 1, 2, 3, 4].every((i) => handled.has(`held-${i}`)), 15_000, "the dead primary's leases taken over");
      expect(sent.filter((id) => !handled.has(id))).toEqual([]);
    } finally {
      await worker.close();
      await holder.close();
    }
  }, 120_000);
});
