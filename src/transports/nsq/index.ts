/**
 * `redeliver/nsq`: the NSQ transport (a topic per queue, read through one
 * channel from every nsqd, RDY as the consumer's flow control, redeliver's
 * headers in a body envelope). Needs `nsqjs` (an optional peer dependency
 * of redeliver).
 */
export { NsqTransport, MAX_COPY_HEADER_BYTES } from './transport.js';
export { NSQ_DEFAULTS, type NsqTransportOptions } from './options.js';
export type { NsqTransportEvents, NsqStats, DuplicateKind } from './events.js';
export { NsqDelivery } from './delivery.js';
export { NsqSubscription, splitRdy } from './subscription.js';
export { NsqTopology } from './topology.js';
export { encodeEnvelope, decodeEnvelope, readEnvelope, ENVELOPE_MAGIC, ENVELOPE_VERSION, type EnvelopeReading } from './envelope.js';
export { ID_HEADER, DUE_HEADER } from './codec.js';
export { isValidName, InvalidNameError } from './names.js';
export { classifyNsqSendError } from './send-errors.js';
export { MessageTooLargeError, TransportClosedError, DeliveryGoneError, AlreadySettledError, NsqRefusedError, NsqPublishError } from './errors.js';
