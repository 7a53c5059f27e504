--- luxec.sandbox: sandbox policy. A policy table is checked here, with errors that name the
--- key, and turned into what the native core installs between clone and exec: the writable
--- roots, what stays read-only inside them, the network verdict, and how strict to be.
local uv = require("luv")
local limits = require("luxec.limits")

local M = {}

---@class luxec.SandboxPolicy
---@field mode "full-access"|"read-only"|"workspace-write"
---@field network "deny"|"allow"|nil  deny by default in the restricted modes
---@field roots string[]|nil  more writable roots (absolute, existing) for workspace-write
---@field best_effort boolean|nil  run with what the kernel offers instead of failing (false)
---@field evidence boolean|{network: boolean, files: boolean}|nil  record denials (true)
---@field tmp boolean|nil  /tmp, $TMPDIR and /dev/shm writable in workspace-write (true)
---@field workspace string|nil  the writable workspace (absolute); default: the session's cwd
---@field limits luxec.Limits|nil  memory, pids and cpu of the session (see luxec.limits)

local MODES = { ["full-access"] = true, ["read-only"] = true, ["workspace-write"] = true }
local KEYS = { mode = true, network = true, roots = true, best_effort = true, evidence = true,
  tmp = true, workspace = true, limits = true }

local function fail(msg, ...)
  error("bad sandbox policy: " .. msg:format(...), 0)
end

local function realpath(path)
  return uv.fs_realpath(path)
end

--- Check a policy; returns the core's spec, or raises an error naming the key.
---@param policy luxec.SandboxPolicy
---@param cwd string  the session's working directory (absolute)
function M.resolve(policy, cwd)
  if type(policy) ~= "table" then
    fail("a table expected, got %s", type(policy))
  end
  for k in pairs(policy) do
    if not KEYS[k] then
      fail("unknown key '%s'", tostring(k))
    end
  end
  local mode = policy.mode
  if mode == nil then
    fail("'mode' is required (\"full-access\", \"read-only\" or \"workspace-write\")")
  end
  if not MODES[mode] then
    fail("unknown mode %q (\"full-access\", \"read-only\" or \"workspace-write\")", tostring(mode))
  end
  local network = policy.network
  if network == nil then
    network = mode == "full-access" and "allow" or "deny"
  elseif network ~= "deny" and network ~= "allow" then
    fail("'network' must be \"deny\" or \"allow\", got %q", tostring(network))
  end
  for _, k in ipairs({ "best_effort", "tmp" }) do
    if policy[k] ~= nil and type(policy[k]) ~= "boolean" then
      fail("'%s' must be a boolean, got %s", k, type(policy[k]))
    end
  end
  local ev = policy.evidence
  local ev_net, ev_files = true, true
  if type(ev) == "boolean" then
    ev_net, ev_files = ev, ev
  elseif type(ev) == "table" then
    for k, v in pairs(ev) do
      if k ~= "network" and k ~= "files" then
        fail("unknown key 'evidence.%s'", tostring(k))
      end
      if type(v) ~= "boolean" then
        fail("'evidence.%s' must be a boolean, got %s", k, type(v))
      end
    end
    ev_net, ev_files = ev.network ~= false, ev.files ~= false
  elseif ev ~= nil then
    fail("'evidence' must be a boolean or {network=, files=}, got %s", type(ev))
  end
  if policy.roots ~= nil and type(policy.roots) ~= "table" then
    fail("'roots' must be a list of absolute paths, got %s", type(policy.roots))
  end
  for k in pairs(policy.roots or {}) do -- (a key that is no index would be ignored)
    if math.type(k) ~= "integer" or k < 1 or k > #policy.roots then
      fail("'roots' must be a list of absolute paths, got the key %s", type(k) == "string"
        and ("%q"):format(k) or type(k) == "number" and tostring(k) or "(a " .. type(k) .. ")")
    end
  end
  local wanted = {}
  for i = 1, policy.roots and #policy.roots or 0 do -- (ipairs would stop at a hole)
    local root = policy.roots[i]
    if type(root) ~= "string" then
      fail("roots[%d] must be a string, got %s", i, type(root))
    end
    if root:sub(1, 1) ~= "/" then
      fail("roots[%d] is relative: %q (writable roots must be absolute)", i, root)
    end
    local real = realpath(root)
    if not real then
      fail("roots[%d] does not exist: %q", i, root)
    end
    wanted[#wanted + 1] = real
  end
  if mode == "read-only" and #wanted > 0 then
    fail("'roots' makes no sense in read-only mode")
  end
  local workspace = cwd
  if policy.workspace ~= nil then
    if type(policy.workspace) ~= "string" or policy.workspace:sub(1, 1) ~= "/" then
      fail("'workspace' must be an absolute path, got %s", tostring(policy.workspace))
    end
    if not realpath(policy.workspace) then
      fail("'workspace' does not exist: %q", policy.workspace)
    end
    workspace = policy.workspace
  end
  local roots, ro = {}, {}
  local function keep_git_read_only(r)
    if uv.fs_stat(r .. "/.git") then
      ro[#ro + 1] = r .. "/.git"
    end
  end
  if mode == "workspace-write" then
    local base = { realpath(workspace) or workspace }
    keep_git_read_only(base[1])
    for _, r in ipairs(wanted) do
      keep_git_read_only(r)
    end
    if policy.tmp ~= false then
      for _, p in ipairs({ "/tmp", os.getenv("TMPDIR"), "/dev/shm" }) do
        local real = p and p ~= "" and realpath(p)
        if real then base[#base + 1] = real end
      end
    end
    for _, r in ipairs(wanted) do
      base[#base + 1] = r
    end
    -- drop duplicates and roots inside other roots
    table.sort(base, function(a, b) return #a < #b end)
    for _, r in ipairs(base) do
      local inside = false
      for _, kept in ipairs(roots) do
        if r == kept or kept == "/" or r:sub(1, #kept + 1) == kept .. "/" then
          inside = true
        end
      end
      if not inside then roots[#roots + 1] = r end
    end
  end
  -- resource limits: checked apart (luxec.limits), whatever the mode
  local lim = limits.resolve(policy.limits)
  return {
    limits = lim,
    mode = mode,
    network = network,
    best_effort = policy.best_effort == true,
    evidence_net = ev_net,
    evidence_files = ev_files,
    roots = roots,
    ro_paths = ro,
  }
end

--- One line a model or a person reads for a denial, e.g.
--- "connect 93.184.216.34:443 (pid 12 curl)" or "open /etc/passwd (pid 7 sh)".
function M.describe(d)
  local what
  if d.addr then
    local addr = d.family == "AF_INET6" and ("[" .. d.addr .. "]") or d.addr
    what = ("%s %s:%d"):format(d.op, addr, d.port or 0)
  elseif d.path then
    what = ("%s %s"):format(d.op, d.path)
  elseif d.family then
    what = ("%s %s"):format(d.op, d.family)
  else
    what = d.op
  end
  return ("%s (pid %d %s)"):format(what, d.pid or 0, d.comm or "?")
end

return M
