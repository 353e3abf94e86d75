/**
 * nsqjs's limits, read off nsqjs itself and off nsqd, beside what the
 * transport does around them, on nsqd servers of the test's own (an
 * nsqlookupd on 4360/4361, nsqd 1 on 4362/4363, nsqd 2 on 4364/4365):
 *
 * - the bare `Writer` never publishes again after nsqd restarts; the
 *   transport's publisher does;
 * - the bare `Reader` given nsqd directly reconnects only when its lookupd
 *   poll interval comes round; the transport's consumer reconnects within
 *   its `connectionBackoff`;
 * - pause/resume and setPrefetch never close a connection (nsqjs's
 *   `Reader.close()` cannot be undone): nsqd's client list stays the same;
 * - a second nsqd that appears in nsqlookupd after the consumer started is
 *   consumed from without a restart.
 */
import nsq from 'nsqjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../../src/transport/types.js';
import { NsqSubscription, NsqTransport } from '../../../src/transports/nsq/index.js';
import { NsqNodes, nsqNodeSkipReason } from '../../support/nsq-node.js';
import { channelClients, nsqdHttp, topicName, until } from './support.js';

const skip = nsqNodeSkipReason();
let nodes: NsqNodes;

beforeAll(async () => {
  if (!skip) nodes = await NsqNodes.start({ basePort: 4360, nodes: 2 });
}, 60_000);
afterAll(async () => {
  await nodes?.stop();
});

const body = () => new TextEncoder().encode('x');

describe.skipIf(Boolean(skip))("nsqjs's limits, and the transport around them", () => {
  it('after nsqd restarts, the bare Writer publishes nothing more; the transport publishes again', async () => {
    const topic = topicName('writer');
    const writer = new nsq.Writer('127.0.0.1', nodes.tcpPort(1));
    await new Promise<void>((resolve) => {
      writer.once('ready', () => resolve());
      writer.connect();
    });
    writer.on('error', () => undefined);
    const transport = new NsqTransport({ nsqd: [nodes.tcpAddress(1)], httpAddresses: { [nodes.tcpAddress(1)]: nodes.httpAddress(1) }, connectionBackoff: () => 100 });
    await transport.send(topic, { id: 'before', body: body(), headers: {} });
    await nodes.kill(1);
    await nodes.boot(1);
    await until('the transport to publish after the restart', async () => transport.send(topic, { id: 'after', body: body(), headers: {} }).then(() => true, () => false), 10_000);
    const bare = await new Promise<string>((resolve) => {
      const timer = setTimeout(() => resolve('no answer'), 3_000);
      try {
        writer.publish(topic, 'bare', (error?: Error) => {
          clearTimeout(timer);
          resolve(error ? `error: ${error.message}` : 'published');
        });
      } catch (error) {
        clearTimeout(timer);
        resolve(`threw: ${String(error)}`);
      }
    });
    expect(bare).not.toBe('published');
    const depth = (await nsqdHttp(nodes.httpAddress(1)).topicStats(topic))?.message_count;
    expect(depth).toBe(1); // 'after' only: the bare Writer's message never reached nsqd
    writer.close();
    await transport.close();
  }, 40_000);

  it('after nsqd restarts, the bare Reader given nsqd directly waits for its poll interval; the transport reconnects within its connectionBackoff', async () => {
    const topic = topicName('reader');
    const api = nsqdHttp(nodes.httpAddress(1));
    const transport = new NsqTransport({ nsqd: [nodes.tcpAddress(1)], httpAddresses: { [nodes.tcpAddress(1)]: nodes.httpAddress(1) }, connectionName: 'redeliver-reconnect', connectionBackoff: () => 100 });
    await transport.consume(topic, (d) => void d.ack(), { prefetch: 5 });
    const reader = new nsq.Reader(topic, 'redeliver', { nsqdTCPAddresses: [nodes.tcpAddress(1)], clientId: 'bare-reader', lookupdPollInterval: 20 });
    reader.on('message', (m) => m.finish());
    reader.on('error', () => undefined);
    reader.connect();
    const clients = async () => (await channelClients(api, topic).catch(() => [])).map((c) => c.client_id).sort();
    await until('both consumers on nsqd', async () => (await clients()).length === 2);
    await nodes.kill(1);
    await nodes.boot(1);
    const booted = Date.now();
    await until('the transport to subscribe again', async () => (await clients()).includes('redeliver-reconnect'), 5_000);
    expect(Date.now() - booted).toBeLessThan(2_000);
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await clients()).toEqual(['redeliver-reconnect']); // the bare Reader comes back only at its 20 s poll
    reader.close();
    await transport.close();
  }, 40_000);

  it('pause, resume and setPrefetch change RDY only: nsqd lists the same client connections throughout', async () => {
    const topic = topicName('rdy');
    const api = nsqdHttp(nodes.httpAddress(1));
    const transport = new NsqTransport({ nsqd: [nodes.tcpAddress(1)], httpAddresses: { [nodes.tcpAddress(1)]: nodes.httpAddress(1) }, connectionName: 'redeliver-rdy', connectionBackoff: () => 100 });
    const subscription = await transport.consume(topic, (d) => void d.ack(), { prefetch: 8 });
    const seen = async () => (await channelClients(api, topic)).map((c) => `${c.remote_address}:${c.ready_count}`);
    await until('RDY 8', async () => (await seen()).length === 1 && (await seen())[0]!.endsWith(':8'));
    const remote = (await seen())[0]!.split(':').slice(0, 2).join(':');
    const steps: [string, () => Promise<void>, number][] = [
      ['pause', () => subscription.pause(), 0],
      ['resume', () => subscription.resume(), 8],
      ['setPrefetch(1)', () => subscription.setPrefetch(1), 1],
      ['setPrefetch(3)', () => subscription.setPrefetch(3), 3],
    ];
    for (const [, step, rdy] of steps) {
      await step();
      await until(`RDY ${rdy}`, async () => (await seen()).join() === `${remote}:${rdy}`);
    }
    await transport.close();
  }, 30_000);

  it('a second nsqd that nsqlookupd lists after the consumer started is consumed from, without a restart', async () => {
    const topic = topicName('discover');
    await nodes.kill(2);
    const first = nodes.tcpAddress(1);
    const second = nodes.tcpAddress(2);
    await nsqdHttp(nodes.httpAddress(1)).createTopic(topic);
    const transport = new NsqTransport({ lookupd: [nodes.lookupdHttpAddress], lookupdPollIntervalMs: 200, connectionBackoff: () => 100 });
    const got: Delivery[] = [];
    const subscription = (await transport.consume(topic, (d) => {
      got.push(d);
      void d.ack();
    }, { prefetch: 4 })) as NsqSubscription;
    expect(subscription.addresses).toEqual([first]);
    await nodes.boot(2);
    await nsqdHttp(nodes.httpAddress(2)).publish(topic, new TextEncoder().encode('from the second nsqd'));
    await until('the second nsqd consumed from', () => subscription.addresses.includes(second), 10_000);
    await until('its message', () => got.some((d) => new TextDecoder().decode(d.body) === 'from the second nsqd'), 10_000);
    expect(subscription.addresses.sort()).toEqual([first, second].sort());
    await transport.close();
  }, 40_000);
});
