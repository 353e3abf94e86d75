import type { Script } from './runner.js';

/**
 * Appends messages to a queue's stream and registers the queue as a work
 * queue, unless the queue is at its bound.
 *
 * KEYS: stream, delayed, queues. ARGV: queue name, bound (0 for none), then
 * id, headers, body for each message. Replies `{1, 0}` once written, or
 * `{0, held}` when the queue holds `held >= bound` messages (nothing written).
 */
export const SEND: Script = {
  name: 'send',
  lua: `#!lua
local bound = tonumber(ARGV[2])
if bound > 0 then
  local held = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
  if held + (#ARGV - 2) / 3 > bound then return {0, held} end
end
for i = 3, #ARGV, 3 do
  redis.call('XADD', KEYS[1], '*', 'i', ARGV[i], 'h', ARGV[i + 1], 'b', ARGV[i + 2])
end
redis.call('HSETNX', KEYS[3], ARGV[1], 'work')
return {1, 0}`,
};
