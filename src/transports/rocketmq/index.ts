/**
 * `redeliver/rocketmq`: the Apache RocketMQ 5 transport (topics of type
 * MIXED, `SimpleConsumer`s, timed messages for delayed retries). Needs
 * `rocketmq-client-nodejs` (an optional peer dependency of redeliver).
 */
export { RocketMqTransport, MAX_HOP_MS, MAX_BODY_BYTES, MAX_PROPERTY_BYTES } from './transport.js';
export type { DuplicateKind, RocketMqStats, RocketMqTransportEvents } from './events.js';
export { ROCKETMQ_DEFAULTS, MIN_INVISIBLE_MS, type RocketMqTransportOptions } from './options.js';
export { RocketMqAdmin, AdminError, DLQ_PREFIX, RETRY_PREFIX, DEFAULT_TIMER_PRECISION_MS, type TopicKind, type TopicConfig } from './admin.js';
export { RocketMqDelivery } from './delivery.js';
export { classifyRocketMqSendError } from './send-errors.js';
export { ID_PROPERTY, HEADERS_PROPERTY, DUE_PROPERTY, GROUP_PROPERTY, encodeProperties, decodeProperties } from './codec.js';
export { MessageTooLargeError, TopicTypeError, TransportClosedError, DeliveryGoneError, AlreadySettledError } from './errors.js';
export { RemotingError } from './remoting.js';
