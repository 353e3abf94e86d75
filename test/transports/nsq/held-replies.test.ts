/**
 * An NSQ consumer whose connection holds back what nsqd sends (a link that
 * stalls and recovers without breaking, as a network cut that heals): a
 * message nsqd delivered into the stall arrives after nsqd's `msg_timeout`
 * ran out and the message went to another consumer.
 *
 * - With lease marks (`leaseMarkMs`), the late delivery's lease counts from
 *   the last mark answered before it, sent before the stall: it arrives
 *   with its lease over and is dropped unhandled, said in a log line.
 * - Without them (the default), its lease counts from its arrival: it is
 *   handed out while the other consumer holds the message. This is the
 *   limit docs/nsq.md states.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Delivery } from '../../../src/transport/types.js';
import { NsqTransport } from '../../../src/transports/nsq/index.js';
import { recordingLogger } from '../../support/recording-logger.js';
import { TcpProxy } from '../../support/tcp-proxy.js';
import { channelClients, deleteNsqTopics, NSQD_HTTP, NSQD_TCP, nsqdHttp, nsqSkipReason, topicName, until } from './support.js';

const skip = await nsqSkipReason();
const LEASE_MS = 1_000;

describe.skipIf(Boolean(skip))('NSQ: deliveries held back past the lease', () => {
  const api = nsqdHttp();
  const cleanups: (() => Promise<unknown>)[] = [];
  const topics: string[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await deleteNsqTopics(api, (name) => topics.includes(name));
  });

  const open = (name: string, options: { nsqd: string; leaseMarkMs?: number }) => {
    const logger = recordingLogger();
    const t = new NsqTransport({ nsqd: [options.nsqd], httpAddresses: { [options.nsqd]: NSQD_HTTP }, connectionName: name, leaseMarkMs: options.leaseMarkMs, logger });
    cleanups.push(() => t.close());
    return { t, logger };
  };

  /**
   * A consumer through a stalled proxy receives the one message, the other
   * consumer gets it once nsqd's lease ran out, then the stall ends.
   * Returns what the held consumer was handed and its log.
   */
  async function lateDelivery(label: string, leaseMarkMs: number | undefined) {
    const q = topicName(label);
    topics.push(q);
    const proxy = await TcpProxy.start(Number(NSQD_TCP.split(':')[1]));
    cleanups.push(() => proxy.close());
    const heldName = `${q}-held`;
    const { t: held, logger } = open(heldName, { nsqd: `127.0.0.1:${proxy.port}`, leaseMarkMs });
    const heldGot: Delivery[] = [];
    const heldSubscription = await held.consume(q, (d) => void heldGot.push(d), { prefetch: 1, leaseMs: LEASE_MS });
    const heldClient = async () => (await channelClients(api, q)).find((c) => c.client_id === heldName);
    await until('the held consumer at RDY 1', async () => (await heldClient())?.ready_count === 1);
    // What the consumer sends still reaches nsqd (RDY, the marks); only what nsqd sends is held.
    proxy.holdReplies();
    const { t: other } = open(`${q}-other`, { nsqd: NSQD_TCP });
    await other.send(q, { id: 'late-1', body: new TextEncoder().encode('x'), headers: {} });
    await until('the message in flight to the held consumer', async () => (await heldClient())?.in_flight_count === 1);
    // RDY 0, so that nsqd gives the message out again to the other consumer only.
    await heldSubscription.pause();
    await until('the held consumer at RDY 0', async () => (await heldClient())?.ready_count === 0);
    const otherGot: Delivery[] = [];
    await other.consume(q, (d) => void otherGot.push(d), { prefetch: 1, leaseMs: 60_000 });
    await until('the redelivery to the other consumer', () => otherGot.length === 1);
    expect(otherGot[0]!.deliveryCount).toBe(2);
    await heldSubscription.resume();
    proxy.releaseReplies();
    const dropped = () => logger.lines.some((l) => l.message.includes('after its lease ran out'));
    await until('the held delivery to arrive', () => dropped() || heldGot.length > 0);
    await otherGot[0]!.ack();
    return { heldGot, logger, dropped: dropped() };
  }

  it('with lease marks, a delivery that reaches its consumer after its lease ran out is dropped, not handed out beside the redelivery', { timeout: 30_000 }, async () => {
    const { heldGot, logger, dropped } = await lateDelivery('held-marks', 100);
    expect(heldGot).toEqual([]);
    expect(dropped).toBe(true);
    // nsqd's answers to the marks are taken as such, not logged as errors.
    expect(logger.lines.filter((l) => l.message.includes('E_FIN_FAILED'))).toEqual([]);
  });

  it('without lease marks, the lease counts from the arrival: the late delivery is handed out while the other consumer holds the message', { timeout: 30_000 }, async () => {
    const { heldGot, dropped } = await lateDelivery('held-plain', undefined);
    expect(dropped).toBe(false);
    expect(heldGot.map((d) => d.deliveryCount)).toEqual([1]);
    expect(heldGot[0]!.leaseExpired!()).toBe(false);
  });
});
