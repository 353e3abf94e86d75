/**
 * `redeliver/rabbitmq`: the RabbitMQ transport. Needs `amqplib` (an optional
 * peer dependency of redeliver).
 */
export { RabbitMqTransport } from './transport.js';
export {
  RABBITMQ_DEFAULTS,
  type RabbitMqTransportOptions,
  type RabbitMqConsumeOptions,
} from './options.js';
export type { RabbitMqTransportEvents, RabbitMqStats } from './events.js';
export { RabbitMqDelivery } from './delivery.js';
export {
  RabbitMqOperations,
  SendBackIncompleteError,
  BulkIncompleteError,
  SEND_BACK_WINDOW,
  MAX_BROWSE_LIMIT,
  DEFAULT_ERROR_QUEUE_MAX_SCAN,
  type RabbitMqOperationsOptions,
} from './operations.js';
export { BrokerStallError, ScanLimitError, type ReadStats } from './queue-access.js';
export { QuorumErrorQueueError } from './quorum-refusal.js';
export { errorQueueMarkerName } from './error-queue-marker.js';
export {
  ConfirmTimeoutError,
  StaleDeliveryError,
  AlreadySettledError,
  TransportClosedError,
  PublishNackedError,
  PublishBlockedError,
  PublishChannelClosedError,
  PublishReturnedError,
  MessageTooLargeError,
  QueueNotFoundError,
  ReconnectFailedError,
} from './errors.js';
export { classifyRabbitMqSendError, REPLY_CODE_KIND } from './send-errors.js';
export {
  deliveryLimitWarning,
  expectedDeliveriesWarning,
  expectedBrokerDeliveries,
  totalAttempts,
  type RetryBudget,
  type DeliveryLimitCheck,
} from './delivery-limit.js';
export { DELAY_LEVELS, MAX_DELAY_MS, delayLevels, delayRoutingKey, type QueueType, type DelayLevelType, type DelayTopologyNames } from './topology.js';
export { HEADER_LIMITS, BROKER_HEADERS } from './wire-headers.js';
