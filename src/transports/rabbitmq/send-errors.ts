/**
 * How a `Producer` should treat an error from `RabbitMqTransport.send`
 * (docs/producer.md, "Errors by transport"):
 *
 * - `throttled`, back off: the broker refused the message for now. A nack
 *   (`PublishNackedError`: a full `reject-publish` queue), a publish that
 *   waited out `confirmTimeoutMs` while the connection was blocked or not
 *   draining (`PublishBlockedError`), and AMQP `506 RESOURCE_ERROR`.
 * - `fatal`, give up: no retry can fix it. Bad input (a TypeError or
 *   RangeError: the body is not bytes, an id, queue name or header out of
 *   bounds), a message over the size limit (`MessageTooLargeError`), a
 *   missing queue when declaring is off (`QueueNotFoundError`, 404),
 *   `403 ACCESS_REFUSED` and the other codes below, a closed transport, a
 *   transport that gave up reconnecting.
 * - `transient`, retry at once: everything else, chiefly a publish the
 *   broker returned because its queue was deleted (`PublishReturnedError`:
 *   the transport declares the queue again on the retry), the connection or
 *   channel closing or resetting (`PublishChannelClosedError`, amqplib's
 *   `IllegalOperationError`, `ECONNRESET`), a confirm timeout
 *   (`ConfirmTimeoutError`, including a wait for a reconnection), and the
 *   codes that mean "try again": `320 CONNECTION_FORCED`, `541
 *   INTERNAL_ERROR`, `405 RESOURCE_LOCKED`, `504 CHANNEL_ERROR`.
 */
import { classifyByBrand, type SendErrorKind } from '../../transport/send-errors.js';

/**
 * AMQP 0-9-1 reply codes (spec section 1.2, and RabbitMQ's use of them) and
 * what a send that failed with one should do. Codes not listed are
 * transient.
 */
export const REPLY_CODE_KIND: Readonly<Record<number, SendErrorKind>> = Object.freeze({
  /** CONTENT_TOO_LARGE. */
  311: 'fatal',
  /**
   * NO_ROUTE: a mandatory message no queue took (`PublishReturnedError`):
   * its queue was deleted, and the transport declares it again on the retry.
   */
  312: 'transient',
  /** CONNECTION_FORCED: an operator or the broker closed the connection (shutdown, `close_connection`). */
  320: 'transient',
  /** INVALID_PATH: no such virtual host. */
  402: 'fatal',
  /** ACCESS_REFUSED: the user may not write to the exchange or declare the queue. */
  403: 'fatal',
  /** NOT_FOUND: no such queue or exchange. */
  404: 'fatal',
  /** RESOURCE_LOCKED: an exclusive queue held by another connection; may be released. */
  405: 'transient',
  /** PRECONDITION_FAILED: arguments or size the broker refuses. */
  406: 'fatal',
  /** FRAME_ERROR, SYNTAX_ERROR, COMMAND_INVALID: the client sent something malformed. */
  501: 'fatal',
  502: 'fatal',
  503: 'fatal',
  /** CHANNEL_ERROR: a channel used while opening or closing; a new one works. */
  504: 'transient',
  /** UNEXPECTED_FRAME. */
  505: 'fatal',
  /** RESOURCE_ERROR: the broker lacks the resources to do it now. */
  506: 'throttled',
  /** NOT_ALLOWED: forbidden by the broker's configuration or limits. */
  530: 'fatal',
  /** NOT_IMPLEMENTED. */
  540: 'fatal',
  /** INTERNAL_ERROR: the broker failed; a retry may find it recovered. */
  541: 'transient',
});

/** Names of errors, matched by name so copies of the package agree. */
const FATAL_NAMES = new Set(['TransportClosedError', 'ReconnectFailedError']);

/** The AMQP reply code on the error or on one of its causes (amqplib sets `code` on the broker's close errors). */
function replyCodeOf(error: object): number | undefined {
  for (let e: unknown = error, depth = 0; typeof e === 'object' && e !== null && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown; replyCode?: unknown }).replyCode ?? (e as { code?: unknown }).code;
    if (typeof code === 'number' && Number.isInteger(code) && code >= 200 && code < 600) return code;
  }
  return undefined;
}

/** `RabbitMqTransport.classifySendError`: see the module comment. */
export function classifyRabbitMqSendError(error: unknown): SendErrorKind {
  const branded = classifyByBrand(error);
  if (branded !== 'transient') return branded;
  if (typeof error !== 'object' || error === null) return 'transient';
  if (error instanceof TypeError || error instanceof RangeError) return 'fatal';
  const name = (error as { name?: unknown }).name;
  if (typeof name === 'string' && FATAL_NAMES.has(name)) return 'fatal';
  // Returned (312 NO_ROUTE): the queue was deleted and is declared again on the retry.
  if (name === 'PublishReturnedError') return 'transient';
  if (name === 'PublishChannelClosedError' && (error as { concernsThisPublish?: unknown }).concernsThisPublish !== true) {
    // Closed for another publish's fault, or with the connection: this one may well go through on a new channel.
    return 'transient';
  }
  const code = replyCodeOf(error);
  if (code !== undefined) return REPLY_CODE_KIND[code] ?? 'transient';
  // amqplib's handshake failures carry no code: "Handshake terminated by server: 403 (ACCESS-REFUSED)".
  if (/\b403 \(ACCESS-REFUSED\)|\b530 \(NOT-ALLOWED\)|\b402 \(INVALID-PATH\)/.test(String((error as { message?: unknown }).message))) return 'fatal';
  return 'transient';
}
