/**
 * The transport conformance suite on a Redis Cluster of the test's own
 * (three primaries, no replicas, on ports 7100-7199): the application
 * passes an ioredis `Cluster` as `client`. The cut cases reach the nodes
 * through TCP proxies (the client is told the proxies' addresses with
 * `natMap`), so a cut closes every connection of the transport at once.
 */
import { randomUUID } from 'node:crypto';
import { afterAll } from 'vitest';
import { Cluster } from 'ioredis';
import { RedisTransport } from '../../src/transports/redis/index.js';
import { redisClusterPerFile } from '../support/redis-cluster-per-file.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { describeTransportConformance } from './suite.js';

const prefix = `conf-${randomUUID().slice(0, 8)}`;
const cluster = redisClusterPerFile();
const clients: Cluster[] = [];

afterAll(async () => {
  for (const client of clients) client.disconnect();
}, 60_000);

describeTransportConformance({
  name: 'redis cluster',
  create: async () => {
    const client = new Cluster(cluster().seeds);
    clients.push(client);
    return new RedisTransport({ client, keyPrefix: prefix, connectionName: 'redeliver-conformance', checkServer: false });
  },
  createCuttable: async () => {
    const proxies = await Promise.all(cluster().nodes.map((node) => TcpProxy.start(node.port)));
    const natMap = Object.fromEntries(proxies.map((proxy) => [`127.0.0.1:${proxy.targetPort}`, { host: '127.0.0.1', port: proxy.port }]));
    const client = new Cluster(proxies.map((proxy) => ({ host: '127.0.0.1', port: proxy.port })), { natMap });
    clients.push(client);
    const transport = new RedisTransport({ client, keyPrefix: prefix, connectionName: 'redeliver-conformance-cut', checkServer: false, reconnect: () => 100 });
    return {
      transport,
      cut: () => proxies.reduce((sum, proxy) => sum + proxy.cut(), 0),
      cutEndsLeases: false,
      dispose: async () => {
        await Promise.all(proxies.map((proxy) => proxy.close()));
      },
    };
  },
});
