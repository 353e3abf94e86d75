import { SERVER_NOW } from './server-time.js';
import type { Script } from './runner.js';

/**
 * The most pending entries one takeover looks at beyond the ones it takes:
 * entries whose lease was extended are skipped, and past this many the
 * takeover stops, so a pending list of many extended leases never blocks
 * the server for long (the next takeover looks again from the oldest).
 */
export const CLAIM_SKIP_LIMIT = 1_000;

/** How many leases a consumer that holds nothing may stay idle before a takeover removes it from the group. */
export const FORGET_AFTER_LEASES = 10;

/** The fewest pending entries one page of a takeover reads. */
const CLAIM_PAGE = 100;

/**
 * Takes over entries whose lease ran out: pending longer than `leaseMs`
 * and not extended past now, oldest first. It pages through the pending
 * entries list past the extended ones until it has taken the most it may
 * or skipped {@link CLAIM_SKIP_LIMIT} entries, so abandoned entries behind
 * many extended leases are still taken over. Entries deleted from the
 * stream meanwhile are acked away. Consumers other than this one that hold
 * nothing and were idle for {@link FORGET_AFTER_LEASES} leases (processes
 * that crashed, whose entries were taken over) are removed from the group;
 * one that was only quiet is added again by its next read.
 *
 * KEYS: stream, leases. ARGV: group, consumer, leaseMs, the most to take.
 * Replies `{entry id, fields, delivery count}` for each entry taken.
 */
export const CLAIM: Script = {
  name: 'claim',
  lua: `#!lua
${SERVER_NOW}
local group, consumer, lease, room = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local taken = {}
local skipped = 0
local start = '-'
while #taken < room and skipped < ${CLAIM_SKIP_LIMIT} do
  local page = math.max(room - #taken, ${CLAIM_PAGE})
  local stale = redis.call('XPENDING', KEYS[1], group, 'IDLE', lease, start, '+', page)
  for _, entry in ipairs(stale) do
    if #taken >= room or skipped >= ${CLAIM_SKIP_LIMIT} then break end
    local id = entry[1]
    local extended = redis.call('HGET', KEYS[2], id)
    if (not extended) or tonumber(extended) <= now then
      local claimed = redis.call('XCLAIM', KEYS[1], group, consumer, lease, id)
      if #claimed == 0 or not claimed[1] then
        redis.call('XACK', KEYS[1], group, id)
      else
        taken[#taken + 1] = {claimed[1][1], claimed[1][2], tonumber(entry[4]) + 1}
      end
      redis.call('HDEL', KEYS[2], id)
    else
      skipped = skipped + 1
    end
    start = '(' .. id
  end
  if #stale < page then break end
end
for _, fields in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], group)) do
  local c = {}
  for i = 1, #fields, 2 do c[fields[i]] = fields[i + 1] end
  if c['name'] ~= consumer and tonumber(c['pending']) == 0 and tonumber(c['idle']) > lease * ${FORGET_AFTER_LEASES} then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], group, c['name'])
  end
end
return taken`,
};
