-- luxec.process and its expect against a fake core (spec/unit/fake_core.lua): the waits, the
-- grace after exit, expect's EOF and TIMEOUT, listeners that raise, the input path — with
-- events driven by hand and no process started.
local fake_core = require("unit.fake_core")
local luxec = require("luxec")
local process = require("luxec.process")
local uv = require("luv")

local function now_ms() return uv.hrtime() / 1e6 end

describe("luxec.process over a fake core", function()
  local real, fake
  before_each(function()
    real, fake = process.core, fake_core.new()
    process.core = fake
  end)
  after_each(function() process.core = real end)

  it("is finished only with the exit and EOF both in; wait returns the status then", function()
    local p = assert(process.spawn({ "prog" }))
    local h = fake.last
    h:eof()
    assert.is_false(p:finished())
    h:later(20, function() h:exit(3) end)
    local st = assert(p:wait({ timeout = 5 }))
    assert.same({ true, 3, false }, { st.finished, st.code, st.running })
    assert.is_true(h.referenced == false, "the wait held the host only while it waited")
    p:close()
    assert.is_true(h.closed)
  end)

  it("gives an exited program grace_ms for EOF, then finishes naming the holders", function()
    local p = assert(process.spawn({ "prog" }, { grace_ms = 30 }))
    local h = fake.last
    uv.update_time() -- the grace timer starts from the loop's time
    local t0 = now_ms()
    h:exit(0)
    assert.is_false(p:finished())
    local st = assert(p:wait({ timeout = false }))
    assert.is_true(now_ms() - t0 >= 25)
    assert.same({ { pid = 99, cmd = "holder" } }, st.holders)
    p:close()
  end)

  it("times out a wait without events, and takes timeout = false as no limit", function()
    local p = assert(process.spawn({ "prog" }))
    assert.same({ nil, "timeout" }, { p:wait({ timeout = 0.03 }) })
    fake.last:later(30, function(h) h:eof() h:exit(0) end)
    assert.equals(0, p:wait({ timeout = false }).code)
    p:close()
  end)

  it("expect(EOF) returns once the output ended and the exit is in", function()
    local p = assert(process.spawn({ "prog" }))
    local h = fake.last
    h:later(10, function() h:output("last words") h:eof() end)
    h:later(60, function() h:exit(7) end)
    assert.same({ 1, luxec.EOF }, { p:expect(luxec.EOF, { timeout = 5 }) })
    assert.equals("last words", p.before)
    assert.same({ false, 7 }, { p:status().running, p:status().code })
    p:close()
  end)

  it("expect(EOF) of a program that runs on with its output closed returns at the timeout",
    function()
      local p = assert(process.spawn({ "prog" }))
      fake.last:eof()
      local t0 = now_ms()
      assert.equals(1, p:expect(luxec.EOF, { timeout = 0.05 }))
      assert.is_true(now_ms() - t0 >= 45)
      assert.is_true(p:status().running)
      p:close()
    end)

  it("expect returns TIMEOUT's index, or nil and a message naming the patterns", function()
    local p = assert(process.spawn({ "prog" }))
    fake.last:output("partial")
    assert.same({ 2, luxec.TIMEOUT }, { p:expect({ "done", luxec.TIMEOUT }, { timeout = 0.02 }) })
    assert.equals("partial", p.before)
    local none, msg, code = p:expect("done", { timeout = 0 })
    assert.same({ nil, "timeout" }, { none, code })
    assert.matches('no match for "done" within 0 s; last output: "partial"', msg, 1, true)
    fake.last:later(10, function(h) h:output(" done") end)
    assert.same({ 1, "done" }, { p:expect("done", { timeout = false }) })
    p:close()
  end)

  it("runs every exit listener and wakes the wait when one raises; the error is reported once",
    function()
      local p = assert(process.spawn({ "prog" }))
      local h = fake.last
      local second
      p:on("exit", function() error("boom") end)
      p:on("exit", function(st) second = st.code end)
      h:later(10, function() h:eof() h:exit(2) end)
      local t0 = now_ms()
      assert.equals(2, p:wait({ timeout = 5 }).code)
      assert.is_true(now_ms() - t0 < 1000)
      assert.equals(2, second)
      assert.equals(1, #fake.errors)
      assert.equals('p:on("exit") listener', fake.errors[1].where)
      assert.matches("^luxec.proc %(pid %d+, exited 2%): .*boom", fake.errors[1].msg)
      p:close()
    end)

  it("passes every input through the parts: send, sendline, sendcontrol, sendeof", function()
    local p = assert(process.spawn({ "prog" }, { tty = true }))
    local seen = {}
    p:_add_part({ input = function(_, _, data) seen[#seen + 1] = data end })
    p:send("a")
    p:sendline("b")
    p:sendcontrol("^")
    p:sendeof()
    assert.same({ "a", "b\n", "\30", "\4" }, seen)
    assert.same(seen, fake.last.written)
    assert.is_nil(fake.last.stdin_closed) -- the terminal stays usable
    p:close()
  end)

  it("wait_input returns only when nothing is unread and the program reads", function()
    local p = assert(process.spawn({ "prog" }))
    local h = fake.last
    h.waiting, h.unread = true, 5 -- still blocked in the read that the line will end
    h:later(30, function() h.unread = 0 end)
    local t0 = now_ms()
    assert.is_true(p:wait_input({ timeout = 5 }))
    assert.is_true(now_ms() - t0 >= 25)
    h.waiting = false
    assert.equals("timeout", select(3, p:wait_input({ timeout = 0.02 })))
    p:close()
  end)

  it("status says waiting for input only with nothing unread (as the engine asks it)",
    function()
      local p = assert(process.spawn({ "prog" }))
      local h = fake.last
      h.waiting, h.unread = true, 4 -- an answer written, the program not scheduled yet
      assert.is_false(p:status().waiting_for_input)
      h.unread = 0
      assert.is_true(p:status().waiting_for_input)
      h.unread = nil -- stdin that cannot be asked (closed, /dev/null): the read decides
      assert.is_true(p:status().waiting_for_input)
      p:close()
    end)

  it("builds the environment and resolves the sandbox once per spawn", function()
    local options = require("luxec.process.options")
    local sandbox = require("luxec.sandbox")
    local build, resolve = options.build_env, sandbox.resolve
    local builds, resolves = 0, 0
    options.build_env = function(...) builds = builds + 1 return build(...) end
    sandbox.resolve = function(...) resolves = resolves + 1 return resolve(...) end
    local ok, p = pcall(process.spawn, { "prog" },
      { env = { A = "1" }, sandbox = { mode = "read-only" }, cgroup = false })
    options.build_env, sandbox.resolve = build, resolve
    assert(ok, p)
    assert.same({ 1, 1 }, { builds, resolves })
    local env = fake.last.copts.env
    assert.equals("A=1", env[1])
    assert.matches("^LUXEC_SESSION=", env[2])
    p:close()
  end)
end)
