"""panio's server-side Redis code: one Redis FUNCTION library, called with FCALL (docs/security.md, "The broker").

No broker user may run Lua of its own (EVAL, EVALSHA, SCRIPT LOAD): one ``while true do end`` would block Redis
for every host. The few atomic steps panio needs (a lease's acquire, retake, renew and release; an override
grant's one-time take; kombu's binding-expiry refresh and sweep, and the release of its mutex) are functions of one library, ``LIBRARY_NAME``,
which only a user allowed FUNCTION LOAD installs: the redis role's ``panio-admin`` at ``panio setup
--broker-admin``, or the controller's user on first use. Redis keeps it in its AOF. Everyone else may only FCALL
these functions. The name carries a version: a changed function is a new library beside the old one, so
processes of both versions run against one Redis during an upgrade.

``fcall`` loads the library itself when FCALL finds it missing (a Redis without ACLs: tests, a developer's own,
or one that lost its data); a user that may not load it gets ``NotConfigured`` (3) naming what loads it.
"""

from __future__ import annotations

LIBRARY_NAME = "panio_v1"

# A lease's token is above both Redis's counter and the durable high-water mark (ARGV[4]): a Redis that lost its
# counters in a restart carries on above every token ever handed out.
_ACQUIRE = """
  local t = redis.call('incr', KEYS[2])
  local floor = tonumber(ARGV[4])
  if t <= floor then t = floor + 1; redis.call('set', KEYS[2], t) end
  redis.call('hset', KEYS[1], 'token', t, 'owner', ARGV[5], 'secret', ARGV[6], 'info', ARGV[1], 'since', ARGV[3])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return t"""
_MINE = ("redis.call('hget', KEYS[1], 'token') == ARGV[1] and "
         "(ARGV[2] == '' or redis.call('hget', KEYS[1], 'owner') == ARGV[2])")

# Function names are global in Redis, so each carries the library's name.
LIBRARY = f"""#!lua name={LIBRARY_NAME}
local function acquire(KEYS, ARGV)
  if redis.call('exists', KEYS[1]) == 1 then return 0 end{_ACQUIRE}
end
-- retaking a lease whose key vanished: only when Redis lost its data (the target's token counter went too)
local function retake(KEYS, ARGV)
  if redis.call('exists', KEYS[2]) == 1 or redis.call('exists', KEYS[1]) == 1 then return 0 end{_ACQUIRE}
end
local function renew(KEYS, ARGV)
  if {_MINE} then return redis.call('pexpire', KEYS[1], ARGV[3]) end
  return 0
end
local function release(KEYS, ARGV)
  if {_MINE} then return redis.call('del', KEYS[1]) end
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
redis.register_function('{LIBRARY_NAME}_acquire', acquire)
redis.register_function('{LIBRARY_NAME}_retake', retake)
redis.register_function('{LIBRARY_NAME}_renew', renew)
redis.register_function('{LIBRARY_NAME}_release', release)
redis.register_function('{LIBRARY_NAME}_take_override', take_override)
redis.register_function('{LIBRARY_NAME}_lock_release', lock_release)
redis.register_function('{LIBRARY_NAME}_refresh_binding', refresh_binding)
redis.register_function('{LIBRARY_NAME}_sweep_bindings', sweep_bindings)
redis.register_function{{function_name='{LIBRARY_NAME}_present', callback=function() return 1 end,
                        flags={{'no-writes'}}}}
"""

HINT = ("the broker lacks panio's Redis functions ({name}): run `panio setup --host NAME --broker-admin URL` "
        "(the redis role's panio-admin user loads them), or start the controller once (its user loads them); "
        "docs/security.md, \"The broker\"")


def _missing(exc: Exception) -> bool:
    return "function not found" in str(exc).lower()


def load(r) -> None:
    """Install (or replace) the library in the Redis behind client ``r``; ``NotConfigured`` when its user may
    not."""
    import redis

    try:
        r.function_load(LIBRARY, replace=True)
    except redis.exceptions.NoPermissionError as exc:
        raise _not_loaded(r, exc) from None


def fcall(r, name: str, keys: list, args: list):
    """FCALL function ``name`` of the library through client ``r``, loading the library first if Redis lacks it."""
    import redis

    function = f"{LIBRARY_NAME}_{name}"
    try:
        return r.fcall(function, len(keys), *keys, *args)
    except redis.exceptions.NoPermissionError as exc:
        if "command" in str(exc):  # an ACL from before the functions (no +fcall); a key refused stays as it is
            raise _not_loaded(r, exc) from None
        raise
    except redis.exceptions.ResponseError as exc:
        if not _missing(exc):
            raise
    load(r)
    return r.fcall(function, len(keys), *keys, *args)


def ensure(r) -> None:
    """Load the library through ``r`` unless Redis has it (one FCALL_RO round trip): before FCALLs queued in a
    pipeline, whose missing function would only show at ``execute``."""
    import redis

    try:
        r.fcall_ro(f"{LIBRARY_NAME}_present", 0)
    except redis.exceptions.NoPermissionError as exc:  # no +fcall_ro: an ACL from before the functions
        raise _not_loaded(r, exc) from None
    except redis.exceptions.ResponseError as exc:
        if not _missing(exc):
            raise
        load(r)


def _not_loaded(r, exc: Exception):
    from bench_agent.errors import NotConfigured

    user = (getattr(r, "connection_pool", None) and r.connection_pool.connection_kwargs.get("username")) or "default"
    return NotConfigured(f"Redis user {user} may not use or load panio's Redis functions ({LIBRARY_NAME}): {exc}",
                         hint=HINT.format(name=LIBRARY_NAME))
