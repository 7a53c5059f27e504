-- The exec engine's call policy on a fake process (fuzz/lua/lib/fake_process.lua) and a fake
-- clock, both given through the engine's seams (spawn, clock): yields and their clamps, the
-- early return, the hard timeout, pruning, unknown ids, truncation, and the per-call context
-- (sandbox, limits, progress, cancellation). No process starts; a wait of 30 s takes none.
package.path = "fuzz/lua/?.lua;" .. package.path
local fake = require("lib.fake_process")
local exec = require("luxec.engine")
local sched = require("luxec.sched")
local H = require("helper")
-- What an error about a gone session's id adds (luxec's text)
local EXITED = ": its session ended: the process exited (an earlier result gave its exit code)"
local TERMINATED = ": its session was ended by terminate"
local PRUNED = ": its session was ended to make room for a new one (the least recently used "
  .. "of too many)"

local engines = {}

local function engine(cfg)
  local c = { spawn = fake.spawn, clock = function() return fake.now_ms end, log = false,
    deterministic = true, shell = "/bin/sh", cwd = "/w", login = false }
  for k, v in pairs(cfg or {}) do c[k] = v end
  local e = exec.new(c)
  engines[#engines + 1] = e
  return e
end

-- write_stdin(args) waiting in a task, under a ctx that e:cancel can name; returns both.
local function waiting_write(e, args)
  local ctx = {}
  local t = sched.go(function() return e:write_stdin(args, ctx) end)
  return t, ctx
end

local function running(e, cmd, extra)
  local args = { cmd = cmd, yield_time_ms = 250 }
  for k, v in pairs(extra or {}) do args[k] = v end
  local r = assert(e:exec_command(args))
  assert.equals("running", r.state)
  return r.session_id, fake.spawned[#fake.spawned]
end

describe("the exec engine's call policy (fake process, fake clock)", function()
  before_each(function()
    fake.reset()
    fake.now_ms = 1e6
    fake.program("run", {}) -- runs until it is ended
  end)

  after_each(function()
    for _, e in ipairs(engines) do e:shutdown() end
    engines = {}
    for _, p in ipairs(fake.spawned) do
      assert.is_true(p._closed, "a session of " .. p._cmd .. " was left open")
    end
  end)

  describe("yields", function()
    it("clamps exec_command's yield to 250..30000 ms, 10000 by default", function()
      local e = engine()
      assert.near(0.25, e:exec_command({ cmd = "run", yield_time_ms = 5 }).wall_time, 1e-6)
      assert.near(30, e:exec_command({ cmd = "run", yield_time_ms = 99999 }).wall_time, 1e-6)
      assert.near(10, e:exec_command({ cmd = "run" }).wall_time, 1e-6)
    end)

    it("polls an empty write_stdin 5..300 s; with chars clamps to 30 s", function()
      fake.program("sh", { input = false })
      local e = engine()
      local id = running(e, "sh", { tty = true })
      assert.near(5, e:write_stdin({ session_id = id, yield_time_ms = 0 }).wall_time, 1e-6)
      assert.near(300, e:write_stdin({ session_id = id, yield_time_ms = 400000 }).wall_time,
        1e-6)
      local r = e:write_stdin({ session_id = id, chars = "x", yield_time_ms = 100000 })
      assert.near(30, r.wall_time, 1e-6) -- after the 100 ms settle
      assert.equals("x", r.output) -- the terminal's echo
      assert.same({ "x" }, fake.spawned[1].writes)
    end)

    it("returns when the program exits, with its output and no session", function()
      fake.program("quick", { steps = { { at = 1200, output = "done\n", exit = 0 } } })
      local e = engine()
      local r = assert(e:exec_command({ cmd = "quick" }))
      assert.near(1.2, r.wall_time, 1e-6)
      assert.same({ 0, "exited", "done\n" }, { r.exit_code, r.state, r.output })
      assert.is_nil(r.session_id)
      assert.same({}, e:list())
      assert.is_nil(e:describe(1000)) -- never handed out
    end)

    it("returns early when a terminal program waits for input, not before 150 ms", function()
      fake.program("ask", { input = false,
        steps = { { at = 500, output = "Name? ", input = true } } })
      fake.program("prompt", { input = true, output = "$ " })
      fake.program("pass", { input = false,
        steps = { { at = 300, output = "Password: ", input = true, password = true } } })
      local e = engine()
      local r = assert(e:exec_command({ cmd = "ask", tty = true }))
      assert.same({ "waiting_for_input", "Name? " }, { r.state, r.output })
      assert.near(0.515, r.wall_time, 1e-6) -- the prompt, then 15 ms without output
      r = assert(e:exec_command({ cmd = "prompt", tty = true }))
      assert.equals("waiting_for_input", r.state)
      assert.near(0.165, r.wall_time, 1e-6) -- early_exit_ms, then the quiet 15 ms
      r = assert(e:exec_command({ cmd = "pass", tty = true }))
      assert.equals("waiting_for_password", r.state)
      r = assert(e:exec_command({ cmd = "ask", tty = true, yield_time_ms = 400 }))
      assert.same({ "running", "" }, { r.state, r.output }) -- the yield came first
      local off = engine({ early_return = false })
      r = assert(off:exec_command({ cmd = "ask", tty = true, yield_time_ms = 2000 }))
      assert.same({ "running", "Name? " }, { r.state, r.output })
      assert.near(2, r.wall_time, 1e-6)
    end)

    it("looks whether a program waits for input only while its output is quiet", function()
      local steps = {}
      for i = 0, 199 do steps[#steps + 1] = { at = 100 + 5 * i, output = "line\n" } end
      steps[#steps + 1] = { at = 1100, exit = 0 }
      fake.program("chatty", { input = false, steps = steps })
      fake.program("quiet", { input = false, steps = { { at = 1100, exit = 0 } } })
      local looks = 0
      local function counted(argv, opts) -- each look at the input state while it runs (the
        local p = fake.spawn(argv, opts) -- fake's _input_wait is its status())
        local status = p.status
        p.status = function(self)
          if self._running then looks = looks + 1 end
          return status(self)
        end
        return p
      end
      local e = engine({ spawn = counted })
      local r = assert(e:exec_command({ cmd = "chatty", tty = true, yield_time_ms = 5000 }))
      assert.same({ 0, "exited" }, { r.exit_code, r.state })
      assert.equals(("line\n"):rep(200), r.output)
      -- once at early_exit_ms (150 ms), then never while a line comes every 5 ms
      assert.equals(1, looks)
      looks = 0
      r = assert(e:exec_command({ cmd = "quiet", tty = true, yield_time_ms = 5000 }))
      assert.same({ 0, "exited" }, { r.exit_code, r.state })
      -- with no output: from 150 ms on, once every input_poll_ms (15 ms) until the exit
      assert.equals(math.floor((1100 - 150) / 15) + 1, looks)
    end)

    it("ends a command at its hard timeout with exit code 124", function()
      local e = engine()
      local r = assert(e:exec_command({ cmd = "run", timeout_ms = 1000, yield_time_ms = 5000 }))
      assert.same({ 124, "timed_out", 1000 }, { r.exit_code, r.state, r.timeout_ms })
      assert.near(1, r.wall_time, 1e-6)
      assert.is_true(fake.spawned[1].terminated)
      assert.matches("timed out after 1000 ms", exec.format(r), 1, true)
    end)
  end)

  describe("output", function()
    local lines = {}
    for i = 1, 2000 do lines[i] = ("line %d\n"):format(i) end
    local text = table.concat(lines)

    it("cuts to max_output_tokens with a marker that counts the removed bytes", function()
      fake.program("big", { output = text, exit = 0 })
      local e = engine()
      local r = assert(e:exec_command({ cmd = "big", max_output_tokens = 10 }))
      assert.is_true(r.truncated)
      assert.equals(math.ceil(#text / 4), r.original_token_count)
      local head, removed, tail = r.output:match("^Total output lines: 2000\n\n(.-)…(%d+) bytes "
        .. "cut %(output bytes %d+%-%d+%)…(.*)$")
      assert.is_string(head, r.output)
      assert.equals(r.removed, tonumber(removed))
      assert.equals(#text, #head + r.removed + #tail)
      assert.equals(text:sub(1, #head), head)
      assert.equals(text:sub(-#tail), tail)
      assert.is_true(#head + #tail <= 40)
    end)

    it("lowers a budget above max_output_tokens_limit to the limit", function()
      fake.program("big", { output = text, exit = 0 })
      local e = engine({ max_output_tokens_limit = 10 })
      local a = assert(e:exec_command({ cmd = "big", max_output_tokens = 100000 }))
      local b = assert(e:exec_command({ cmd = "big", max_output_tokens = 10 }))
      assert.equals(b.output, a.output)
      assert.equals(b.removed, a.removed)
    end)
  end)

  describe("sessions", function()
    it("answers an unknown or ended id with Codex's error, and describes an ended one", function()
      fake.program("later", { steps = { { at = 2000, output = "bye\n", exit = 3 } } })
      local e = engine()
      assert.same({ nil, "Unknown process id 4242" }, { e:write_stdin({ session_id = 4242 }) })
      local r, err = e:write_stdin({ session_id = "x" })
      assert.is_nil(r)
      assert.equals('failed to parse function arguments: invalid type: string "x" for '
        .. "`session_id`, expected an integer", err)
      local id = running(e, "later")
      assert.same({ id, 40000, "later", true }, { e:describe(id).session_id,
        e:describe(id).pid, e:describe(id).command, e:describe(id).running })
      r = assert(e:write_stdin({ session_id = id, yield_time_ms = 5000 }))
      assert.same({ 3, "bye\n" }, { r.exit_code, r.output })
      assert.same({ nil, ("Unknown process id %d" .. EXITED):format(id) },
        { e:write_stdin({ session_id = id }) })
      local d = e:describe(id)
      assert.same({ true, "exited", false, "later" }, { d.ended, d.reason, d.running, d.command })
      assert.same({ nil, ("Unknown process id %d"):format(id) }, { e:terminate(id) })
    end)

    it("prunes the least recently used outside protect_recent, an exited one first", function()
      local e = engine({ max_sessions = 3, protect_recent = 1, warn_at = 3 })
      local a = running(e, "run")
      local b = running(e, "run")
      local r = assert(e:exec_command({ cmd = "run", yield_time_ms = 250 }))
      local c = r.session_id
      assert.equals("3 sessions are open; at 3, a new command ends the least recently used "
        .. "one (end sessions you no longer need)", r.warnings[1])
      assert(e:write_stdin({ session_id = a, yield_time_ms = 0 })) -- a is used again
      r = assert(e:exec_command({ cmd = "run", yield_time_ms = 250 }))
      local d = r.session_id
      assert.matches(("Session %d (least recently used) was ended to stay within 3 open "
        .. "processes"):format(b), table.concat(r.warnings, "\n"), 1, true)
      assert.is_true(fake.spawned[2].terminated)
      assert.same({ true, "pruned" }, { e:describe(b).ended, e:describe(b).reason })
      assert.same({ nil, ("Unknown process id %d" .. PRUNED):format(b) },
        { e:write_stdin({ session_id = b }) })
      -- c is the least recently used now, but a has exited: a goes
      fake.spawned[1]:exit(0)
      r = assert(e:exec_command({ cmd = "run", yield_time_ms = 250 }))
      assert.matches(("Session %d (exited, least recently used)"):format(a),
        table.concat(r.warnings, "\n"), 1, true)
      local ids = {}
      for _, s in ipairs(e:list()) do ids[#ids + 1] = s.session_id end
      assert.same({ r.session_id, d, c }, ids)
    end)

    it("knows a session during its first call, as Codex stores it before the wait", function()
      fake.program("held", { hold = true, output = "start\n" })
      local e = engine()
      local first = sched.go(function()
        return e:exec_command({ cmd = "held", tty = true, yield_time_ms = 20000 })
      end)
      assert.is_false(first.done)
      local listed = e:list()
      assert.same({ 1, 1000, "held" }, { #listed, listed[1].session_id, listed[1].command })
      -- write_stdin queues behind the first call and goes on when it returns
      local write = waiting_write(e, { session_id = 1000, chars = "x", yield_time_ms = 250 })
      assert.is_false(write.done)
      assert.is_true(e:interrupt(1000)) -- the first call returns what it has
      local _, r = first:wait()
      assert.same({ "running", 1000, "start\n" }, { r.state, r.session_id, r.output })
      fake.spawned[1]:hold(false)
      local _, w = write:wait()
      assert.same({ 1000, "x" }, { w.session_id, w.output })
      assert.same({ "x" }, fake.spawned[1].writes)
      -- terminate_session during a first call ends it: that call reports the exit, and the id,
      -- which no result named, comes back (deterministic ids are Codex's)
      local second = sched.go(function()
        return e:exec_command({ cmd = "held", yield_time_ms = 20000 })
      end)
      assert.is_true(e:terminate(1001))
      local _, r2 = second:wait()
      assert.same({ "exited", nil, 143 }, { r2.state, r2.session_id, r2.exit_code })
      assert.is_nil(e:describe(1001))
      assert.equals(1001, running(e, "run"))
    end)

    it("gives a session that could not start no id and reports the error", function()
      fake.program("broken", { fail = "ENOENT: no such file or directory" })
      local e = engine()
      local r, err = e:exec_command({ cmd = "broken" })
      assert.is_nil(r)
      assert.equals("failed to start `broken`: ENOENT: no such file or directory", err)
      assert.same({}, e:list())
    end)
  end)

  describe("the call context", function()
    it("resolves workdir, shell and login in one place", function()
      local e = engine()
      assert.same({ cwd = "/w/sub", shell = "/bin/sh", login = false },
        e:resolve({ workdir = "sub" }))
      assert.same({ cwd = "/abs", shell = "/bin/zsh", login = true },
        e:resolve({ workdir = "/abs", shell = "/bin/zsh", login = true }))
      assert.equals("/w", e:resolve({ workdir = "" }).cwd)
      assert.equals("/w", e:resolve({ workdir = 7 }).cwd)
      running(e, "run", { workdir = "sub" })
      assert.same({ "/bin/sh", "-c", "run" }, fake.spawned[1].argv)
      assert.equals("/w/sub", fake.spawned[1].opts.cwd)
    end)

    it("runs a call under its own sandbox, over the engine's workspace", function()
      local e = engine({ sandbox = { mode = "read-only" } })
      running(e, "run", { workdir = "/etc" })
      assert.same({ workspace = "/w", mode = "read-only" }, fake.spawned[1].opts.sandbox)
      assert(e:exec_command({ cmd = "run", yield_time_ms = 250 },
        { sandbox = { mode = "workspace-write", network = "allow" } }))
      assert.same({ workspace = "/w", mode = "workspace-write", network = "allow" },
        fake.spawned[2].opts.sandbox)
      local ws = engine({ sandbox = { mode = "read-only", workspace = "/ws" } })
      running(ws, "run")
      assert.same({ workspace = "/ws", mode = "read-only" }, fake.spawned[3].opts.sandbox)
      local none = engine()
      assert(none:exec_command({ cmd = "run", yield_time_ms = 250 },
        { sandbox = { mode = "read-only" } }))
      assert.is_nil(fake.spawned[4].opts.sandbox)
    end)

    it("applies a call's own limits and rejects a bad one by name", function()
      local e = engine()
      local r = assert(e:exec_command({ cmd = "run", yield_time_ms = 5000 },
        { limits = { max_yield_ms = 1000 } }))
      assert.near(1, r.wall_time, 1e-6)
      assert.near(5, e:exec_command({ cmd = "run", yield_time_ms = 5000 }).wall_time, 1e-6)
      local _, err = e:exec_command({ cmd = "run" }, { limits = { shell = "/bin/zsh" } })
      assert.matches("bad call limit 'shell'", err, 1, true)
      _, err = e:exec_command({ cmd = "run" }, { limits = { max_yield_ms = -1 } })
      assert.matches("bad call limit 'max_yield_ms' (non-negative integer expected", err, 1, true)
      _, err = e:exec_command({ cmd = "run" }, { colour = 1 })
      assert.equals("bad call context field 'colour'", err)
      _, err = e:exec_command({ cmd = "run" }, 5)
      assert.equals("bad call context (a table expected, got number)", err)
    end)

    it("reports progress while a call waits, with the clamped yield as the total", function()
      fake.program("held", { hold = true })
      local e = engine()
      local seen = {}
      local ctx = { progress_interval_ms = 5, progress = function(ms, total, what)
        seen[#seen + 1] = { ms = ms, total = total, what = what }
      end }
      local t = sched.go(function()
        return e:exec_command({ cmd = "held", yield_time_ms = 99999 }, ctx)
      end)
      H.wait_for(function() return #seen >= 3 end, 5000, "three progress calls")
      for i, s in ipairs(seen) do
        assert.same({ 30000, "`held`" }, { s.total, s.what })
        if i > 1 then assert.is_true(s.ms > seen[i - 1].ms) end
      end
      fake.spawned[1]:exit(0)
      local ok, r = t:wait()
      assert.is_true(ok)
      assert.equals(0, r.exit_code)
      assert.is_nil(ctx._progress_timer) -- stopped with the call
    end)

    it("cancels a waiting call: it returns at once, its output goes to the next call", function()
      fake.program("sh", { input = false })
      local e = engine()
      local id, p = running(e, "sh", { tty = true })
      p:hold(true)
      local t, ctx = waiting_write(e, { session_id = id, chars = "ls\n", yield_time_ms = 30000 })
      p:emit("file\n")
      assert.is_false(t.done)
      assert.is_true(e:cancel(ctx))
      assert.is_true(t.done)
      local _, r = t:wait()
      assert.same({ "running", id }, { r.state, r.session_id })
      p:hold(false)
      r = assert(e:write_stdin({ session_id = id, yield_time_ms = 250 }))
      assert.equals("ls\nfile\n", r.output)
      assert.same({ "The first 8 bytes of this output were read by a call that was cancelled" },
        r.warnings)
      r = assert(e:write_stdin({ session_id = id, yield_time_ms = 250 }))
      assert.same({ "", {} }, { r.output, r.warnings })
      local done = {}
      assert(e:write_stdin({ session_id = id, yield_time_ms = 250 }, done))
      assert.is_false(e:cancel(done, "kill")) -- a call that is over: its session stays
      assert.is_true(e:describe(id).running)
      assert.is_nil(p.terminated)
    end)

    it("cancels only its own call: a queued call's input is not sent", function()
      local e = engine()
      fake.program("sh", { input = false })
      local id, p = running(e, "sh", { tty = true })
      p:hold(true)
      local a, b = {}, {}
      local ta = sched.go(function()
        return e:write_stdin({ session_id = id, yield_time_ms = 30000 }, a)
      end)
      local tb = sched.go(function()
        return e:write_stdin({ session_id = id, chars = "B\n", yield_time_ms = 30000 }, b)
      end)
      assert.is_true(e:cancel(b))
      assert.is_false(ta.done) -- a's wait goes on
      p:exit(0)
      assert.is_true(ta.done and tb.done)
      local _, ra = ta:wait()
      assert.equals(0, ra.exit_code)
      assert.same({ true, nil, ("Unknown process id %d"):format(id) }, { tb:wait() })
      assert.same({}, p.writes)
    end)

    it("with kill ends the session; the next call gets the result nobody received", function()
      local e = engine()
      local id, p = running(e, "run")
      p:hold(true)
      local t, ctx = waiting_write(e, { session_id = id, yield_time_ms = 30000 })
      assert.is_true(e:cancel(ctx, "kill"))
      assert.is_true(t.done and p.terminated)
      assert.same({ true, "terminated" }, { e:describe(id).ended, e:describe(id).reason })
      local r = assert(e:write_stdin({ session_id = id }))
      assert.same({ 128 + 15, "TERM" }, { r.exit_code, r.signal_name })
      assert.same({ "This is the result of a call that was cancelled" }, r.warnings)
      assert.same({ nil, ("Unknown process id %d" .. TERMINATED):format(id) },
        { e:write_stdin({ session_id = id }) })
    end)

    it("terminate says a session ended inside a cancelled call had already exited", function()
      local e = engine()
      local id, p = running(e, "run")
      p:hold(true)
      local t, ctx = waiting_write(e, { session_id = id, yield_time_ms = 30000 })
      e:cancel(ctx, "kill")
      assert.is_true(t.done)
      assert.same({ nil, ("Session %d had already exited"):format(id), true }, { e:terminate(id) })
      assert.same({ nil, ("Unknown process id %d"):format(id) }, { e:terminate(id) })
    end)

    it("cancelled before it starts, a call starts nothing", function()
      local e = engine()
      local r, err = e:exec_command({ cmd = "run" }, { cancelled = true })
      assert.is_nil(r)
      assert.matches("cancelled", err)
      assert.equals(0, #fake.spawned)
    end)
  end)
end)
