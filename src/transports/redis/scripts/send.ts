import { HOLD } from './hold.js';
import { SERVER_NOW } from './server-time.js';
import type { Script } from './runner.js';

/** How many ARGV slots one message takes in {@link SEND}. */
export const SEND_SLOTS = 4;

/**
 * Appends messages to a queue's stream, or for a delayed send keeps them in
 * its delayed set until due by the server's clock (as a delayed retry is
 * kept), and registers the queue as a work queue, unless the queue is at
 * its bound.
 *
 * KEYS: stream, delayed, queues, delayed data, seq. ARGV: queue name, bound
 * (0 for none), then id, headers, body, delay ms (0 for none) for each
 * message. Replies `{1, 0}` once written, or `{0, held}` when the queue
 * holds `held >= bound` messages (nothing written).
 */
export const SEND: Script = {
  name: 'send',
  lua: `#!lua
${HOLD}
local bound = tonumber(ARGV[2])
if bound > 0 then
  local held = redis.call('XLEN', KEYS[1]) + redis.call('ZCARD', KEYS[2])
  if held + (#ARGV - 2) / ${SEND_SLOTS} > bound then return {0, held} end
end
local now
for i = 3, #ARGV, ${SEND_SLOTS} do
  local delay = tonumber(ARGV[i + 3])
  if delay > 0 then
    if now == nil then
      ${SERVER_NOW.replace('local now = ', 'now = ')}
    end
    local written = hold(KEYS[5], KEYS[4], KEYS[2], now + delay, ARGV[i], ARGV[i + 1], ARGV[i + 2])
    if type(written) == 'table' and written.err then return redis.error_reply(written.err) end
  else
    redis.call('XADD', KEYS[1], '*', 'i', ARGV[i], 'h', ARGV[i + 1], 'b', ARGV[i + 2])
  end
end
redis.call('HSETNX', KEYS[3], ARGV[1], 'work')
return {1, 0}`,
};
