/**
 * `redeliver/jetstream`: the NATS JetStream transport (work-queue streams,
 * durable pull consumers, a delay stream held by the server). Needs
 * `@nats-io/jetstream` and `@nats-io/transport-node` (optional peer
 * dependencies of redeliver).
 */
export { JetStreamTransport } from './transport.js';
export { JETSTREAM_DEFAULTS, type JetStreamTransportOptions } from './options.js';
export { JetStreamNames, QUEUE_CONSUMER, QUEUE_DESCRIPTION, encodeQueueName, decodeQueueName, type QueueNames, type JetStreamQueueKind } from './names.js';
export { JetStreamDelivery } from './delivery.js';
export { JetStreamOperations, type OperationClients } from './operations.js';
export { classifyJetStreamSendError } from './send-errors.js';
export { QueueFullError, MessageTooLargeError, TransportClosedError, DeliveryGoneError, AlreadySettledError, StreamConflictError } from './errors.js';
