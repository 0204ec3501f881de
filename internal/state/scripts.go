package state

// The Lua scripts, run with EVAL (Redis caches them by digest). Each names
// its keys in KEYS, so they run in Cluster too: all keys of a pool share
// one hash tag.

// beatScript writes this replica's heartbeat and returns the live replicas.
//
//	KEYS[1] T:load:<replica>   KEYS[2] T:replicas   KEYS[3] T:state:<replica>
//	ARGV[1] replica id         ARGV[2] expiry in ms (3 heartbeats)
//	ARGV[3] most members returned
//	ARGV[4] the ReplicaState value
//	ARGV[5..] field, value pairs of the legacy load hash
//
// It replaces the state and the hash (so instances that left disappear),
// sets their expiry, scores the replica in the zset with Redis's clock (so
// replica clocks do not matter), drops members not seen within the expiry
// and members scored more than the expiry ahead of now (no replica wrote
// those: they would never expire), and returns {number of future members
// dropped, {the remaining members, most recent first, at most ARGV[3]},
// number of remaining members}.
const beatScript = `
if redis.replicate_commands then redis.replicate_commands() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[3], ARGV[4], 'PX', ttl)
redis.call('DEL', KEYS[1])
for i = 5, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (now - ttl))
local future = redis.call('ZREMRANGEBYSCORE', KEYS[2], '(' .. (now + ttl), '+inf')
return {future, redis.call('ZREVRANGE', KEYS[2], 0, tonumber(ARGV[3]) - 1), redis.call('ZCARD', KEYS[2])}
`

// leaseScript takes a lease or renews it for its holder: SET NX PX, or
// PEXPIRE when the value is already ours. Returns 1 when ARGV[1] holds the
// lease afterwards, 0 when someone else does.
//
//	KEYS[1] the lease key   ARGV[1] holder id   ARGV[2] ttl in ms
const leaseScript = `
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
if v == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`

// releaseScript deletes a lease if ARGV[1] holds it.
//
//	KEYS[1] the lease key   ARGV[1] holder id
const releaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`

// boundedGetScript is GET that does not return values above a size: the
// value, nil when the key does not exist, or the value's length (an
// integer) when it is above ARGV[1] bytes.
//
//	KEYS[1] the key   ARGV[1] largest value returned, in bytes
const boundedGetScript = `
local n = redis.call('STRLEN', KEYS[1])
if n > tonumber(ARGV[1]) then return n end
return redis.call('GET', KEYS[1])
`
