--- apart_runner.lua ESCAPE WORKSPACE: sessions of the default sandbox (workspace-write, network
--- denied) that are alive at the same time, each reporting what it sees of the others, run by
--- sandbox_apart_spec.lua as the luxec host (as root, and as a normal user). Prints one line
--- per check; every line is compared exactly by the spec.
local luxec = require("luxec")
local uv = require("luv")

local escape, ws = arg[1], arg[2]
local opts = { cwd = ws, sandbox = { mode = "workspace-write", network = "deny" } }

local function spawn(argv, extra)
  local o = { cwd = opts.cwd, sandbox = opts.sandbox }
  for k, v in pairs(extra or {}) do o[k] = v end
  return assert(luxec.spawn(argv, o))
end

local function wait_line(p, pattern)
  local i, m = p:expect({ { lua = pattern } }, { timeout = 20 })
  assert(i == 1, ("waiting for %s: %s"):format(pattern, tostring(m)))
  return p.captures and p.captures[1] or m
end

-- Four sessions alive at once: four network namespaces, none of them the host's.
local host = assert(uv.fs_readlink("/proc/self/ns/net"))
local live, names = {}, {}
for i = 1, 4 do
  live[i] = spawn({ "sh", "-c", "readlink /proc/self/ns/net; read x" })
  names[i] = wait_line(live[i], "(net:%[%d+%])\n")
end
local distinct, seen = 0, { [host] = true }
for _, n in ipairs(names) do
  if not seen[n] then distinct = distinct + 1 end
  seen[n] = true
end
print(("network namespaces: %d distinct of 4, none the host's"):format(distinct))

-- An abstract socket one session listens on is not another's to connect to.
local name = ("luxec-apart-%d"):format(uv.os_getpid())
local listener = spawn({ escape, "listen", name })
wait_line(listener, "listening\n")
print("abstract socket of another session: " .. luxec.run({ escape, "abstract", name }, opts)
  .output:gsub("\n$", ""))

-- /dev: what one session makes in its /dev/shm another does not see; nobody adds to /dev;
-- a session's terminal is in its own devpts only.
local maker = spawn({ "sh", "-c", "echo a > /dev/shm/apart && ln -s /x /dev/apart 2>/dev/null;"
  .. " echo made; read x" })
wait_line(maker, "made\n")
local tty = spawn({ "sh", "-c", "tty; read x" }, { tty = true })
wait_line(tty, "(/dev/pts/%d+)")
print("another session's /dev/shm: [" .. luxec.run({ "ls", "-A", "/dev/shm" }, opts).output
  :gsub("\n", " ") .. "]")
print("another session's /dev: " .. luxec.run({ "ls", "-A", "/dev" }, opts).output
  :gsub("\n", " "))
print("another session's /dev/pts: " .. luxec.run({ "ls", "-A", "/dev/pts" }, opts).output
  :gsub("\n", " "))

for _, p in ipairs(live) do p:close() end
for _, p in ipairs({ listener, maker, tty }) do p:close() end

-- One after another: a session's network namespace, once every process of it is gone and
-- nothing is left in it, serves a later session (the host looks at it on its own time: a few
-- sessions may pass first). A namespace is named by its cookie, which the kernel never gives
-- twice (its inode number is given again once it is freed).
local function netns_of_next(cmd, sandbox)
  local out = luxec.run({ "sh", "-c", ("%q netns; "):format(escape) .. (cmd or "") },
    { cwd = ws, sandbox = sandbox or opts.sandbox }).output
  return out:match("^(net:%[%d+%])\n(.*)$")
end
local used_again, before = false, {}
for _ = 1, 40 do
  local n = netns_of_next()
  if before[n] then used_again = true break end
  before[n] = true
  luxec.sleep(0.02)
end
print("a network namespace used again after its session ended: " .. tostring(used_again))

-- A namespace a session left a socket in (its listening abstract socket, sent to a process
-- outside that keeps it, over a socket its policy allows) is never used again: no later
-- session can connect to it.
local hold_path = ws .. "/hold.sock"
local holder = assert(luxec.spawn({ escape, "hold", hold_path }))
wait_line(holder, "holding\n")
local left_in, left = netns_of_next(("%q leave %s %q"):format(escape, name .. "-left", hold_path),
  { mode = "workspace-write", network = "deny", unix_sockets = { hold_path } })
wait_line(holder, "held 1\n")
-- (twelve one after another, then six alive at once three times: the namespaces found as new
-- are all taken each time)
local met, answers = 0, {}
local function tally(n, out)
  if n == left_in then met = met + 1 end
  answers[out] = (answers[out] or 0) + 1
end
for _ = 1, 12 do
  tally(netns_of_next(("%q abstract %s"):format(escape, name .. "-left")))
  luxec.sleep(0.02)
end
for _ = 1, 3 do
  local six = {}
  for i = 1, 6 do
    six[i] = spawn({ "sh", "-c", ("%q netns; %q abstract %s; read x")
      :format(escape, escape, name .. "-left") })
  end
  for _, p in ipairs(six) do
    tally(wait_line(p, "(net:%[%d+%]\n[^\n]*\n)"):match("^(net:%[%d+%])\n(.*)$"))
  end
  for _, p in ipairs(six) do p:close() end
  luxec.sleep(0.1)
end
local said = {}
for k, v in pairs(answers) do said[#said + 1] = ("%s x%d"):format(k:gsub("\n$", ""), v) end
print(("left a socket: %s; its namespace met again %d times; 30 later sessions connecting: %s")
  :format(left:gsub("\n$", ""), met, table.concat(said, ", ")))
holder:close()
