import { afterAll } from 'vitest';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { deleteRecordedQueues, recordingQueues } from '../support/recording-rabbit.js';
import { describeTransportConformance } from './suite.js';

const skip = await rabbitSkipReason();

afterAll(async () => {
  if (!skip) await deleteRecordedQueues();
});

describeTransportConformance({
  name: 'rabbitmq',
  create: async () => recordingQueues(new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: 'redeliver-conformance' })),
  skip,
});
