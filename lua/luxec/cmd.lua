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
