-- One send ended: if it was answered, lower its stamp bound to now in every bucket (now, on Redis' clock, is
-- after the answer, so the service stamped the send before it); if it never left, remove it. The same rule as
-- sliding_log.BucketLog.settle.
-- KEYS: per bucket, its log (stamp bounds in microseconds, largest first) and its mode hash.
-- ARGV: the bound the send was logged with (as acquire.lua wrote it), outcome (0: answered and let through,
--       1: answered 429, 2: no answer came, 3: never sent). Returns 0.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local stamp, outcome = ARGV[1], tonumber(ARGV[2])
local settled = string.format('%.0f', now)
for i = 1, #KEYS / 2 do
  local log, mode = KEYS[2 * i - 1], KEYS[2 * i]
  local ttl = redis.call('PTTL', log)
  if outcome == 3 then
    redis.call('LREM', log, 1, stamp)
  elseif outcome < 2 and now < tonumber(stamp) and redis.call('LREM', log, 1, stamp) == 1 then
    -- The first bound below now: the settled one goes before it, keeping the order. Read from the largest in
    -- short runs, as only the sends of the last margin's time lie above it, however long the log (a large limit).
    local below, from, run = false, 0, {}
    repeat
      run = redis.call('LRANGE', log, from, from + 31)
      for _, bound in ipairs(run) do
        if tonumber(bound) < now then below = bound break end
      end
      from = from + 32
    until below or #run < 32
    if below then redis.call('LINSERT', log, 'BEFORE', below, settled) else redis.call('RPUSH', log, settled) end
    if ttl > 0 then redis.call('PEXPIRE', log, ttl) end  -- a log of one was deleted by LREM and made anew
  end
  -- A probe let through ends the probing; any other end lets the next send probe (after a 429 the replica
  -- has run penalise.lua first, so that pause holds it back).
  if redis.call('HGET', mode, 'probe') == stamp then
    if outcome == 0 then redis.call('HDEL', mode, 'probing', 'probe', 'probe_until')
    else redis.call('HDEL', mode, 'probe', 'probe_until') end
  end
end
return 0
