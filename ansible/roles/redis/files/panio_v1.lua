#!lua name=panio_v1
local function acquire(KEYS, ARGV)
  if redis.call('exists', KEYS[1]) == 1 then return 0 end
  local t = redis.call('incr', KEYS[2])
  local floor = tonumber(ARGV[4])
  if t <= floor then t = floor + 1; redis.call('set', KEYS[2], t) end
  redis.call('hset', KEYS[1], 'token', t, 'owner', ARGV[5], 'secret', ARGV[6], 'info', ARGV[1], 'since', ARGV[3])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return t
end
-- retaking a lease whose key vanished: only when Redis lost its data (the target's token counter went too)
local function retake(KEYS, ARGV)
  if redis.call('exists', KEYS[2]) == 1 or redis.call('exists', KEYS[1]) == 1 then return 0 end
  local t = redis.call('incr', KEYS[2])
  local floor = tonumber(ARGV[4])
  if t <= floor then t = floor + 1; redis.call('set', KEYS[2], t) end
  redis.call('hset', KEYS[1], 'token', t, 'owner', ARGV[5], 'secret', ARGV[6], 'info', ARGV[1], 'since', ARGV[3])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return t
end
local function renew(KEYS, ARGV)
  if redis.call('hget', KEYS[1], 'token') == ARGV[1] and (ARGV[2] == '' or redis.call('hget', KEYS[1], 'owner') == ARGV[2]) then return redis.call('pexpire', KEYS[1], ARGV[3]) end
  return 0
end
local function release(KEYS, ARGV)
  if redis.call('hget', KEYS[1], 'token') == ARGV[1] and (ARGV[2] == '' or redis.call('hget', KEYS[1], 'owner') == ARGV[2]) then return redis.call('del', KEYS[1]) end
  return 0
end
-- an operator's override grant (bench_agent.leases.override), used once, for its target and operation only
local function take_override(KEYS, ARGV)
  if redis.call('hget', KEYS[1], 'target') ~= ARGV[1] or redis.call('hget', KEYS[1], 'op') ~= ARGV[2]
     or redis.call('hexists', KEYS[1], 'used') == 1 then return 0 end
  redis.call('hset', KEYS[1], 'used', ARGV[3])
  return 1
end
-- redis-py's lock release (kombu's mutex around its restore of unacknowledged messages)
local function lock_release(KEYS, ARGV)
  local token = redis.call('get', KEYS[1])
  if not token or token ~= ARGV[1] then return 0 end
  redis.call('del', KEYS[1])
  return 1
end
-- kombu's binding-expiry scripts (kombu.transport.redis REFRESH_BINDING, SWEEP_BINDINGS), as functions
local function refresh_binding(KEYS, ARGV)
  redis.call('SADD', KEYS[1], ARGV[1])
  local now = redis.call('TIME')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  redis.call('ZADD', KEYS[2], 'GT', ms + tonumber(ARGV[3]), ARGV[2])
end
local function sweep_bindings(KEYS, ARGV)
  local now = redis.call('TIME')
  local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
  local overdue = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms, 'LIMIT', 0, tonumber(ARGV[3]))
  for _, exchange in ipairs(overdue) do
    if redis.call('EXISTS', ARGV[2] .. exchange) == 0 then redis.call('DEL', ARGV[1] .. exchange) end
    redis.call('ZREM', KEYS[1], exchange)
  end
  return #overdue
end
redis.register_function('panio_v1_acquire', acquire)
redis.register_function('panio_v1_retake', retake)
redis.register_function('panio_v1_renew', renew)
redis.register_function('panio_v1_release', release)
redis.register_function('panio_v1_take_override', take_override)
redis.register_function('panio_v1_lock_release', lock_release)
redis.register_function('panio_v1_refresh_binding', refresh_binding)
redis.register_function('panio_v1_sweep_bindings', sweep_bindings)
redis.register_function{function_name='panio_v1_present', callback=function() return 1 end,
                        flags={'no-writes'}}
