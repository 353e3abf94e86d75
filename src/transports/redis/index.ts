/**
 * `redeliver/redis`: the Redis transport (streams, consumer groups and Lua
 * scripts). Needs `ioredis` (an optional peer dependency of redeliver).
 */
export { RedisTransport, SEND_BATCH_CHUNK } from './transport.js';
export { REDIS_DEFAULTS, type RedisTransportOptions } from './options.js';
export { RedisKeys, GROUP, type QueueKeys, type RedisQueueKind } from './keys.js';
export { RedisDelivery } from './delivery.js';
export { RedisOperations, PURGE_CHUNK_SIZE } from './operations.js';
export { MalformedEntryError } from './codec.js';
export { serverWarnings, type ServerSettings } from './connection.js';
export { keySlot, type RedisClient } from './cluster.js';
export { classifyRedisSendError } from './send-errors.js';
export {
  QueueFullError,
  MessageTooLargeError,
  TransportClosedError,
  DeliveryGoneError,
  AlreadySettledError,
  SettlementRefusedError,
  ReplicasBehindError,
} from './errors.js';
