/** The error-queue conformance suite against a real RabbitMQ. */
import { afterAll } from 'vitest';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { deleteRecordedQueues, recordingQueues } from '../support/recording-rabbit.js';
import { describeErrorQueueConformance } from './error-queue-suite.js';

const skip = await rabbitSkipReason();

afterAll(async () => {
  if (!skip) await deleteRecordedQueues();
});

describeErrorQueueConformance({
  name: 'rabbitmq',
  create: async () => recordingQueues(new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: 'redeliver-conformance-error-queue' })),
  skip,
});
