-- luxec.run with events: the one-call prompt answerer (pexpect's run(events=...)).
local H = require("helper")
local luxec = require("luxec")

local err_of = H.err_of

-- A dialog: a name read with echo, then a password read with echo off (turned off before
-- the prompt is shown, as getpass does).
local DIALOG = "printf 'Name: '; read n; stty -echo; printf 'Password: '; read p; stty echo; " ..
  "echo; echo \"hello $n ($p)\""

describe("luxec.run with events", function()
  after_each(H.assert_clean)

  it("answers each prompt with a string or a function's result, on a terminal", function()
    local seen = {}
    local r = assert(luxec.run({ "sh", "-c", DIALOG }, { timeout = 10, events = {
      ["Name: "] = "bob\n",
      ["Password: "] = function(p, match, count)
        seen[#seen + 1] = { match, count, p:status().echo_off }
        return "pw" .. count .. "\n"
      end,
    } }))
    -- (count: the events answered before this one, pexpect's event_count)
    assert.equals("Name: bob\r\nPassword: \r\nhello bob (pw1)\r\n", r.output)
    assert.same({ { "Password: ", 1, true } }, seen)
    assert.same({ 0, 2, false, false }, { r.code, r.events, r.stopped, r.timed_out })
  end)

  it("takes a list of {pattern, answer} in order, regexes and Lua patterns included", function()
    local script = "for q in '3 + 4' '10 + 5'; do printf '%s = ? ' \"$q\"; read a; " ..
      "echo \"[$a]\"; done"
    local r = assert(luxec.run({ "sh", "-c", script }, { timeout = 10, tty = false, events = {
      { { re = [[(\d+) \+ (\d+) = \?]] }, function(p)
        return ("%d\n"):format(tonumber(p.captures[1]) + tonumber(p.captures[2]))
      end },
      { { lua = "never%d" }, "x\n" },
    } }))
    assert.equals("3 + 4 = ? [7]\n10 + 5 = ? [15]\n", r.output)
    assert.same({ 0, 2 }, { r.code, r.events })
  end)

  it("a function's count starts at 0 (pexpect's test_run_unicode); any result but a string, "
    .. "nil or false ends the run", function()
    local prompt = "while :; do printf '<in >'; read x; echo \"<out>$x\"; done"
    for _, stop in ipairs({ true, 1, {} }) do
      local seen = {}
      local r = assert(luxec.run({ "sh", "-c", prompt }, { timeout = 10, events = {
        ["<in >"] = function(_, _, count)
          seen[#seen + 1] = count
          if count == 0 then return "\u{fe}\n" end
          return stop
        end } }))
      assert.same({ 0, 1 }, seen, tostring(stop))
      assert.same({ true, false, 2 }, { r.stopped, r.timed_out, r.events }, tostring(stop))
      assert.equals("<in >\u{fe}\r\n<out>\u{fe}\r\n<in >", r.output)
    end
    -- nil and false send nothing, and the run goes on
    local seen = {}
    local r = assert(luxec.run({ "sh", "-c", "echo A; sleep 0.2; echo B" }, { timeout = 10,
      events = {
        A = function(_, _, count) seen[#seen + 1] = count return nil end,
        B = function(_, _, count) seen[#seen + 1] = count return false end,
      } }))
    assert.same({ 0, 1 }, seen)
    assert.same({ 0, false, false, 2 }, { r.code, r.stopped, r.timed_out, r.events })
  end)

  it("a function returning true ends the run; a timeout ends it too", function()
    local t0 = H.now_ms()
    local r = assert(luxec.run({ "sh", "-c", "echo ready; exec sleep 30" }, { events = {
      ready = function() return true end } }))
    assert.same({ true, false, 1, 15 }, { r.stopped, r.timed_out, r.events, r.signal })
    assert.equals("ready\r\n", r.output)
    r = assert(luxec.run({ "sh", "-c", "echo waiting; exec sleep 30" }, { timeout = 0.3,
      events = { never = "x\n" } }))
    assert.same({ false, true, 0, 15 }, { r.stopped, r.timed_out, r.events, r.signal })
    assert.equals("waiting\r\n", r.output)
    assert.is_true(H.now_ms() - t0 < 3000)
  end)

  it("ends normally when the program exits before its prompt's answer is written", function()
    -- (pexpect's run returns the output here too: the answer has nobody to read it)
    local r = assert(luxec.run({ "sh", "-c", "printf 'Name: '; exit 0" }, { timeout = 10,
      events = { ["Name: "] = function(p) assert(p:wait({ timeout = 10 })) return "bob\n" end } }))
    assert.same({ 0, "Name: ", 1, false, false },
      { r.code, r.output, r.events, r.stopped, r.timed_out })
  end)

  it("an error raised by an answer function propagates; nothing is left running", function()
    local err = err_of(luxec.run, { "sh", "-c", "echo go; exec sleep 30" }, { events = {
      go = function() error("no answer for go", 0) end } })
    assert.equals("no answer for go", err)
  end)

  it("names bad events before starting anything", function()
    assert.equals("bad option 'events' to 'run' (the answer to \"x\" must be a string or a " ..
      "function, got number)", err_of(luxec.run, { "true" }, { events = { x = 1 } }))
    assert.equals("bad option 'events' to 'run' (no event given)",
      err_of(luxec.run, { "true" }, { events = {} }))
    assert.equals("bad option 'events' to 'run' (entry 1: {pattern, answer} expected)",
      err_of(luxec.run, { "true" }, { events = { "x" } }))
    assert.matches("^bad option 'events' to 'run' %(invalid regex",
      err_of(luxec.run, { "true" }, { events = { [{ re = "(" }] = "x" } }))
    assert.equals("bad option 'events' to 'run' (table expected, got string)",
      err_of(luxec.run, { "true" }, { events = "x" }))
  end)
end)
