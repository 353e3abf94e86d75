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
export { ConfirmTimeoutError, StaleDeliveryError, AlreadySettledError, TransportClosedError } from './errors.js';
export {
  deliveryLimitWarning,
  expectedDeliveriesWarning,
  expectedBrokerDeliveries,
  totalAttempts,
  type RetryBudget,
  type DeliveryLimitCheck,
} from './delivery-limit.js';
export { DELAY_LEVELS, MAX_DELAY_MS, delayLevels, delayRoutingKey, type QueueType, type DelayTopologyNames } from './topology.js';
export { HEADER_LIMITS, BROKER_HEADERS } from './wire-headers.js';
