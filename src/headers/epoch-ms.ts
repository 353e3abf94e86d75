/** Times carried in headers as whole milliseconds since the Unix epoch. */
import type { Headers } from '../transport/types.js';

/** The largest time a `Date` can hold, in milliseconds since the epoch. */
export const MAX_EPOCH_MS = 8.64e15;

/** An epoch-milliseconds header: the time, undefined when absent, or `malformed` when present but not whole milliseconds within a Date's range. */
export function epochMsHeader(headers: Readonly<Headers>, name: string): number | undefined | 'malformed' {
  if (!Object.prototype.hasOwnProperty.call(headers, name)) return undefined;
  const raw = headers[name];
  if (typeof raw !== 'string' || !/^\d{1,16}$/.test(raw)) return 'malformed';
  const ms = Number(raw);
  return ms <= MAX_EPOCH_MS ? ms : 'malformed';
}
