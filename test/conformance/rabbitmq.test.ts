import { afterAll } from 'vitest';
import { RabbitMqTransport } from '../../src/transports/rabbitmq/index.js';
import { RABBITMQ_URL, rabbitSkipReason } from '../support/brokers.js';
import { deleteRecordedQueues, recordingQueues } from '../support/recording-rabbit.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { describeTransportConformance } from './suite.js';

const skip = await rabbitSkipReason();

afterAll(async () => {
  if (!skip) await deleteRecordedQueues();
});

describeTransportConformance({
  name: 'rabbitmq',
  create: async () => recordingQueues(new RabbitMqTransport({ url: RABBITMQ_URL, connectionName: 'redeliver-conformance' })),
  createCuttable: async () => {
    const url = new URL(RABBITMQ_URL);
    const proxy = await TcpProxy.start(Number(url.port || 5672));
    url.hostname = '127.0.0.1';
    url.port = String(proxy.port);
    const transport = recordingQueues(new RabbitMqTransport({ url: url.toString(), connectionName: 'redeliver-conformance-cut', reconnect: () => 100 }));
    return { transport, cut: () => proxy.cut(), cutEndsLeases: true, dispose: () => proxy.close() };
  },
  skip,
});
