/**
 * RDY across several nsqd, read off each nsqd's `/stats` (the consumer
 * connection's `ready_count`), never off the transport's own state, on nsqd
 * servers of the test's own: three on 4370-4377 (nsqlookupd on 4370/4371),
 * and one started with `--max-rdy-count=3` on 4378-4381.
 *
 * - the prefetch is split across the connections: 10 over 2 nodes is 5 + 5;
 * - a prefetch below the number of connections gives RDY 1 in turn: with
 *   prefetch 1 over 3 nodes, one node at a time has RDY 1, and every node's
 *   messages are consumed;
 * - no connection is asked for more than its nsqd's `--max-rdy-count`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Delivery } from '../../../src/transport/types.js';
import { NsqTransport } from '../../../src/transports/nsq/index.js';
import { NsqNodes, nsqNodeSkipReason } from '../../support/nsq-node.js';
import { channelClients, nsqdHttp, topicName, until } from './support.js';

const skip = nsqNodeSkipReason();
let three: NsqNodes;
let capped: NsqNodes;

beforeAll(async () => {
  if (skip) return;
  [three, capped] = await Promise.all([NsqNodes.start({ basePort: 4370, nodes: 3 }), NsqNodes.start({ basePort: 4378, nodes: 1, maxRdyCount: 3 })]);
}, 60_000);
afterAll(async () => {
  await Promise.all([three?.stop(), capped?.stop()]);
});

interface Node {
  readonly tcp: string;
  readonly http: string;
}

function nodesOf(cluster: NsqNodes, ...indexes: number[]): Node[] {
  return indexes.map((i) => ({ tcp: cluster.tcpAddress(i), http: cluster.httpAddress(i) }));
}

function transportOn(nodes: Node[], rdyRotateMs = 5_000): NsqTransport {
  return new NsqTransport({ nsqd: nodes.map((n) => n.tcp), httpAddresses: Object.fromEntries(nodes.map((n) => [n.tcp, n.http])), connectionBackoff: () => 100, rdyRotateMs });
}

/** The `ready_count` of each node's one consumer connection (undefined while it has none). */
async function readyCounts(nodes: Node[], topic: string): Promise<(number | undefined)[]> {
  return Promise.all(
    nodes.map(async (n) => {
      const clients = await channelClients(nsqdHttp(n.http), topic);
      return clients.length === 1 ? clients[0]!.ready_count : undefined;
    }),
  );
}

describe.skipIf(Boolean(skip))('RDY across several nsqd', () => {
  it('prefetch 10 over 2 nodes: RDY 5 on each', async () => {
    const nodes = nodesOf(three, 1, 2);
    const topic = topicName('rdy-split');
    const transport = transportOn(nodes);
    await transport.consume(topic, (d) => void d.ack(), { prefetch: 10 });
    await until('RDY 5 + 5 in /stats', async () => JSON.stringify(await readyCounts(nodes, topic)) === '[5,5]');
    await transport.close();
  }, 20_000);

  it('prefetch 1 over 3 nodes: RDY 1 on one node at a time, passed on, and every node consumed from', async () => {
    const nodes = nodesOf(three, 1, 2, 3);
    const topic = topicName('rdy-rotate');
    // Messages wait on every node before the consumer starts.
    for (const [i, n] of nodes.entries()) {
      const api = nsqdHttp(n.http);
      await api.createTopic(topic);
      await api.createChannel(topic, 'redeliver');
      for (let k = 0; k < 3; k++) await api.publish(topic, new TextEncoder().encode(`node${i + 1}-${k}`));
    }
    const transport = transportOn(nodes, 150);
    const got: string[] = [];
    let overOne = 0;
    let sampled = 0;
    const holders = new Set<number>();
    await transport.consume(topic, (d: Delivery) => {
      got.push(new TextDecoder().decode(d.body));
      void d.ack();
    }, { prefetch: 1 });
    await until('all 9 messages from the 3 nodes', async () => {
      const counts = await readyCounts(nodes, topic);
      if (counts.every((c) => c !== undefined)) {
        sampled += 1;
        const total = counts.reduce((a: number, c) => a + c!, 0);
        if (total > 1) overOne += 1;
        counts.forEach((c, i) => c === 1 && holders.add(i));
      }
      return got.length === 9;
    }, 20_000);
    expect(new Set(got.map((b) => b.slice(0, 5)))).toEqual(new Set(['node1', 'node2', 'node3']));
    expect(got).toHaveLength(9);
    // Samples of /stats that caught RDY mid-move read 1 + 1 at most once in a while: the move lowers first.
    expect(overOne).toBe(0);
    expect(sampled).toBeGreaterThan(0);
    // Afterwards RDY keeps passing round: each node is seen holding it.
    await until('each node seen with RDY 1', async () => {
      const counts = await readyCounts(nodes, topic);
      counts.forEach((c, i) => c === 1 && holders.add(i));
      expect(counts.reduce((a: number, c) => a + (c ?? 0), 0)).toBeLessThanOrEqual(1);
      return holders.size === 3;
    }, 10_000);
    await transport.close();
  }, 40_000);

  it("a prefetch above nsqd's --max-rdy-count is capped there: 10 alone is RDY 3; 10 beside an uncapped node is 5 + 3", async () => {
    const alone = nodesOf(capped, 1);
    const topic = topicName('rdy-cap');
    const single = transportOn(alone);
    await single.consume(topic, (d) => void d.ack(), { prefetch: 10 });
    await until('RDY 3 in /stats', async () => JSON.stringify(await readyCounts(alone, topic)) === '[3]');
    const limits = await single.nodes.node(alone[0]!.tcp).limits();
    expect(limits.maxRdyCount).toBe(3);
    await single.close();

    const mixed = [...nodesOf(three, 1), ...alone];
    const topic2 = topicName('rdy-cap-mixed');
    const both = transportOn(mixed);
    const subscription = await both.consume(topic2, (d) => void d.ack(), { prefetch: 10 });
    await until('RDY 5 + 3 in /stats', async () => JSON.stringify(await readyCounts(mixed, topic2)) === '[5,3]');
    // The cap holds through a setPrefetch and a resume.
    await subscription.setPrefetch(40);
    await until('RDY 20 + 3 in /stats', async () => JSON.stringify(await readyCounts(mixed, topic2)) === '[20,3]');
    await subscription.pause();
    await until('RDY 0 + 0 in /stats', async () => JSON.stringify(await readyCounts(mixed, topic2)) === '[0,0]');
    await subscription.resume();
    await until('RDY 20 + 3 again', async () => JSON.stringify(await readyCounts(mixed, topic2)) === '[20,3]');
    // nsqd never answered a RDY above its cap with an error: the connection is the same one.
    const clients = await channelClients(nsqdHttp(alone[0]!.http), topic2);
    expect(clients).toHaveLength(1);
    await both.close();
  }, 30_000);
});
