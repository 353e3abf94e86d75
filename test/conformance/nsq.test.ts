/** The transport conformance suite against a real nsqd; every topic is named by the test and deleted afterwards. */
import { afterAll } from 'vitest';
import { NsqTransport } from '../../src/transports/nsq/index.js';
import { nsqdHttp, nsqSkipReason, NSQD_TCP, deleteNsqTopics } from '../transports/nsq/support.js';
import { describeTransportConformance } from './suite.js';

const skip = await nsqSkipReason();

afterAll(async () => {
  if (!skip) await deleteNsqTopics(nsqdHttp(), (name) => name.startsWith('conf-'));
});

describeTransportConformance({
  name: 'nsq',
  create: async () => new NsqTransport({ nsqd: [NSQD_TCP], connectionName: 'redeliver-conformance', connectionBackoff: () => 100 }),
  createCuttable: async () => {
    const transport = new NsqTransport({ nsqd: [NSQD_TCP], connectionName: 'redeliver-conformance-cut', connectionBackoff: () => 100 });
    return { transport, cut: () => transport.cut(), cutEndsLeases: true, dispose: async () => undefined };
  },
  limitsWholeMessage: true,
  skip,
});
