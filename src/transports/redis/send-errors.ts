import { classifyByBrand, type SendErrorKind } from '../../transport/send-errors.js';

/**
 * How a `Producer` treats an error of a Redis send:
 * - `OOM` (the server is at `maxmemory` with `noeviction`) and a queue at
 *   its `maxLength` are throttling: back off until memory or room frees;
 * - `READONLY` (a replica during failover), `LOADING` (a restart reading its
 *   data), `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`, `BUSY` (a long script),
 *   `MOVED`/`ASK` and connection errors are transient;
 * - `WRONGTYPE` (the queue's key holds something else), `NOSCRIPT` after
 *   the fallback, `NOPERM`, `ERR` replies and bad input are fatal.
 */
export function classifyRedisSendError(error: unknown): SendErrorKind {
  const branded = classifyByBrand(error);
  if (branded !== 'transient') return branded;
  if (error instanceof TypeError || error instanceof RangeError) return 'fatal';
  const message = (error as { message?: unknown } | null)?.message;
  if (typeof message !== 'string') return 'transient';
  const code = /^[A-Z]+/.exec(message)?.[0];
  if (code === 'OOM') return 'throttled';
  if (/^ERR max number of clients/.test(message)) return 'transient';
  if (code === 'WRONGTYPE' || code === 'NOPERM' || code === 'NOSCRIPT' || code === 'ERR' || code === 'NOAUTH' || code === 'WRONGPASS') return 'fatal';
  return 'transient';
}
