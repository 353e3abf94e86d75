import { HOLD } from './hold.js';
import { SERVER_NOW } from './server-time.js';
import type { Script } from './runner.js';

/** How many ARGV slots one settlement takes in {@link SETTLE}. */
export const SETTLE_SLOTS = 7;

/** The script's body, shared by both variants below. */
const BODY = `${HOLD}
local group, consumer, recordMs = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now
local results = {}
local function fields(id)
  local found = redis.call('XRANGE', KEYS[1], id, id)
  if #found == 0 then return nil end
  local f, list = {}, found[1][2]
  for i = 1, #list, 2 do f[list[i]] = list[i + 1] end
  return f
end
for s = 4, #ARGV, ${SETTLE_SLOTS} do
  local kind, id, count, record = ARGV[s], ARGV[s + 1], tonumber(ARGV[s + 2]), KEYS[tonumber(ARGV[s + 3])]
  local result = 0
  local held = redis.pcall('XPENDING', KEYS[1], group, id, id, 1)
  if type(held) == 'table' and held.err == nil and #held == 1 and held[1][2] == consumer and tonumber(held[1][4]) == count then
    local f = nil
    if kind ~= 'a' then f = fields(id) end
    local copied = true
    if kind == 'r' then
      if f == nil then copied = false else
        local delay = tonumber(ARGV[s + 4])
        local written
        if delay <= 0 then
          written = redis.pcall('XADD', KEYS[1], '*', 'i', f['i'] or id, 'h', ARGV[s + 5], 'b', f['b'] or '')
        else
          if now == nil then
            ${SERVER_NOW.replace('local now = ', 'now = ')}
          end
          written = hold(KEYS[6], KEYS[3], KEYS[2], now + delay, f['i'] or id, ARGV[s + 5], f['b'] or '')
        end
        if type(written) == 'table' and written.err then result = written.err; copied = false end
      end
    elseif kind == 'd' then
      if f == nil then copied = false else
        local written = redis.pcall('XADD', KEYS[tonumber(ARGV[s + 4])], '*', 'i', f['i'] or id, 'h', ARGV[s + 5], 'b', f['b'] or '')
        if type(written) == 'table' and written.err then result = written.err; copied = false
        else redis.call('HSET', KEYS[5], ARGV[s + 6], 'error') end
      end
    elseif kind == 'l' then
      if f == nil then copied = false else
        local inherited = (tonumber(f['c']) or 0) + tonumber(ARGV[s + 4])
        local written = redis.pcall('XADD', KEYS[1], '*', 'i', f['i'] or id, 'h', f['h'] or '{}', 'b', f['b'] or '', 'c', inherited)
        if type(written) == 'table' and written.err then result = written.err; copied = false end
      end
    end
    if copied then
      redis.call('XACK', KEYS[1], group, id)
      redis.call('XDEL', KEYS[1], id)
      redis.call('HDEL', KEYS[4], id)
      redis.call('SET', record, consumer, 'PX', recordMs)
      result = 1
    elseif result == 0 then
      -- Held, but the entry was deleted from the stream meanwhile (an operator's purge): nothing to copy.
      redis.call('XACK', KEYS[1], group, id)
      redis.call('HDEL', KEYS[4], id)
    end
  elseif redis.call('GET', record) == consumer then
    -- Done by this consumer already: this is the same settlement sent again (its reply was lost).
    result = 1
  end
  results[#results + 1] = result
end
return results`;

/**
 * Settles deliveries of one queue, each on its own: an ack, a retry later
 * (a copy in the delayed set), a dead-letter (a copy in an error stream) or
 * a release (a copy at the end of the stream that keeps counting
 * deliveries). A settlement applies only while this consumer still holds
 * the entry with the same delivery count: a lease taken over, or a second
 * settlement, finds nothing and changes nothing.
 *
 * Each copy is written first, and the entry is acked and deleted only once
 * the copy is written, so an error halfway leaves the original in place.
 *
 * A settlement that takes effect leaves a record (its key names the entry
 * and delivery count, its value the consumer) for `record ms`: the same
 * settlement run again, as ioredis does with a command whose reply a
 * connection cut lost, finds the record and answers done instead of gone.
 *
 * KEYS: stream, delayed, delayed data, leases, queues, seq, then the record
 * key of each settlement and the error streams the dead-letters name.
 * ARGV: group, consumer, record ms, then 7 slots per settlement: kind
 * (`a`, `r`, `d`, `l`), entry id, delivery count, KEYS index of its record,
 * and
 * - `r`: delay ms, headers JSON;
 * - `d`: KEYS index of the error stream, headers JSON, error queue name;
 * - `l`: deliveries the copy inherits on top of its own.
 * Replies one result per settlement: 1 done (now, or by this consumer
 * before), 0 gone (not held by this consumer with that count, or the entry
 * was deleted), or an error text.
 */
export const SETTLE: Script = {
  name: 'settle',
  lua: `#!lua
${BODY}`,
};

/**
 * {@link SETTLE} for a batch of acks only, which the server runs even over
 * `maxmemory` (`allow-oom`): an ack writes nothing new, it only frees
 * memory, so a consumer can keep acknowledging what it handled while the
 * server refuses new writes.
 */
export const SETTLE_ACKS: Script = {
  name: 'settle-acks',
  lua: `#!lua flags=allow-oom
${BODY}`,
};
