import type { Script } from './runner.js';

/**
 * Removes a consumer from a queue's group when it holds no entry, so
 * stopped processes do not pile up in `XINFO CONSUMERS`.
 *
 * KEYS: stream. ARGV: group, consumer. Replies 1 when removed, 0 when it
 * still holds entries (they come back to others after their lease) or the
 * group is gone.
 */
export const FORGET_CONSUMER: Script = {
  name: 'forget-consumer',
  lua: `#!lua
local held = redis.pcall('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if type(held) ~= 'table' or held.err ~= nil or #held > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1`,
};
