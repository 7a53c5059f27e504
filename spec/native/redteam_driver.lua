--- The driver of the red-team specs (sandbox_redteam_spec.lua, sandbox_redteam_home_spec.lua,
--- sandbox_redteam_kernel_spec.lua):
--- each attempt runs in a sandbox whose luxec host is the user under test (contain_runner.lua,
--- through setpriv for the unprivileged user), under workspace-write and read-only, and is
--- decided from outside. An attempt: argv(ctx, st) -> argv; prepare(ctx, mode) -> st (host side);
--- effect(ctx, st, res) -> a description when it happened on the host (nil when not);
--- records(ctx, mode, st) -> the exact records ({op, path[, to]}; {} for none; `loose`: each
--- record one of them; loose = "present": these among others; loose = "pattern": paths are
--- patterns, each record one of them, none at all allowed); refused (a pattern of the
--- output); home(ctx) -> the session's HOME; tty; stdin ("null" or "pipe", spawn's option);
--- policy (added to the sandbox's); check; unstarted(ctx, mode) -> a pattern the spawn's
--- error must match (the command must not start), or nil;
--- hold(ctx, st, pid): called while the command, having printed HELD, waits for a line (pid:
--- the attempt's luxec host).
local H = require("helper")
-- busted's functions, from the spec file that runs the attempts (D.run)
local describe, it, pending, lazy_setup, lazy_teardown
local assert = assert
local json = require("luxec.json")
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")
local uv = require("luv")


local RT = H.fixture("redteam")
local RUNNER = H.root .. "/spec/native/contain_runner.lua"
local PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
local MODES = { "workspace-write", "read-only" }
local NOBODY = 65534

local function users()
  local uid = math.tointeger(uv.getuid())
  if uid == 0 then
    return {
      { name = "root", uid = 0, prefix = {} },
      { name = "an unprivileged user (uid 65534, luxec host unprivileged too)", uid = NOBODY,
        prefix = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups" } },
    }
  end
  return { { name = ("this unprivileged user (uid %d)"):format(uid), uid = uid, prefix = {} } }
end

local function q(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- One attempt in a sandbox of `mode`, run by a luxec host of the user under test; HOME is
-- ctx.home unless `home` is given. Returns the runner's result (output, code, denials).
local function give(ctx, ...)
  if ctx.user.uid ~= math.tointeger(uv.getuid()) then
    luxec.run({ "chown", "-R", ("%d:%d"):format(ctx.user.uid, ctx.user.uid), ... })
  end
end

local SECRET = "luxec-host-secret-" .. H.rand_digits(8)
local function jail(ctx, argv, mode, home, tty, extra, hold, stdin, unstarted)
  local policy = { mode = mode, network = "deny" }
  for k, v in pairs(extra or {}) do policy[k] = v end
  -- the luxec host has a secret in its environment that the session is not given
  local req = json.encode({ argv = argv, cwd = ctx.ws, tty = tty == true, stdin = stdin,
    env = { PATH = PATH, HOME = home or ctx.home, LANG = "C.UTF-8" },
    sandbox = policy })
  local cmd = {}
  for _, a in ipairs(ctx.user.prefix) do cmd[#cmd + 1] = a end
  for _, a in ipairs({ H.luxec, RUNNER, req }) do cmd[#cmd + 1] = a end
  local env = { PATH = PATH, HOME = home or ctx.home, LANG = "C.UTF-8",
    LUXEC_HOST_SECRET = SECRET }
  local out
  if hold then -- the command prints HELD and waits: hold() looks from outside meanwhile
    local p = assert(luxec.spawn(cmd, { env = env }))
    local held
    while not p:finished() and not p:snapshot().head:find("RESULT ", 1, true) do
      p:wait_output({ timeout = 20 })
      if not held and p:snapshot().head:find("HOLD %d+\n") then
        held = true
        hold(p.pid)
        p:write("\n")
      end
    end
    p:close_stdin()
    p:wait({ timeout = 60 })
    out = p:read()
    p:close()
  else
    out = assert(luxec.run(cmd, { timeout = 120, env = env })).output
  end
  local line = out:match("RESULT ([^\n]*)")
  assert(line, "the attempt's luxec host gave no result: " .. out)
  local res = assert(json.decode(line))
  if unstarted then -- the spawn must fail, naming why
    assert(res.error, "the command was started: " .. out)
    assert.matches(unstarted, tostring(res.error))
    res.output, res.denials = "", {}
    return res
  end
  assert(not res.error, "the command was not started: " .. tostring(res.error))
  return res
end

local function records(res)
  local out = {}
  for _, d in ipairs(res.denials or {}) do
    out[#out + 1] = sandbox.describe(d) .. " [" .. tostring(d.source) .. "]"
  end
  return #out > 0 and table.concat(out, "; ") or "(none)"
end

-- The records must be exactly `want` ({op, path} pairs; path nil: any), each at least once,
-- and nothing else.
local function assert_records(res, want)
  local seen = {}
  for _, d in ipairs(res.denials or {}) do
    local ok = false
    for i, w in ipairs(want) do
      if d.op == w[1] and (w[2] == nil or d.path == w[2]) and (w[3] == nil or d.to == w[3]) then
        ok, seen[i] = true, true
      end
    end
    assert(ok, "a record of a call that was not refused (or not this one): "
      .. sandbox.describe(d) .. "; all: " .. records(res))
    assert.equals("supervisor", d.source)
  end
  for i, w in ipairs(want) do
    assert(seen[i], ("no record of %s %s; records: %s"):format(w[1], tostring(w[2]),
      records(res)))
  end
end

local function file(path)
  return H.read_file(path)
end

-- What a path is on the host: its type, and a file's text or a directory's names.
local function state(path)
  local st = uv.fs_lstat(path)
  if not st then return "missing" end
  if st.type == "file" then return "file " .. (H.read_file(path) or "") end
  if st.type == "link" then return "link " .. tostring(uv.fs_readlink(path)) end
  local names = {}
  local req = uv.fs_scandir(path)
  for n in function() return req and uv.fs_scandir_next(req) end do names[#names + 1] = n end
  table.sort(names)
  return st.type .. " " .. table.concat(names, ",")
end

-- Driving ------------------------------------------------------------------------------------

local HOME_FILES = { ".bashrc", ".profile", ".ssh", ".config/git", ".gitconfig", ".local/bin",
  ".zshrc", ".bash_profile", ".claude/settings.json", ".claude.json", ".bash_aliases",
  ".local/lib", ".vim", ".pyenv" }

local function setup(user)
  local ctx = { user = user, dir = H.tmpdir() }
  ctx.ws = ctx.dir .. "/ws"
  ctx.tmphome = ctx.dir .. "/home"
  ctx.home = ctx.tmphome
  -- outside every root: /var/tmp
  ctx.out = assert(uv.fs_mkdtemp("/var/tmp/luxec-redteam-XXXXXX"))
  ctx.target = ctx.out .. "/target"
  ctx.target_text = "host file\n"
  ctx.domainname = file("/proc/sys/kernel/domainname")
  for _, home in ipairs({ ctx.ws, ctx.tmphome }) do
    assert(uv.fs_mkdir(home, 493))
    H.write_file(home .. "/.bashrc", "# host rc\n")
    H.write_file(home .. "/.netrc", "machine x password secret\n")
    assert(uv.fs_mkdir(home .. "/.config", 493))
    assert(uv.fs_mkdir(home .. "/.local", 493))
    assert(uv.fs_mkdir(home .. "/.claude", 493))
  end
  luxec.run({ "git", "init", "-q", ctx.ws }, { env = { PATH = PATH } })
  H.write_file(ctx.target, ctx.target_text)
  give(ctx, ctx.dir)
  give(ctx, ctx.out)
  return ctx
end

-- Each attempt starts from the same HOME: what an attempt that got through left is removed
-- (one rm and one chown for all of it: a process each per path made the attempts slow), and
-- the workspace's rc is written again.
local function reset_home(ctx)
  local rm, given = { "rm", "-rf" }, {}
  for _, home in ipairs({ ctx.ws, ctx.tmphome }) do
    for _, p in ipairs(HOME_FILES) do rm[#rm + 1] = home .. "/" .. p end
  end
  local r = luxec.run(rm)
  assert(r.code == 0, "rm: " .. r.output)
  for _, home in ipairs({ ctx.ws, ctx.tmphome }) do
    H.write_file(home .. "/.bashrc", "# host rc\n")
    given[#given + 1] = home .. "/.bashrc"
  end
  H.write_file(ctx.ws .. "/rc", "touch /tmp/pwned\n")
  given[#given + 1] = ctx.ws .. "/rc"
  give(ctx, table.unpack(given))
end

local function snapshot_home(ctx, home)
  ctx.home_before = {}
  for _, p in ipairs(HOME_FILES) do
    ctx.home_before[p] = state(home .. "/" .. p)
  end
end

local function run_attempt(ctx, a, mode)
  if a.skip then
    local why = a.skip(ctx)
    if why then
      pending(why)
      return
    end
  end
  local home = a.home and a.home(ctx) or nil
  local st = a.prepare and a.prepare(ctx, mode) or {}
  reset_home(ctx)
  snapshot_home(ctx, home or ctx.home)
  local res = jail(ctx, a.argv(ctx, st), mode, home, a.tty, a.policy,
    a.hold and function(pid) a.hold(ctx, st, pid) end, a.stdin,
    a.unstarted and a.unstarted(ctx, mode))
  local out = res.output or ""
  local what = a.effect(ctx, st, res)
  H.write_file(ctx.target, ctx.target_text)
  assert(what == nil, ("ESCAPED (%s, %s): %s\noutput: %s\nrecords: %s"):format(mode, a.name,
    what, out, records(res)))
  if a.refused then assert.matches(a.refused, out) end
  local want = a.records(ctx, mode, st)
  if a.loose == "present" then -- among many records (a flood), these must be there
    for _, w in ipairs(want) do
      local found = false
      for _, d in ipairs(res.denials or {}) do
        found = found or (d.op == w[1] and d.path == w[2])
      end
      assert(found, ("no record of %s %s among %d (overflow: %s)"):format(w[1], w[2],
        #(res.denials or {}), json.encode(res.denials_overflow or {})))
    end
  elseif a.loose == "pattern" then -- these calls (path patterns), as often as they were
    -- made, or none where the kernel refused them first: each record one of them
    for _, d in ipairs(res.denials or {}) do
      local ok = false
      for _, w in ipairs(want) do
        ok = ok or (d.op == w[1] and tostring(d.path):match(w[2]) ~= nil)
      end
      assert(ok, "a record of another call: " .. sandbox.describe(d))
      assert.equals("supervisor", d.source)
    end
  elseif a.loose then -- a race: each try is refused, where the cwd was at that moment
    for _, d in ipairs(res.denials or {}) do
      local ok = false
      for _, w in ipairs(want) do ok = ok or (d.op == w[1] and d.path == w[2]) end
      assert(ok, "a record of another call: " .. sandbox.describe(d))
    end
    assert(#(res.denials or {}) > 0, "no record of the refused tries")
  else
    assert_records(res, want)
  end
  if a.check then a.check(ctx, res) end
end

--- Another session of the same user and mode, started in the background: it runs argv
--- until it printed HELD, and then waits (D.stop_session). Returns its luxec host's process.
local function start_session(ctx, argv, mode)
  local req = json.encode({ argv = argv, cwd = ctx.ws,
    env = { PATH = PATH, HOME = ctx.home, LANG = "C.UTF-8" },
    sandbox = { mode = mode, network = "deny" } })
  local cmd = {}
  for _, a in ipairs(ctx.user.prefix) do cmd[#cmd + 1] = a end
  for _, a in ipairs({ H.luxec, RUNNER, req }) do cmd[#cmd + 1] = a end
  local p = assert(luxec.spawn(cmd, { env = { PATH = PATH, HOME = ctx.home } }))
  local head = ""
  while not p:finished() and not head:find("HOLD %d+\n") and not head:find("RESULT ") do
    p:wait_output({ timeout = 20 })
    head = p:snapshot().head
  end
  if not head:find("HOLD %d+\n") then
    p:close()
    error("the other session ended early: " .. head)
  end
  return p
end

--- End a session of start_session; its output.
local function stop_session(p)
  p:write("\n")
  p:close_stdin()
  p:wait({ timeout = 60 })
  local out = p:read()
  p:close()
  return out
end

local D = { RT = RT, PATH = PATH, SECRET = SECRET, q = q, give = give, file = file, state = state,
  start_session = start_session, stop_session = stop_session }

function D.worked(_, _, res)
  if res.output:match("^ok") then return "the call worked: " .. res.output end
end

--- The describe blocks of one list of attempts, for every user and both modes; busted: the
--- spec file's describe, it, pending, lazy_setup, lazy_teardown and assert.
function D.run(title, ATTEMPTS, busted)
  describe, it, pending = busted.describe, busted.it, busted.pending
  lazy_setup, lazy_teardown, assert = busted.lazy_setup, busted.lazy_teardown, busted.assert
  for _, user in ipairs(users()) do
    describe(title .. " as " .. user.name, function()
      local usable, why = H.sandbox_usable()
      if not usable then
        pending("runs where the sandbox can be tried: skipped: " .. why)
        return
      end
      local ctx
      lazy_setup(function() ctx = setup(user) end)
      lazy_teardown(function()
        if ctx then
          H.rmtree(ctx.dir)
          os.execute("rm -rf " .. q(ctx.out))
        end
      end)
      for _, mode in ipairs(MODES) do
        describe(mode .. ", network denied", function()
          for _, a in ipairs(ATTEMPTS) do
            it(a.class .. ": " .. a.name, function() run_attempt(ctx, a, mode) end)
          end
        end)
      end
    end)
  end

end

return D
