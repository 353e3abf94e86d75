/**
 * The duplicate window on the shared nsqd: a retry whose copy nsqd
 * confirmed but whose FIN could not follow (the connection dropped
 * meanwhile) is counted in `stats.duplicateWindow`, emitted and logged, and
 * the message then arrives twice, never zero times.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Logger } from '../../../src/logger.js';
import type { Delivery } from '../../../src/transport/types.js';
import { DeliveryGoneError, NsqSubscription, NsqTransport, type NsqTransportEvents } from '../../../src/transports/nsq/index.js';
import { deleteNsqTopics, nsqdHttp, nsqSkipReason, NSQD_TCP, topicName, until } from './support.js';

const skip = await nsqSkipReason();
const made: string[] = [];
afterAll(async () => {
  if (!skip) await deleteNsqTopics(nsqdHttp(), (name) => made.includes(name));
});

describe.skipIf(Boolean(skip))('nsq: the duplicate window', () => {
  it('a copy confirmed whose FIN could not follow is counted, emitted and logged; both copies arrive', async () => {
    const warnings: string[] = [];
    const logger: Logger = { info: () => undefined, error: () => undefined, warn: (_f, m) => warnings.push(m) };
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionBackoff: () => 50, logger });
    const events: NsqTransportEvents['duplicateWindow'][] = [];
    transport.on('duplicateWindow', (e) => events.push(e));
    const queue = topicName('dup');
    made.push(queue);
    const got: Delivery[] = [];
    const listener = (d: Delivery) => {
      got.push(d);
      if (got.length > 1) void d.ack();
    };
    const subscription = (await transport.consume(queue, listener, { prefetch: 5, leaseMs: 1_000 })) as NsqSubscription;
    await transport.send(queue, { id: 'twice', body: new TextEncoder().encode('b'), headers: { n: '0' } });
    await until('the first delivery', () => got.length === 1);
    const retry = got[0]!.retryLater(0, { n: '1' });
    // The consuming connection drops while the copy is on its way (the publishing connection is another).
    expect(subscription.cut()).toBe(1);
    await expect(retry).rejects.toBeInstanceOf(DeliveryGoneError);
    expect(transport.stats.duplicateWindow).toBe(1);
    expect(events).toEqual([{ id: 'twice', queue, kind: 'retry' }]);
    expect(warnings.filter((w) => w.includes('exists twice'))).toHaveLength(1);
    // The copy, and the original once its lease (1 s) ran out in nsqd.
    await until('the copy and the original again', () => got.length === 3, 10_000);
    const again = got.slice(1);
    expect(again.map((d) => d.id)).toEqual(['twice', 'twice']);
    expect(again.map((d) => d.headers['n']).sort()).toEqual(['0', '1']);
    await transport.close();
  }, 20_000);
});
