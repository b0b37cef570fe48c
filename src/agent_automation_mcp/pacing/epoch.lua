-- The marker of the data Redis holds: set once by the first replica to reach it, gone when Redis restarts empty.
-- A replica that finds another marker than the one it last saw knows the shared logs were lost.
-- KEYS: the marker. ARGV: a fresh marker, set if there is none. Returns the marker Redis holds now.
local kept = redis.call('GET', KEYS[1])
if kept then return kept end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
