import { SERVER_NOW } from './server-time.js';
import type { Script } from './runner.js';

/**
 * Extends the lease of an entry this consumer holds with this delivery
 * count: its idle time is set so that `ms` remain of the consumer's
 * `leaseMs`; a lease longer than `leaseMs` is also written to the leases
 * hash, which takeovers respect. A lease never shortens: the idle time only
 * goes down, and a longer lease in the hash stays.
 *
 * KEYS: stream, leases. ARGV: group, consumer, entry id, delivery count,
 * ms, leaseMs. Replies 1, or 0 when the entry is no longer held.
 */
export const EXTEND: Script = {
  name: 'extend',
  lua: `#!lua
local group, consumer, id = ARGV[1], ARGV[2], ARGV[3]
local held = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
if type(held) ~= 'table' or held.err ~= nil or #held ~= 1 or held[1][2] ~= consumer or tonumber(held[1][4]) ~= tonumber(ARGV[4]) then return 0 end
local ms, lease = tonumber(ARGV[5]), tonumber(ARGV[6])
local idle = math.min(math.max(lease - ms, 0), tonumber(held[1][3]))
redis.call('XCLAIM', KEYS[1], group, consumer, 0, id, 'IDLE', idle, 'JUSTID')
${SERVER_NOW}
local kept = tonumber(redis.call('HGET', KEYS[2], id) or '0')
if ms > lease and now + ms > kept then
  redis.call('HSET', KEYS[2], id, now + ms)
elseif kept <= now then
  redis.call('HDEL', KEYS[2], id)
end
return 1`,
};
