/** The transport conformance suite against a real NATS JetStream, under a stream prefix of its own, deleted afterwards. */
import { afterAll } from 'vitest';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';
import { describeTransportConformance } from './suite.js';

const skip = await natsSkipReason();
const prefix = jetStreamPrefix('conf');

afterAll(async () => {
  if (!skip) await deleteJetStreamPrefix(prefix);
});

describeTransportConformance({
  name: 'jetstream',
  create: async () => new JetStreamTransport({ servers: NATS_URL, prefix, connectionName: 'redeliver-conformance' }),
  skip,
});
