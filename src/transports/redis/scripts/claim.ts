import { SERVER_NOW } from './server-time.js';
import type { Script } from './runner.js';

/**
 * Takes over entries whose lease ran out: pending longer than `leaseMs`
 * and not extended past now. Entries deleted from the stream meanwhile are
 * acked away.
 *
 * KEYS: stream, leases. ARGV: group, consumer, leaseMs, the most to take.
 * Replies `{entry id, fields, delivery count}` for each entry taken.
 */
export const CLAIM: Script = {
  name: 'claim',
  lua: `#!lua
${SERVER_NOW}
local group, consumer, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local stale = redis.call('XPENDING', KEYS[1], group, 'IDLE', lease, '-', '+', tonumber(ARGV[4]))
local taken = {}
for _, entry in ipairs(stale) do
  local id = entry[1]
  local extended = redis.call('HGET', KEYS[2], id)
  if (not extended) or tonumber(extended) <= now then
    local claimed = redis.call('XCLAIM', KEYS[1], group, consumer, lease, id)
    if #claimed == 0 or not claimed[1] then
      redis.call('XACK', KEYS[1], group, id)
      redis.call('HDEL', KEYS[2], id)
    else
      redis.call('HDEL', KEYS[2], id)
      taken[#taken + 1] = {claimed[1][1], claimed[1][2], tonumber(entry[4]) + 1}
    end
  end
end
return taken`,
};
