/**
 * The script of queue inspection: read-only (`flags=no-writes`), so it also
 * runs on a replica and under `maxmemory`.
 */
import type { Script } from './runner.js';

/**
 * Reads the depths of several queues at one instant. Replies three numbers
 * per queue: the stream's length, its entries pending in the consumer group
 * (0 without the group), and its delayed retries.
 *
 * KEYS: per queue, its stream then its delayed set. ARGV: consumer group.
 */
export const QUEUE_DEPTHS: Script = {
  name: 'queueDepths',
  lua: `#!lua flags=no-writes
local out = {}
for i = 1, #KEYS, 2 do
  local length = redis.call('XLEN', KEYS[i])
  local pending = 0
  if redis.call('EXISTS', KEYS[i]) == 1 then
    for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[i])) do
      local fields = {}
      for j = 1, #group, 2 do fields[group[j]] = group[j + 1] end
      if fields['name'] == ARGV[1] then pending = fields['pending'] end
    end
  end
  out[#out + 1] = length
  out[#out + 1] = pending
  out[#out + 1] = redis.call('ZCARD', KEYS[i + 1])
end
return out
`,
};
