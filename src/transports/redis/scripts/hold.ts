/**
 * Lua defining `hold(seq, data, set, due, id, headers, body)`: keeps a
 * message in a queue's delayed set until `due` (server milliseconds), under
 * a new token taken from the `seq` counter, its fields in the `data` hash.
 * Returns the reply of the last write: a table with `err` when the server
 * refused one (out of memory). Delayed retries ({@link SETTLE}) and delayed
 * sends ({@link SEND}) are held the same way, and promoted by {@link PROMOTE}.
 */
export const HOLD = `local function hold(seq, data, set, due, id, headers, body)
  local token = tostring(redis.call('INCR', seq))
  local written = redis.pcall('HSET', data, token .. ':i', id, token .. ':h', headers, token .. ':b', body)
  if type(written) ~= 'table' then written = redis.pcall('ZADD', set, due, token) end
  return written
end`;
