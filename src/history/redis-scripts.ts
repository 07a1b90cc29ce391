// The Lua scripts of the redis history drivers (history/redis.ts): a channel's numbering
// and storing in one step, and its reads (answers to subscriptions, REST pages). A script
// that finds the meta of another Redis run (its run_id) starts a new epoch.

//
// A channel without a meta (never numbered, or expired) stores nothing when read: its epoch
// is derived from the run_id and the meta_ttl period of Redis's clock, the same on every
// node, and its first message creates the meta under that epoch (a position read while it
// was empty goes on). A meta expires meta_ttl after its last use at the earliest, so one
// created again is in a later period: a new epoch. ARGV[2] is meta_ttl (ms) in both scripts.
const RUN_ID = `local rid = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
local m = redis.call('HMGET', KEYS[1], 'e', 's', 'r')
local epoch, serial = m[1], tonumber(m[2])
local empty = (not epoch) or (not serial)
local fresh = empty or m[3] ~= rid
if fresh then
  if empty then
    local t = redis.call('TIME')
    local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    epoch = 'z' .. string.sub(rid, 1, 16) .. '.' .. string.format('%d', math.floor(ms / tonumber(ARGV[2])))
  else
    epoch = ARGV[1]
  end
  serial = 0
  redis.call('DEL', KEYS[2])
end
`;

/**
 * KEYS meta, list; ARGV new epoch, meta_ttl ms, size, ttl ms, now ms, publish command,
 * subject, header, frame, tags prefix. A stored entry is `<now ms> <frame>`, or with tags
 * `<now ms> T<tags length> <tags><frame>` (a frame starts with '{'; see entryOf).
 */
export const PUBLISH_LUA = RUN_ID + `serial = serial + 1
redis.call('HSET', KEYS[1], 'e', epoch, 's', serial, 'r', rid)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[5] .. ' ' .. ARGV[10] .. ARGV[9])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[3]), -1)
redis.call('PEXPIRE', KEYS[2], ARGV[4])
redis.call(ARGV[6], ARGV[7], 'p\\n' .. epoch .. '\\n' .. serial .. '\\n' .. ARGV[8] .. '\\n' .. ARGV[9])
return serial
`;

/**
 * KEYS meta, list; ARGV new epoch, meta_ttl ms, direction f|b, lo, hi (-1: none), max,
 * publish command ('' : no marker), subject, marker header, cap (bytes; 0: none). Serials
 * lo…hi that are stored, at most max of them from the direction's start, and of those the
 * first within cap bytes (one at least: a chunk, history/owner.ts chunkOf). Returns /
 * publishes epoch, S, the first serial returned, and the entries (length-prefixed in the
 * marker: a frame may hold '\n').
 */
export const READ_LUA = RUN_ID + `if fresh and not empty then redis.call('HSET', KEYS[1], 'e', epoch, 's', 0, 'r', rid) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local len = redis.call('LLEN', KEYS[2])
local first = serial - len + 1
local lo = math.max(first, tonumber(ARGV[4]))
local hi = serial
if tonumber(ARGV[5]) >= 0 then hi = math.min(hi, tonumber(ARGV[5])) end
local max = tonumber(ARGV[6])
if hi - lo + 1 > max then
  if ARGV[3] == 'f' then hi = lo + max - 1 else lo = hi - max + 1 end
end
local items = {}
if lo <= hi and max > 0 then items = redis.call('LRANGE', KEYS[2], lo - first, hi - first) end
local cap = tonumber(ARGV[10])
if cap > 0 then
  local bytes = 0
  for i, it in ipairs(items) do
    bytes = bytes + #it
    if bytes > cap and i > 1 then
      for j = #items, i, -1 do items[j] = nil end
      break
    end
  end
end
if ARGV[7] ~= '' then
  local parts = {'r\\n', ARGV[9], '\\n', epoch, '\\n', serial, '\\n', lo, '\\n'}
  for _, it in ipairs(items) do
    parts[#parts + 1] = #it .. ':'
    parts[#parts + 1] = it
  end
  redis.call(ARGV[7], ARGV[8], table.concat(parts))
end
return {epoch, serial, lo, items}
`;
