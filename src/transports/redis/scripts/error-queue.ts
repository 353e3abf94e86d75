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

/** What {@link SEND_BACK} replies. */
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
 * Sends one entry back: when the entry still exists and the destination is
 * registered `work`, adds the copy to the destination stream first, then
 * removes the entry.
 *
 * KEYS: error stream, destination stream, the queues hash, the error queue's lease hash.
 * ARGV: entry id, destination queue, message id, headers JSON, body, consumer group.
 */
export const SEND_BACK: Script = {
  name: 'sendBack',
  lua: `#!lua
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then return ${SEND_BACK_REPLY.gone} end
local kind = redis.call('HGET', KEYS[3], ARGV[2])
if kind == 'error' then return ${SEND_BACK_REPLY.errorQueue} end
if kind ~= 'work' then return ${SEND_BACK_REPLY.missing} end
redis.call('XADD', KEYS[2], '*', 'i', ARGV[3], 'h', ARGV[4], 'b', ARGV[5])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('XACK', KEYS[1], ARGV[6], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
return ${SEND_BACK_REPLY.sent}
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
