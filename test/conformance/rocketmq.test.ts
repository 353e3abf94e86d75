/** The transport conformance suite against a real RocketMQ 5 (name server, broker, gRPC proxy), under a consumer group of its own; its topics and group are deleted afterwards. */
import { afterAll } from 'vitest';
import { RocketScratch, rocketSkipReason } from '../transports/rocketmq/scratch.js';
import { describeTransportConformance } from './suite.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('conf');

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

describeTransportConformance({
  name: 'rocketmq',
  create: async () => scratch.transport({ connectionName: 'redeliver-conformance' }),
  noConnection: 'the cut cases need a gRPC proxy in between; RocketMQ leases outlive a connection (invisible duration)',
  skip,
});
