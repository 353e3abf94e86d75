/** The transport conformance suite against a real NATS JetStream, under a stream prefix of its own, deleted afterwards. */
import { afterAll } from 'vitest';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { describeTransportConformance } from './suite.js';

const skip = await natsSkipReason();
const prefix = jetStreamPrefix('conf');

afterAll(async () => {
  if (!skip) await deleteJetStreamPrefix(prefix);
});

describeTransportConformance({
  name: 'jetstream',
  create: async () => new JetStreamTransport({ servers: NATS_URL, prefix, connectionName: 'redeliver-conformance' }),
  createCuttable: async () => {
    const proxy = await TcpProxy.start(Number(new URL(NATS_URL.replace(/^nats:/, 'http:')).port || 4222));
    const transport = new JetStreamTransport({ servers: `127.0.0.1:${proxy.port}`, prefix, connectionName: 'redeliver-conformance-cut', reconnect: () => 100 });
    return { transport, cut: () => proxy.cut(), cutEndsLeases: false, dispose: () => proxy.close() };
  },
  limitsWholeMessage: true,
  skip,
});
