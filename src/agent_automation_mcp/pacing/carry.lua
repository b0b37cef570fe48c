-- Hand Redis the sends one replica made while it could not reach it, so that every replica counts them again.
-- KEYS: per bucket of one token, its log (stamp bounds in microseconds, largest first).
-- ARGV: margin, then per bucket: limit, window, n, then n ages of those sends' bounds (microseconds before now;
-- below 0 for a bound still ahead). Returns now (microseconds): each send is logged at now less its age.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local margin, a = tonumber(ARGV[1]), 2
for i = 1, #KEYS do
  local log = KEYS[i]
  local limit, window, n = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local sends = {}
  for _, sent in ipairs(redis.call('LRANGE', log, 0, -1)) do sends[#sends + 1] = tonumber(sent) end
  for k = 1, n do sends[#sends + 1] = now - tonumber(ARGV[a + 2 + k]) end
  table.sort(sends, function(x, y) return x > y end)
  redis.call('DEL', log)
  for k = 1, math.min(#sends, limit) do redis.call('RPUSH', log, string.format('%.0f', sends[k])) end
  if #sends > 0 then redis.call('PEXPIRE', log, math.ceil((2 * window + margin) / 1000) + 1000) end
  a = a + 3 + n
end
return now
