-- Record an unexpected 429 for every replica: the buckets that can explain it (N sends in the last two
-- windows; the tightest alone when none can) pause, then probe one send at a time, then switch to even spacing.
-- The same rule as sliding_log.py.
-- KEYS: per bucket, its log and its mode hash.
-- ARGV: pause (-1 when the service gave no Retry-After), jitter (0..1), spacing_for, strike_memory,
--       min_pause, backoff_cap, then per bucket: limit, window. Times in microseconds.
-- Returns the pause in microseconds.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local given, jitter = tonumber(ARGV[1]), tonumber(ARGV[2])
local spacing_for, strike_memory = tonumber(ARGV[3]), tonumber(ARGV[4])
local min_pause, backoff_cap = tonumber(ARGV[5]), tonumber(ARGV[6])
local buckets = #KEYS / 2
local suspects = {}
for i = 1, buckets do
  local limit, window = tonumber(ARGV[5 + 2 * i]), tonumber(ARGV[6 + 2 * i])
  local oldest = redis.call('LINDEX', KEYS[2 * i - 1], limit - 1)
  if oldest and tonumber(oldest) > now - 2 * window then suspects[#suspects + 1] = i end
end
if #suspects == 0 then  -- none can explain it: the tightest bucket alone (see sliding_log.penalise)
  local tightest, rate = 1, math.huge
  for i = 1, buckets do
    local r = tonumber(ARGV[5 + 2 * i]) / tonumber(ARGV[6 + 2 * i])
    if r < rate then tightest, rate = i, r end
  end
  suspects[1] = tightest
end
local wait = 0
for _, i in ipairs(suspects) do
  local mode = KEYS[2 * i]
  local state = redis.call('HMGET', mode, 'last_429', 'strikes', 'pause_until')
  local strikes = 1
  if state[1] and now - tonumber(state[1]) <= strike_memory then strikes = tonumber(state[2]) + 1 end
  local pause = given
  if pause < 0 then pause = math.max(min_pause, jitter * math.min(backoff_cap, 1000000 * 2 ^ (strikes - 1))) end
  local pause_until = now + pause
  if state[3] and tonumber(state[3]) > pause_until then pause_until = tonumber(state[3]) end
  redis.call('HSET', mode, 'pause_until', string.format('%.0f', pause_until),
             'spacing_until', string.format('%.0f', now + spacing_for), 'strikes', strikes,
             'last_429', string.format('%.0f', now), 'probing', 1)
  redis.call('HDEL', mode, 'probe', 'probe_until')
  redis.call('PEXPIRE', mode, math.ceil(spacing_for / 1000))
  if pause_until - now > wait then wait = pause_until - now end
end
return wait
