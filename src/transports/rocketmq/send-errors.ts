import { classifyByBrand, type SendErrorKind } from '../../transport/send-errors.js';

/** The proxy's status codes (`apache.rocketmq.v2.Code`) that mean the broker is throttling: back off. */
const THROTTLED_CODES = new Set([42900]); // TOO_MANY_REQUESTS, which the proxy also answers for a busy broker (SYSTEM_BUSY, flow control)

/** Codes a retry at once may get past: the broker or proxy failed or was slow this time. */
const TRANSIENT_CODES = new Set([
  50000, // INTERNAL_ERROR
  50001, // INTERNAL_SERVER_ERROR
  50002, // HA_NOT_AVAILABLE
  50400, // PROXY_TIMEOUT
  50401, // MASTER_PERSISTENCE_TIMEOUT
  50402, // SLAVE_PERSISTENCE_TIMEOUT
  50300, // UNAVAILABLE
]);

/** gRPC's status for a channel that cannot reach its server: refused, closed, or going away. */
const GRPC_UNAVAILABLE = 14;

/** Socket errors of a proxy that cannot be reached. */
const UNREACHABLE_SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ENOTCONN', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * How a `Producer` treats an error of a RocketMQ send:
 * - `TOO_MANY_REQUESTS` (42900; the proxy's answer to its own flow control
 *   and to a busy broker, `SYSTEM_BUSY`) is throttling: back off (seed 002's
 *   1 s × 1.6 ± 20 % up to 120 s);
 * - gRPC `UNAVAILABLE` and a refused or reset socket (the proxy down, the
 *   connection closed because the broker is shutting down or restarting)
 *   mean the broker cannot be reached: wait for it with the same backoff
 *   (seed 002's ConnectWithBackoff), up to the send's timeout;
 * - `INTERNAL_SERVER_ERROR`, `PROXY_TIMEOUT`, persistence timeouts, and
 *   other errors with no status (a request timeout) are transient: retry
 *   at once;
 * - any other status (`ILLEGAL_TOPIC`, `ILLEGAL_MESSAGE_*`,
 *   `MESSAGE_BODY_TOO_LARGE`, `MESSAGE_PROPERTIES_TOO_LARGE`, a topic not
 *   found, forbidden), a bad argument, a message too large (refused before
 *   sending) and a topic of the wrong type are fatal.
 */
export function classifyRocketMqSendError(error: unknown): SendErrorKind {
  const branded = classifyByBrand(error);
  if (branded !== 'transient') return branded;
  if (error instanceof TypeError || error instanceof RangeError) return 'fatal';
  const code = statusCode(error);
  if (code === undefined) return unreachable(error) ? 'unavailable' : 'transient';
  if (THROTTLED_CODES.has(code)) return 'throttled';
  if (TRANSIENT_CODES.has(code)) return 'transient';
  return 'fatal';
}

/** The proxy's status code an error of the client carries (a five-digit `Code`), or undefined for an error without one. */
export function statusCode(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 10_000 ? code : undefined;
}

/** Whether `error` says the proxy cannot be reached: gRPC `UNAVAILABLE`, or a socket refused or reset. */
function unreachable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === GRPC_UNAVAILABLE || (typeof code === 'string' && UNREACHABLE_SOCKET_CODES.has(code));
}
