/**
 * The scripts of the error-queue operations. Each one that removes an entry
 * also acknowledges it in the consumer group (an error store's ingester may
 * hold it) and forgets its extended lease, so nothing of it is left behind.
 *
 * The send-back adds data, so it starts with `#!lua`: over `maxmemory` the
 * server refuses it whole rather than failing halfway. Deleting and purging
 * only remove data and cannot fail halfway, so they run over `maxmemory`
 * too (`flags=allow-oom`): removing error entries is how an operator frees
 * memory then.
 */
import type { Script } from './runner.js';

/** What {@link SEND_BACK} replies for each entry. */
export const SEND_BACK_REPLY = {
  /** The copy was added to the destination and the entry removed. */
  sent: 1,
  /** No entry has that id (any more): nothing was sent. */
  gone: 0,
  /** The destination is not a registered work queue: nothing was sent, the entry stays. */
  missing: -1,
  /** The destination is registered as an error queue: nothing was sent, the entry stays. */
  errorQueue: -2,
} as const;

/**
 * Sends entries back, each on its own terms: when the entry still exists
 * and its destination is registered `work`, adds the copy to the
 * destination stream, then removes the entry. Replies one
 * {@link SEND_BACK_REPLY} per entry, in order. The whole script is one step
 * for the server, so each entry moves once however many send-backs ask for
 * it at the same time.
 *
 * KEYS: error stream, the queues hash, the error queue's lease hash, then
 * the `d` destination streams.
 * ARGV: consumer group, `d`, the `d` destination queue names (in the order
 * of their streams), then per entry: entry id, its destination's index
 * (1..d), message id, headers JSON, body.
 */
export const SEND_BACK: Script = {
  name: 'sendBack',
  lua: `#!lua
local d = tonumber(ARGV[2])
local kinds = {}
for j = 1, d do kinds[j] = redis.call('HGET', KEYS[2], ARGV[2 + j]) end
local replies = {}
for i = 3 + d, #ARGV, 5 do
  local id, j = ARGV[i], tonumber(ARGV[i + 1])
  local reply
  if #redis.call('XRANGE', KEYS[1], id, id) == 0 then reply = ${SEND_BACK_REPLY.gone}
  elseif kinds[j] == 'error' then reply = ${SEND_BACK_REPLY.errorQueue}
  elseif kinds[j] ~= 'work' then reply = ${SEND_BACK_REPLY.missing}
  else
    redis.call('XADD', KEYS[3 + j], '*', 'i', ARGV[i + 2], 'h', ARGV[i + 3], 'b', ARGV[i + 4])
    redis.call('XDEL', KEYS[1], id)
    redis.call('XACK', KEYS[1], ARGV[1], id)
    redis.call('HDEL', KEYS[3], id)
    reply = ${SEND_BACK_REPLY.sent}
  end
  replies[#replies + 1] = reply
end
return replies
`,
};

/**
 * Removes one entry; replies 1 when it was there, 0 otherwise.
 *
 * KEYS: error stream, its lease hash. ARGV: entry id, consumer group.
 */
export const DELETE_ENTRY: Script = {
  name: 'deleteEntry',
  lua: `#!lua flags=allow-oom
local removed = redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('XACK', KEYS[1], ARGV[2], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return removed
`,
};

/**
 * Removes up to ARGV[2] of the oldest entries with ids up to ARGV[1];
 * replies how many it removed.
 *
 * KEYS: error stream, its lease hash. ARGV: last entry id, most entries, consumer group.
 */
export const PURGE_CHUNK: Script = {
  name: 'purgeChunk',
  lua: `#!lua flags=allow-oom
local entries = redis.call('XRANGE', KEYS[1], '-', ARGV[1], 'COUNT', ARGV[2])
if #entries == 0 then return 0 end
local ids = {}
for i, entry in ipairs(entries) do ids[i] = entry[1] end
local removed = redis.call('XDEL', KEYS[1], unpack(ids))
redis.call('XACK', KEYS[1], ARGV[3], unpack(ids))
redis.call('HDEL', KEYS[2], unpack(ids))
return removed
`,
};
