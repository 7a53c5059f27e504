--- luxec.cli.cmd: the subcommands of the luxec program (`luxec NAME args...`).
local M = {}

local commands = {}

--- luxec sandbox-check [DIR]: what a sandboxed spawn does on this machine, found by doing
--- one: the default policy (workspace-write, network denied) with DIR (default: the current
--- directory) as the workspace, strict (no best_effort), exactly as `luxec mcp` would run a
--- command there. Prints each layer and why one is missing; 0 when the spawn succeeded.
function commands.sandbox_check(dir)
  local core = require("luxec.core")
  local luxec = require("luxec")
  local uv = require("luv")
  local layers = core.sandbox_layers()
  local function line(name, ok, detail)
    io.write(("%-10s %-4s %s\n"):format(name, ok and "yes" or "no", detail))
  end
  local abi = layers.landlock
  line("landlock", abi >= 3, abi == 0 and "not offered by this kernel"
    or ("ABI %d%s"):format(abi, abi >= 3 and " (read-only guarantee" ..
      (abi >= 4 and ", TCP rules" or "") .. (abi >= 6 and ", signal and socket scoping" or "")
      .. ")" or " (3 or later is needed for a read-only guarantee)"))
  if layers.can_unshare then
    line("userns", true, "not needed: luxec runs with CAP_SYS_ADMIN")
  else
    line("userns", layers.userns, layers.userns
      and "the namespaces below come through an unprivileged user namespace"
      or (layers.userns_reason or "no user namespace can be made"))
  end
  local cg, why = core.cgroups()
  line("cgroup", cg, cg and "a cgroup per session (whole-tree kill, watchdog, limits)"
    or (why or "unavailable"))
  local cwd = dir or uv.cwd()
  local p, err = luxec.spawn({ "true" },
    { cwd = cwd, sandbox = { mode = "workspace-write", network = "deny" } })
  local s
  if p then
    local st = p:wait({ timeout = 10 })
    p:close()
    s = st.sandbox
  end
  if not s then
    io.write("spawn      no   ", tostring(err), "\n")
    io.write(("workspace-write with network denied in %s: refused (the error above is what "
      .. "every sandboxed command gets; best_effort = true runs with what is there)\n")
      :format(cwd))
    return 1
  end
  local l = s.layers
  line("mountns", l.mountns, "/ read-only, the writable roots bound back; git, protected "
    .. "paths read-only, deny_read masked; private devpts and /dev/shm")
  line("pidns", l.pidns, "its own processes only (fresh /proc); ends with its init")
  line("ipcns", l.ipcns, "its own SysV IPC")
  line("netns", l.netns, "an empty network namespace")
  line("seccomp", l.seccomp, "sockets only AF_UNIX, io_uring, ptrace, mount, namespaces, "
    .. "TIOCSTI... refused")
  line("notify", l.notify, l.notify and "AF_UNIX connects judged by the host; denials recorded"
    or "the listener was refused (a nested filter?)")
  line("caps", l.caps_dropped, "every capability dropped")
  for _, d in ipairs(s.degraded or {}) do
    io.write("degraded   ", d, "\n")
  end
  io.write(("workspace-write with network denied in %s: available\n"):format(cwd))
  return 0
end

local MCP_USAGE = [[
usage: luxec mcp [--config FILE]        serve MCP on stdio (exec_command, write_stdin, ...)
       luxec mcp --check-config [FILE]  check a config file, print the effective configuration
Without --config the defaults apply: workspace-write sandbox, network denied.
]]

--- luxec mcp [--config FILE] | --check-config [FILE]: the MCP server on stdio (luxec.mcp),
--- configured by a Lua file (luxec.mcp.config).
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
  local config = require("luxec.mcp.config")
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
  return require("luxec.auto.record").play({ ... })
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
