--- luxec.sandbox.limits: the `limits` of a sandbox policy — how much memory, how many processes and
--- how much CPU one session may use — checked with errors that name the key, turned into the
--- numbers the core writes to the session's cgroup, and the one line that says which limit a
--- session hit.
local M = {}

---@class luxec.Limits
---@field memory integer|string|nil  bytes, or "512M" (K, M or G: powers of 1024); at least 1M
---@field pids integer|nil  processes and threads at once (1 .. 4194304)
---@field cpu number|nil  CPUs' worth of time per period, e.g. 1.5 (at least 0.01)

M.CPU_PERIOD_US = 100000 -- the kernel's default period; quota = cpu × period
M.PIDS_MAX = 4194304 -- PID_MAX_LIMIT: pids.max takes no more
local MIN_MEMORY = 1024 * 1024 -- below this a bare number is more likely a slip than a wish
local MAX_MEMORY = 1 << 50
local UNITS = { K = 1024, M = 1024 * 1024, G = 1024 * 1024 * 1024 }
local KEYS = { memory = true, pids = true, cpu = true }

local function fail(msg, ...)
  error("bad sandbox policy: " .. msg:format(...), 0)
end

local function memory_bytes(v)
  local n
  if math.type(v) == "integer" then
    n = v
  elseif type(v) == "string" then
    local digits, unit = v:match("^(%d+)([KMGkmg]?)$")
    if not digits or #digits > 15 then
      fail("'limits.memory' must be bytes or a size like \"512M\" (K, M or G), got %q", v)
    end
    n = math.tointeger(tonumber(digits)) * (unit == "" and 1 or UNITS[unit:upper()])
  else
    fail("'limits.memory' must be bytes or a size like \"512M\" (K, M or G), got %s",
      type(v) == "number" and tostring(v) or type(v))
  end
  if n < MIN_MEMORY then
    fail("'limits.memory' must be at least 1M, got %s (bytes; write \"%sM\" for MiB)",
      tostring(v), tostring(v))
  end
  if n > MAX_MEMORY then
    fail("'limits.memory' is too large: %s", tostring(v))
  end
  return n
end

--- Check `limits` of a sandbox policy; returns what the core writes ({memory = bytes, pids,
--- cpu_quota_us, cpu_period_us}), nil for no limits, or raises an error naming the key.
---@param limits luxec.Limits|nil|false
---@return {memory: integer|nil, pids: integer|nil, cpu_quota_us: integer|nil,
---  cpu_period_us: integer|nil}|nil
function M.resolve(limits)
  if limits == nil or limits == false then return nil end
  if type(limits) ~= "table" then
    fail("'limits' must be a table {memory =, pids =, cpu =}, got %s", type(limits))
  end
  for k in pairs(limits) do
    if not KEYS[k] then
      fail("unknown key 'limits.%s' (memory, pids or cpu)", tostring(k))
    end
  end
  local out = {}
  if limits.memory ~= nil then out.memory = memory_bytes(limits.memory) end
  local pids = limits.pids
  if pids ~= nil then
    if math.type(pids) ~= "integer" or pids < 1 or pids > M.PIDS_MAX then
      fail("'limits.pids' must be an integer from 1 to %d, got %s", M.PIDS_MAX, tostring(pids))
    end
    out.pids = pids
  end
  local cpu = limits.cpu
  if cpu ~= nil then
    if type(cpu) ~= "number" or cpu ~= cpu or cpu < 0.01 or cpu > 4096 then
      fail("'limits.cpu' must be a number of CPUs from 0.01 to 4096, got %s", tostring(cpu))
    end
    out.cpu_period_us = M.CPU_PERIOD_US
    out.cpu_quota_us = math.floor(cpu * M.CPU_PERIOD_US + 0.5)
  end
  if next(out) == nil then return nil end
  return out
end

local function size(n)
  for _, u in ipairs({ { "GiB", 1 << 30 }, { "MiB", 1 << 20 }, { "KiB", 1 << 10 } }) do
    if n >= u[2] then
      local v = n / u[2]
      return (v == math.floor(v) and "%d %s" or "%.1f %s"):format(v, u[1])
    end
  end
  return ("%d bytes"):format(n)
end

local function plural(n, word)
  return ("%d %s%s"):format(n, word, n == 1 and "" or (word:sub(-1) == "s" and "es" or "s"))
end

--- One line for a person or a model on what the limits did to a session, e.g. "memory limit
--- 512 MiB reached: the kernel killed 1 process (out of memory)"; nil when none was hit.
---@param lim table|nil  status().sandbox.limits
---@return string|nil
function M.explain(lim)
  if type(lim) ~= "table" then return nil end
  local parts = {}
  local m, p, c = lim.memory, lim.pids, lim.cpu
  if m and (m.oom_kills or 0) > 0 then
    parts[#parts + 1] = ("memory limit %s reached: the kernel killed %s (out of memory)")
      :format(size(m.max), plural(m.oom_kills, "process"))
  elseif m and (m.hits or 0) > 0 then
    parts[#parts + 1] = ("memory limit %s reached %s (memory was reclaimed to stay under it)")
      :format(size(m.max), m.hits == 1 and "once" or (m.hits .. " times"))
  end
  if p and (p.hits or 0) > 0 then
    parts[#parts + 1] = ("pids limit %d reached: %s refused"):format(p.max,
      plural(p.hits, "fork"))
  end
  if c and (c.throttled or 0) > 0 then
    parts[#parts + 1] = ("cpu limit %g CPUs throttled it in %s of %d (%.2f s held back)")
      :format(c.max, plural(c.throttled, "period"), c.periods or 0,
        (c.throttled_usec or 0) / 1e6)
  end
  if #parts == 0 then return nil end
  return table.concat(parts, "; ")
end

return M
