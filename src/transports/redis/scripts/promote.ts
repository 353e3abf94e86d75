import { SERVER_NOW } from './server-time.js';
import type { Script } from './runner.js';

/**
 * Moves delayed retries that are due, by the server's clock, from the
 * delayed set to the end of the stream: each is appended before it leaves
 * the set.
 *
 * KEYS: stream, delayed, delayed data. ARGV: the most to move. Replies
 * `{moved, wait}`: `wait` is the milliseconds until the next delayed retry
 * is due, or -1 when none waits.
 */
export const PROMOTE: Script = {
  name: 'promote',
  lua: `#!lua
${SERVER_NOW}
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, token in ipairs(due) do
  local f = redis.call('HMGET', KEYS[3], token .. ':i', token .. ':h', token .. ':b')
  if f[1] then redis.call('XADD', KEYS[1], '*', 'i', f[1], 'h', f[2] or '{}', 'b', f[3] or '') end
  redis.call('ZREM', KEYS[2], token)
  redis.call('HDEL', KEYS[3], token .. ':i', token .. ':h', token .. ':b')
end
local wait = -1
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if #first == 2 then
  wait = math.ceil(tonumber(first[2]) - now)
  if wait < 0 then wait = 0 end
end
return {#due, wait}`,
};
