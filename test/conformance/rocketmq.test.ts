/** The transport conformance suite against a real RocketMQ 5 (name server, broker, gRPC proxy), under a consumer group of its own; its topics and group are deleted afterwards. The cut cases reach the proxy through a TCP proxy. */
import { afterAll } from 'vitest';
import { TcpProxy } from '../support/tcp-proxy.js';
import { ROCKETMQ_ENDPOINTS, RocketScratch, rocketSkipReason } from '../transports/rocketmq/scratch.js';
import { describeTransportConformance } from './suite.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('conf');

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

describeTransportConformance({
  name: 'rocketmq',
  create: async () => scratch.transport({ connectionName: 'redeliver-conformance' }),
  createCuttable: async () => {
    const proxy = await TcpProxy.start(Number(ROCKETMQ_ENDPOINTS.split(':')[1]));
    const transport = scratch.transport({ endpoints: `127.0.0.1:${proxy.port}`, connectionName: 'redeliver-conformance-cut' });
    // A lease is a receive's invisible duration on the broker: a cut connection does not end it.
    return { transport, cut: () => proxy.cut(), cutEndsLeases: false, dispose: () => proxy.close() };
  },
  skip,
});
