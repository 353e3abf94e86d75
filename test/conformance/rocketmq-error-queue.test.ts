/** The error-queue conformance suite against a real RocketMQ 5, under a consumer group of its own; its topics and group are deleted afterwards. */
import { afterAll } from 'vitest';
import { RocketScratch, rocketSkipReason } from '../transports/rocketmq/scratch.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const skip = await rocketSkipReason();
const scratch = new RocketScratch('eq');

afterAll(async () => {
  if (!skip) await scratch.cleanup();
}, 120_000);

describeErrorQueueConformance({
  name: 'rocketmq',
  create: async () => scratch.transport({ connectionName: 'redeliver-conformance-error-queue' }),
  skip,
});
