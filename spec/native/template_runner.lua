--- template_runner.lua WORKSPACE: sessions of one sandbox policy whose mount trees are copies
--- of the one prepared at its first spawn (src/sandbox_template.c), run by
--- sandbox_template_spec.lua as the luxec host (as root, and as a normal user). Prints one line
--- per check; every line is compared exactly by the spec. Only the workspace is a writable root
--- (tmp = false): what other programs do in /tmp meanwhile changes nothing here. Without
--- evidence: the host's supervisor does not judge writes, so the mount tree alone keeps a git
--- directory read-only.
local luxec = require("luxec")

local ws = arg[1]
local sandbox = { mode = "workspace-write", network = "deny", tmp = false, evidence = false }
local env = { PATH = os.getenv("PATH"), HOME = ws, GIT_CONFIG_NOSYSTEM = "1" }

local function host(script)
  local r = assert(luxec.run({ "sh", "-c", script }, { cwd = ws, env = env, timeout = 30 }))
  assert(r.code == 0, r.output)
end

local function jail(script, extra)
  local o = { cwd = ws, sandbox = sandbox, env = env, timeout = 30 }
  for k, v in pairs(extra or {}) do o[k] = v end
  return assert(luxec.run({ "sh", "-c", script }, o))
end

local function spawn(script, extra)
  local o = { cwd = ws, sandbox = sandbox, env = env }
  for k, v in pairs(extra or {}) do o[k] = v end
  return assert(luxec.spawn({ "sh", "-c", script }, o))
end

local function wait_line(p, pattern)
  local i, m = p:expect({ { lua = pattern } }, { timeout = 20 })
  assert(i == 1, ("waiting for %s: %s"):format(pattern, tostring(m)))
  return m
end

-- a write into a file of a repository's git directory (an open without O_CREAT: no call the
-- supervisor judges): refused, and the file on the host unchanged
local function plant(repo)
  local file = repo .. "/.git/description"
  local r = jail(("printf X | dd of=%s conv=nocreat,notrunc status=none 2>/dev/null && "
    .. "echo written || echo refused"):format(file))
  local fd = assert(io.open(ws .. "/" .. file, "rb"))
  local head = fd:read(1)
  fd:close()
  return r.output:gsub("\n$", "") .. ", " .. (head == "X" and "changed" or "unchanged"),
    r.sandbox.mount_copied
end

-- Spawns until one's tree is a copy (a normal user's first spawns may come before the keeper
-- has a user namespace ready: they build their own tree, as without a template).
local function copied(fn)
  for _ = 1, 30 do
    local out, was = fn()
    if was then return out .. " (copied)" end
  end
  return "never copied"
end

host("git init -q repo")
print(("first spawn copied its mount tree: %s"):format(jail("true").sandbox.mount_copied))
print(("a repository's git directory: %s"):format(copied(function() return plant("repo") end)))

-- a repository made between two spawns: the policy is resolved again, its tree made again
-- (never the one made before it)
host("git init -q late")
print(("a repository made since: %s (copied: %s)"):format(plant("late")))
print(("... later: %s"):format(copied(function() return plant("late") end)))

-- the same paths as before, but the git directory removed and made anew on the host: the
-- kernel detached the read-only mount on it from the prepared tree
host("rm -rf repo/.git && git init -q repo")
print(("a git directory made anew at the same path: %s (copied: %s)"):format(plant("repo")))
print(("... later: %s"):format(copied(function() return plant("repo") end)))

-- sessions whose trees are copies of one are still apart: /proc shows a session's own pid
-- namespace, /dev/pts its own terminals
local tty, other
print(("a session on a terminal: %s"):format(copied(function()
  if tty then tty:close() end
  tty = spawn("tty; read x", { tty = true })
  return wait_line(tty, "/dev/pts/%d+"), tty:status().sandbox.mount_copied
end)))
print(("another session: pid %s"):format(copied(function()
  if other then other:close() end
  other = spawn("echo $$; read x")
  return wait_line(other, "%d+\n"):gsub("\n", ""), other:status().sandbox.mount_copied
end)))
print(("a third one's /proc and /dev/pts: %s"):format(copied(function()
  -- (the shell counts with its own glob: in `ls /proc | grep`, grep may not be forked yet
  -- when ls reads /proc; here only the init and the shell are)
  local r = jail("set -- /proc/[0-9]*; echo $#; ls -A /dev/pts")
  return r.output:gsub("\n", "; "), r.sandbox.mount_copied
end)))
tty:close()
other:close()
