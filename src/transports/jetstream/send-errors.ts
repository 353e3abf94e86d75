import { classifyByBrand, type SendErrorKind } from '../../transport/send-errors.js';

/**
 * JetStream API error codes that mean "no room": back off. A full stream
 * (`maximum messages exceeded`, `maximum bytes exceeded`) comes as 10077,
 * the code of any failed store, so it is told by its text; another store
 * failure (a file the server could not open) is transient.
 */
const THROTTLED_CODES = new Set([
  10002, // resource limits exceeded for account (the account's JetStream storage limit is used up)
  10023, // insufficient resources (the server's JetStream storage is full)
  10047, // insufficient storage resources available
  10028, // resource limits exceeded for account
]);

/**
 * How a `Producer` treats an error of a JetStream send:
 * - a full stream (`maximum messages exceeded`, `maximum bytes exceeded`),
 *   a server out of storage and an account at its storage limit are
 *   throttling: back off until consumers or operators make room;
 * - no responders (a stream without a leader during an election, a server
 *   restarting), timeouts and connection errors are transient;
 * - a message too large for the server, bad input and any other API error
 *   are fatal.
 */
export function classifyJetStreamSendError(error: unknown): SendErrorKind {
  const branded = classifyByBrand(error);
  if (branded !== 'transient') return branded;
  if (error instanceof TypeError || error instanceof RangeError) return 'fatal';
  const e = error as { name?: unknown; code?: unknown; message?: unknown } | null;
  const name = typeof e?.name === 'string' ? e.name : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (typeof e?.code === 'number' && THROTTLED_CODES.has(e.code)) return 'throttled';
  if (/maximum (messages|bytes) exceeded|insufficient (storage )?resources|resource limits exceeded/i.test(message)) return 'throttled';
  if (/max_?payload|MaxPayloadExceeded/i.test(message) || name === 'InvalidArgumentError' || name === 'InvalidSubjectError') return 'fatal';
  if (e?.code === 10077) return 'transient';
  if (name === 'JetStreamApiError') return (e as { status?: number }).status === 503 ? 'transient' : 'fatal';
  return 'transient';
}
