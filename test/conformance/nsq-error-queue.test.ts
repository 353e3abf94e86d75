/** The error-queue conformance suite against a real nsqd; the suite's topics (`eq-…`) are deleted afterwards. */
import { afterAll } from 'vitest';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import { deleteNsqTopics, nsqdHttp, nsqSkipReason, NSQD_TCP } from '../transports/nsq/support.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const skip = await nsqSkipReason();

afterAll(async () => {
  if (!skip) await deleteNsqTopics(nsqdHttp(), (name) => name.startsWith('eq-'));
});

describeErrorQueueConformance({
  name: 'nsq',
  create: async () => new NsqTransport({ nsqd: [NSQD_TCP], connectionName: 'redeliver-conformance-error-queue', connectionBackoff: () => 100 }),
  skip,
});
