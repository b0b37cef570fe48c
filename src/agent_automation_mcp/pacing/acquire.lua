-- Check-and-charge one send against several buckets of one token, atomically, on Redis' clock.
-- The same rule as sliding_log.py: the log of stamp bounds, a pause, probes and even spacing after a 429.
-- KEYS: per bucket, its log (stamp bounds in microseconds, largest first) and its mode hash.
-- ARGV: charge (1: charge when free; 0: only estimate), ahead (queued before this send), margin, probe lease,
--       then per bucket: limit, cap (the share this caller may fill), window, spacing interval, stagger, catch-up,
--       since and held: the caller's own sends this log took from `since` on (on this clock, the earliest of them;
--       0 for none), each logged with a bound at or after it.
-- Returns {1, bound} when charged (bound: what the send was logged with, for settle.lua), else {0, wait}, or {2, 0}
-- without charging when a log holds fewer bounds from `since` on than the caller's sends it took there: Redis lost
-- them (it restarted empty), and the caller must give them back first.
-- Bounds are compared with bounds this clock wrote, never with the caller's time: a call that reaches Redis late (a
-- starved caller, a wait for a connection, a paused Redis) cannot take sends that left the window meanwhile for lost.
-- Times in microseconds. A log holds no bound older than two windows and the margin (the 429 handler's look back, see penalise.lua), and
-- never more than the limit: the rule reads nothing else.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local charge, ahead, margin, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local buckets = #KEYS / 2
local ready = now
local slots = {}  -- per bucket in spacing mode: the slot of its last send (see sliding_log.CATCH_UP)
local probing = {}  -- per bucket: this send is its probe
for i = 1, buckets do
  local log, mode, a = KEYS[2 * i - 1], KEYS[2 * i], 4 + 8 * (i - 1)
  local limit, cap, window = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local interval, stagger, catch_up = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
  local at = now
  local first = redis.call('LINDEX', log, cap - 1 - ahead % cap)
  if first then at = tonumber(first) + window end
  at = at + math.floor(ahead / cap) * (window + margin)
  if at > ready then ready = at end
  local state = redis.call('HMGET', mode, 'pause_until', 'spacing_until', 'slot', 'last', 'probing', 'probe_until')
  if state[1] and tonumber(state[1]) > ready then ready = tonumber(state[1]) end
  local last = state[4] and tonumber(state[4])
  if state[2] and tonumber(state[2]) > now then
    local slot = -math.huge  -- when the last send was due: its slot, if it has one, else when it left
    if last then slot = last end
    if state[3] and tonumber(state[3]) >= slot - catch_up then slot = tonumber(state[3]) end
    slots[i] = slot
    at = slot + (ahead + 1) * interval
  elseif last then
    local oldest = redis.call('LINDEX', log, limit - 1)
    if oldest and tonumber(oldest) > now - 2 * window then
      at = last + (ahead + 1) * stagger  -- a hot bucket: see sliding_log.stagger
    end
  end
  if at > ready then ready = at end
  if state[6] and tonumber(state[6]) > now then  -- no answer to the probe yet: look again an interval on
    at = math.min(tonumber(state[6]), now + interval)
    if at > ready then ready = at end
  end
  probing[i] = state[5] ~= false
end
-- How many bounds of a log (largest first) lie above `horizon`: found by halving, so a long log (a large limit)
-- costs a few reads.
local function above(log, horizon)
  local lo, hi = 0, redis.call('LLEN', log)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if tonumber(redis.call('LINDEX', log, mid)) > horizon then lo = mid + 1 else hi = mid end
  end
  return lo
end
-- No rule removes a bound before two windows have passed (the stale ones below, a log's expiry) or without keeping
-- `limit` larger ones (LTRIM, carry.lua); a settled bound stays at or after its departure (settle.lua). Past
-- since + two windows the caller's sends may have gone by those rules: nothing is concluded.
local lost = false
for i = 1, buckets do
  local a = 4 + 8 * (i - 1)
  local limit, window, since, held = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 7]),
    tonumber(ARGV[a + 8])
  if held > 0 and now < since + 2 * window and above(KEYS[2 * i - 1], since - 1) < math.min(held, limit) then
    lost = true
  end
end
local charged = charge == 1 and ready <= now and not lost
local bound = string.format('%.0f', now + margin)
if charged then
  local departed = string.format('%.0f', now)
  for i = 1, buckets do
    local log, mode, a = KEYS[2 * i - 1], KEYS[2 * i], 4 + 8 * (i - 1)
    local limit, window = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 3])
    local keep = math.ceil((2 * window + margin) / 1000) + 1000  -- ms: the 429 handler looks two windows back
    if slots[i] then
      local slot = slots[i] + tonumber(ARGV[a + 4])
      if now - slot > tonumber(ARGV[a + 6]) then slot = now end
      redis.call('HSET', mode, 'slot', string.format('%.0f', slot))
    end
    redis.call('HSET', mode, 'last', departed)
    if probing[i] then redis.call('HSET', mode, 'probe', bound, 'probe_until', string.format('%.0f', now + lease)) end
    if redis.call('PTTL', mode) < keep then redis.call('PEXPIRE', mode, keep) end  -- never shortens a 429's
    redis.call('LPUSH', log, bound)  -- no smaller than any bound logged: those left earlier
    redis.call('LTRIM', log, 0, limit - 1)
    local stale = now - 2 * window - margin  -- older bounds can no longer matter to any rule
    local oldest = redis.call('LINDEX', log, -1)
    while oldest and tonumber(oldest) <= stale do
      redis.call('RPOP', log)
      oldest = redis.call('LINDEX', log, -1)
    end
    redis.call('PEXPIRE', log, keep)
  end
end
if charged then return {1, tonumber(bound)} elseif lost then return {2, 0} end
return {0, ready - now}
