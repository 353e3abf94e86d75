import { HEADER_LIMITS, headerEntryBytes } from '../../src/transports/rabbitmq/wire-headers.js';

/**
 * User headers that fill RabbitMQ's user-header budget exactly (counted as
 * encoded: name and value bytes plus 6 per header): the largest set a `send`
 * accepts.
 */
export function userHeadersAtTheLimit(): Record<string, string> {
  const count = Math.ceil(HEADER_LIMITS.maxUserBytes / HEADER_LIMITS.maxValueBytes);
  const headers: Record<string, string> = {};
  let left = HEADER_LIMITS.maxUserBytes;
  for (let i = 0; i < count; i++) {
    const key = `app-${i}`;
    const value = 'v'.repeat(Math.min(HEADER_LIMITS.maxValueBytes, left - headerEntryBytes(key, '')));
    headers[key] = value;
    left -= headerEntryBytes(key, value);
  }
  if (left !== 0) throw new Error(`could not fill the budget exactly (${left} bytes left)`);
  return headers;
}
