--- luxec.cmd: the subcommands of the luxec program (`luxec NAME args...`).
local M = {}

local commands = {}

--- luxec sandbox-check: which sandbox layers this machine offers, and why not.
function commands.sandbox_check()
  local core = require("luxec.core")
  local luxec = require("luxec")
  local layers = core.sandbox_layers()
  local function line(name, ok, detail)
    io.write(("%-10s %-4s %s\n"):format(name, ok and "yes" or "no", detail))
  end
  local abi = layers.landlock
  line("landlock", abi >= 3, abi == 0 and "not offered by this kernel"
    or ("ABI %d%s"):format(abi, abi >= 3 and " (read-only guarantee" ..
      (abi >= 4 and ", TCP rules" or "") .. (abi >= 6 and ", signal and socket scoping" or "")
      .. ")" or " (3 or later is needed for a read-only guarantee)"))
  line("mountns", layers.can_unshare, layers.can_unshare
    and "/ read-only with the roots bound back writable; .git kept read-only"
    or "needs CAP_SYS_ADMIN (root): chmod/chown outside the roots and .git are not protected")
  line("netns", layers.can_unshare, layers.can_unshare and "an empty network namespace"
    or "needs CAP_SYS_ADMIN: the network is denied by the seccomp filter alone")
  line("userns", false, "not used")
  local cg, why = core.cgroups()
  line("cgroup", cg, cg and "a cgroup v2 per session (whole-tree kill, watchdog)"
    or (why or "unavailable"))
  -- a real session tells about seccomp and its listener (refused when nested)
  local p, err = luxec.spawn({ "true" },
    { sandbox = { mode = "workspace-write", best_effort = true } })
  if not p then
    line("seccomp", false, err)
    return 1
  end
  local st = p:wait({ timeout = 10 })
  p:close()
  local s = st.sandbox
  line("seccomp", s.layers.seccomp, "libseccomp filter: sockets only AF_UNIX, " ..
    "io_uring, ptrace, mount, namespaces... refused with EPERM")
  line("notify", s.layers.notify, s.layers.notify and "denials are recorded as evidence"
    or "the listener was refused (a nested filter?): denials are enforced, not recorded")
  for _, d in ipairs(s.degraded or {}) do
    io.write("degraded   ", d, "\n")
  end
  local strict_ok = abi >= 3 and s.layers.seccomp
  io.write(strict_ok and "workspace-write with network denied: available\n"
    or "workspace-write with network denied: only with best_effort = true\n")
  return strict_ok and 0 or 1
end

local MCP_USAGE = [[
usage: luxec mcp [--config FILE]        serve MCP on stdio (exec_command, write_stdin, ...)
       luxec mcp --check-config [FILE]  check a config file, print the effective configuration
Without --config the defaults apply: workspace-write sandbox, network denied.
]]

--- luxec mcp [--config FILE] | --check-config [FILE]: the MCP server on stdio (luxec.mcp),
--- configured by a Lua file (luxec.config).
---@return integer status
function commands.mcp(...)
  local args = { ... }
  local file, check
  local i = 1
  while i <= #args do
    local a = args[i]
    local value = a:match("^%-%-config=(.*)$") or a:match("^%-%-check%-config=(.*)$")
    if a == "-h" or a == "--help" then
      io.write(MCP_USAGE)
      return 0
    elseif value then
      file, check = value, check or a:find("^%-%-check") ~= nil
    elseif a == "--config" then
      if not args[i + 1] then
        io.stderr:write("luxec mcp: --config needs a FILE\n", MCP_USAGE)
        return 2
      end
      file, i = args[i + 1], i + 1
    elseif a == "--check-config" then
      check = true
      if args[i + 1] and not args[i + 1]:find("^%-") then file, i = args[i + 1], i + 1 end
    else
      io.stderr:write(("luxec mcp: unknown argument '%s'\n"):format(a), MCP_USAGE)
      return 2
    end
    i = i + 1
  end
  local config = require("luxec.config")
  local cfg, err
  if file then
    cfg, err = config.load(file)
  else
    cfg, err = config.check({})
  end
  if not cfg then
    io.stderr:write("luxec mcp: ", err, "\n")
    return 1
  end
  if check then
    io.write(config.describe(cfg))
    return 0
  end
  return require("luxec.mcp").serve(cfg)
end

--- luxec play [--speed N] [--idle-limit SECONDS] FILE.cast: replay a recording.
function commands.play(...)
  return require("luxec.record").play({ ... })
end

local USAGE = "usage: luxec [options] [script [args]] | luxec sandbox-check | luxec mcp\n"

--- Run subcommand `name` with its arguments; returns the exit status.
function M.main(name, ...)
  local fn = commands[(name or ""):gsub("-", "_")]
  if not fn then
    io.stderr:write(("luxec: unknown command '%s'\n"):format(tostring(name)), USAGE)
    return 1
  end
  return fn(...)
end

return M
