/**
 * A JetStream consumer whose connection holds back what the server sends
 * (a link that stalls and recovers without breaking, as a network cut that
 * heals): a message delivered into the stall arrives after the server's
 * `ack_wait` ran out and the message went to another consumer, and a `+WPI`
 * whose confirmation comes back that late may not have kept the lease.
 * Neither may count as a lease this consumer still holds.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { isDeliveryGone } from '../../src/transport/delivery-gone.js';
import type { Delivery } from '../../src/transport/types.js';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';
import { recordingLogger } from '../support/recording-logger.js';
import { until } from '../support/own-servers.js';
import { TcpProxy } from '../support/tcp-proxy.js';

const skip = await natsSkipReason();
const text = (s: string) => new TextEncoder().encode(s);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LEASE_MS = 3_000;

describe.skipIf(Boolean(skip))('JetStream: replies held back past the lease', () => {
  const prefix = jetStreamPrefix('held');
  const cleanups: (() => Promise<unknown>)[] = [];
  let n = 0;
  const open = (servers: string, logger = recordingLogger()) => {
    const t = new JetStreamTransport({ servers, prefix, connectionName: `${prefix}-${++n}`, logger });
    cleanups.push(() => t.close());
    return { t, logger };
  };
  const proxied = async () => {
    const proxy = await TcpProxy.start(Number(new URL(NATS_URL).port || 4222));
    cleanups.push(() => proxy.close());
    return { proxy, ...open(`nats://127.0.0.1:${proxy.port}`) };
  };
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  afterAll(() => deleteJetStreamPrefix(prefix));

  it('a delivery that reaches its consumer after its lease ran out is not handed out; the other consumer has the message', { timeout: 30_000 }, async () => {
    const q = `late-${n}`;
    const { proxy, t: held, logger } = await proxied();
    const heldGot: Delivery[] = [];
    await held.consume(q, (d) => void heldGot.push(d), { prefetch: 1, leaseMs: LEASE_MS });
    // Its pull request still reaches the server: only what the server sends is held.
    proxy.holdReplies();
    const { t: other } = open(NATS_URL);
    await other.send(q, { id: 'late-1', body: text('x'), headers: {} });
    // The server delivers it into the stall, then gives it to the other consumer once its ack_wait ran out.
    await sleep(LEASE_MS + 500);
    const otherGot: Delivery[] = [];
    await other.consume(q, (d) => void otherGot.push(d), { prefetch: 1, leaseMs: LEASE_MS });
    await until('the redelivery to the other consumer', 10_000, () => otherGot.length === 1, 20);
    expect(otherGot[0]!.deliveryCount).toBeGreaterThanOrEqual(2);
    proxy.releaseReplies();
    const dropped = () => logger.lines.some((l) => l.message.includes('arrived after its lease ran out'));
    await until('the held delivery to arrive', 10_000, () => dropped() || heldGot.some((d) => d.deliveryCount === 1), 20);
    expect(heldGot.filter((d) => d.deliveryCount === 1)).toEqual([]);
    expect(dropped()).toBe(true);
    await otherGot[0]!.ack();
  });

  it('a +WPI confirmed only after the lease ran out here does not extend it', { timeout: 30_000 }, async () => {
    const q = `wpi-${n}`;
    const { proxy, t } = await proxied();
    await t.send(q, { id: 'wpi-1', body: text('x'), headers: {} });
    const got: Delivery[] = [];
    await t.consume(q, (d) => void got.push(d), { prefetch: 1, leaseMs: LEASE_MS });
    await until('the delivery', 10_000, () => got.length === 1, 20);
    proxy.holdReplies();
    const extending = got[0]!.extendLease!(10_000).then(
      () => 'extended',
      (error: unknown) => (isDeliveryGone(error) ? 'gone' : `failed: ${String(error)}`),
    );
    await sleep(LEASE_MS);
    expect(got[0]!.leaseExpired!()).toBe(true);
    proxy.releaseReplies();
    expect(await extending).toBe('gone');
    expect(got[0]!.leaseExpired!()).toBe(true);
  });
});
