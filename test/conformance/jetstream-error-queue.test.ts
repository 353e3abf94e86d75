/** The error-queue conformance suite against a real NATS JetStream, under a stream prefix of its own, deleted afterwards. */
import { afterAll } from 'vitest';
import { JetStreamTransport } from '../../src/transports/jetstream/index.js';
import { NATS_URL, natsSkipReason } from '../support/brokers.js';
import { deleteJetStreamPrefix, jetStreamPrefix } from '../support/jetstream-scratch.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const skip = await natsSkipReason();
const prefix = jetStreamPrefix('eq');

afterAll(async () => {
  if (!skip) await deleteJetStreamPrefix(prefix);
});

describeErrorQueueConformance({
  name: 'jetstream',
  create: async () => new JetStreamTransport({ servers: NATS_URL, prefix, connectionName: 'redeliver-conformance-error-queue' }),
  skip,
});
