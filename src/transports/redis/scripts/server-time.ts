/** Lua that sets `now` to the server's time in whole milliseconds: due times are the server's, never a process's. */
export const SERVER_NOW = `local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)`;
