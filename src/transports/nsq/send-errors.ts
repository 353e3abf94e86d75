import { classifyByBrand, type SendErrorKind } from '../../transport/send-errors.js';
import { NsqPublishError, NsqRefusedError } from './errors.js';

/** nsqd's error codes for a publish that may succeed later: nsqd exiting, its disk queue unhealthy. */
export const TRANSIENT_CODES: ReadonlySet<string> = new Set(['E_PUB_FAILED', 'E_MPUB_FAILED', 'E_DPUB_FAILED']);

/**
 * The error a publish ends with for nsqd's error frame `text` (`E_CODE
 * reason`): an {@link NsqPublishError} for the transient codes, an
 * {@link NsqRefusedError} (fatal, with nsqd's reason) for every other
 * (`E_BAD_TOPIC`, `E_BAD_MESSAGE`, `E_INVALID`, ...).
 */
export function publishError(text: string, address: string): Error {
  const match = /^(E_[A-Z_]+)\s*(.*)$/s.exec(text.replace(/^Error:\s*/, '').trim());
  if (match === null) return new NsqPublishError(undefined, address, text);
  const [, code, reason] = match as unknown as [string, string, string];
  return TRANSIENT_CODES.has(code) ? new NsqPublishError(code, address, `${code} ${reason}`) : new NsqRefusedError(code, reason, address);
}

/**
 * How a `Producer` treats an error of an NSQ send: nsqd's refusals of bad
 * input, a message too large, an invalid name and a closed transport are
 * fatal; `E_PUB_FAILED` and the like, timeouts and connection errors are
 * transient. nsqd has no throttling answer.
 */
export function classifyNsqSendError(error: unknown): SendErrorKind {
  const branded = classifyByBrand(error);
  if (branded !== 'transient') return branded;
  if (error instanceof TypeError || error instanceof RangeError) return 'fatal';
  return 'transient';
}
