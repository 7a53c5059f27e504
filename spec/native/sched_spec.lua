local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

describe("the host", function()
  after_each(H.assert_clean)

  it("shares its loop with luv: require('luv') is the host's copy", function()
    assert.equals(package.loaded.luv, require("luv"))
    assert.is_nil(uv.loop_mode()) -- top-level code runs outside the loop
  end)

  it("keeps ./?.lua and ./?.so off the module paths", function()
    for entry in (package.path .. ";" .. package.cpath):gmatch("[^;]+") do
      assert.is_not.equals("./?.lua", entry)
      assert.is_not.equals("./?/init.lua", entry)
      assert.is_not.equals("./?.so", entry)
    end
  end)

  it("preloads luxec.core and reports its versions", function()
    local core = require("luxec.core")
    assert.equals(luxec.version, core.version)
    assert.matches("^Lua 5%.4", core.lua_version)
    assert.equals(uv.version_string(), core.uv_version)
  end)
end)

describe("luxec.sleep", function()
  after_each(H.assert_clean)

  it("from top-level code drives the loop until the time has passed", function()
    local fired = false
    local t = uv.new_timer()
    t:start(20, 0, function()
      fired = true
      t:close()
    end)
    local t0 = H.now_ms()
    luxec.sleep(0.06)
    local elapsed = H.now_ms() - t0
    assert.is_true(fired, "a timer due during the sleep must fire")
    assert.is_true(elapsed >= 59, "slept " .. elapsed .. " ms")
  end)

  it("in two tasks runs concurrently: the total is the longer sleep, not the sum", function()
    local t0 = H.now_ms()
    local order = {}
    local a = luxec.go(function()
      order[#order + 1] = "a starts"
      luxec.sleep(0.3)
      order[#order + 1] = "a ends"
      return "a"
    end)
    local b = luxec.go(function()
      order[#order + 1] = "b starts"
      luxec.sleep(0.4)
      order[#order + 1] = "b ends"
      return "b"
    end)
    assert.same({ true, "a" }, { a:wait() })
    assert.same({ true, "b" }, { b:wait() })
    local elapsed = H.now_ms() - t0
    assert.is_true(elapsed >= 399, "elapsed " .. elapsed)
    -- serialised sleeps would end a before b starts
    assert.same({ "a starts", "b starts", "a ends", "b ends" }, order)
  end)

  it("yields inside a task so other tasks run meanwhile", function()
    local order = {}
    local a = luxec.go(function()
      order[#order + 1] = "a start"
      luxec.sleep(0.03)
      order[#order + 1] = "a end"
    end)
    local b = luxec.go(function()
      order[#order + 1] = "b start"
      luxec.sleep(0.005)
      order[#order + 1] = "b end"
    end)
    a:wait()
    b:wait()
    assert.same({ "a start", "b start", "b end", "a end" }, order)
  end)

  it("of zero returns after one turn of the loop", function()
    -- A check handle runs once at the end of every turn; a timer due now runs in the turn,
    -- one due later does not.
    local turns, due, later = 0, false, false
    local check = uv.new_check()
    check:start(function() turns = turns + 1 end)
    check:unref()
    local t1, t2 = uv.new_timer(), uv.new_timer()
    t1:start(0, 0, function() due = true end)
    t2:start(1000, 0, function() later = true end)
    luxec.sleep(0)
    check:stop()
    assert.same({ turns = 1, due = true, later = false }, { turns = turns, due = due,
      later = later })
    check:close()
    t1:close()
    t2:close()
    uv.run("nowait")
  end)

  it("of zero in a task lets the loop look for I/O before the task goes on (no starving)",
    function()
      -- a task that sleeps 0 between pieces of work, and another that waits for a program:
      -- the program's end is seen while the first still works, not only when it is done
      local steps, seen_at = 0, nil
      local busy = luxec.go(function()
        for _ = 1, 200 do -- (2 ms of work a step: 0.4 s in all, a program's life many times)
          local t = uv.hrtime() + 2e6
          while uv.hrtime() < t do end
          steps = steps + 1
          luxec.sleep(0)
        end
      end)
      local other = luxec.go(function()
        local p = assert(luxec.spawn({ "true" }))
        p:wait({ timeout = 10 })
        p:close()
        seen_at = steps
      end)
      assert.is_true(busy:wait())
      assert.is_true(other:wait())
      assert.is_true(seen_at < 200, "the program's end was seen only after the busy task")
    end)

  it("refuses to block inside a loop callback outside a task", function()
    local err
    local t = uv.new_timer()
    t:start(0, 0, function()
      local ok, e = pcall(luxec.sleep, 0.01)
      err = ok and "no error" or e
      t:close()
    end)
    H.wait_for(function()
      return err ~= nil
    end, 10000, "the timer")
    assert.matches("cannot wait inside a loop callback", err)
  end)
end)

describe("luxec.go", function()
  after_each(H.assert_clean)

  it("runs the function at once until its first wait and passes arguments", function()
    local seen
    local task = luxec.go(function(x, y)
      seen = x + y
      luxec.sleep(0.001)
      return x * y, "done"
    end, 3, 4)
    assert.equals(7, seen)
    assert.is_false(task.done)
    assert.same({ true, 12, "done" }, { task:wait() })
    assert.is_true(task.done)
    assert.matches("luxec.task %(done%)", tostring(task))
  end)

  it("hands a task's error to the task waiting on it", function()
    local task = luxec.go(function()
      luxec.sleep(0.001)
      error("task broke", 0)
    end)
    local ok, err = task:wait()
    assert.is_false(ok)
    assert.equals("task broke", err)
    assert.matches("failed", tostring(task))
  end)

  it("lets a task wait on another task", function()
    local inner = luxec.go(function()
      luxec.sleep(0.01)
      return 42
    end)
    local outer = luxec.go(function()
      local _, v = inner:wait()
      return v + 1
    end)
    assert.same({ true, 43 }, { outer:wait() })
  end)

  it("returns at once when woken by a timer that was due before the loop polled", function()
    -- regression: libuv runs due timers before it polls; a wake there was followed by a
    -- poll that blocked until the next event (here: the process's exit, 60 s later)
    local p = assert(luxec.spawn({ "sleep", "60" }))
    p._core:ref(true) -- its handles keep the loop polling
    local t0 = H.now_ms()
    local t = uv.new_timer()
    require("luxec.sched").suspend(function(wake)
      t:start(0, 0, wake)
    end)
    local waited = H.now_ms() - t0
    t:close()
    p:close()
    assert.is_true(waited < 30000, "the wait took " .. waited .. " ms")
  end)

  it("reports a wait that can never end instead of hanging", function()
    local ok, err = pcall(function()
      require("luxec.sched").suspend(function() end)
    end)
    assert.is_false(ok)
    assert.matches("wait can never end", err)
  end)
end)

describe("a session closed while tasks wait on it", function()
  for _, tty in ipairs({ false, true }) do
    it("ends every wait at once, each as the session being over (" .. (tty and "PTY" or "pipes")
      .. ")", function()
      local p = assert(luxec.spawn({ "sleep", "30" }, { tty = tty }))
      local t0 = uv.hrtime()
      local function secs() return (uv.hrtime() - t0) / 1e9 end
      local w = luxec.go(function()
        local st, err = p:wait({ timeout = 10 })
        return secs(), st and st.killed_by, st and st.signal_name, err
      end)
      local w2 = luxec.go(function() -- (no limit: once an error, "wait can never end")
        local st = p:wait()
        return secs(), st.killed_by
      end)
      local o = luxec.go(function() return p:wait_output({ timeout = 10 }), secs() end)
      local e = luxec.go(function()
        local i, msg, kind = p:expect("never", { timeout = 10 })
        return i, msg, kind, secs()
      end)
      local wi = luxec.go(function()
        local ok, msg, kind = p:wait_input({ timeout = 10 })
        return ok, msg, kind, secs()
      end)
      luxec.go(function()
        luxec.sleep(0.2)
        p:close()
      end)
      local ok, ws, by, sig, err = w:wait()
      assert.is_true(ok, ws)
      assert.same({ "close", "KILL" }, { by, sig }, err)
      assert.is_true(ws < 5, ws)
      local ok2, ws2, by2 = w2:wait()
      assert.is_true(ok2, ws2)
      assert.equals("close", by2)
      assert.is_true(ws2 < 5, ws2)
      local ok3, got, os = o:wait()
      assert.same({ true, true }, { ok3, got })
      assert.is_true(os < 5, os)
      local ok4, i, msg, kind, es = e:wait()
      assert.is_true(ok4, i)
      assert.is_nil(i)
      assert.equals("eof", kind)
      assert.matches("^eof: the session ended %(closed, killed by SIGKILL%) without a match "
        .. "for \"never\"", msg)
      assert.is_true(es < 5, es)
      local ok5, wok, wmsg, wkind, wis = wi:wait()
      assert.is_true(ok5, wok)
      assert.same({ nil, "eof" }, { wok, wkind }, wmsg)
      assert.is_true(wis < 5, wis)
    end)
  end

  it("ends a wait of top-level code that a callback closed it in", function()
    local p = assert(luxec.spawn({ "sleep", "30" }))
    local t = uv.new_timer()
    t:start(200, 0, function() p:close() end)
    local t0 = uv.hrtime()
    local st, err = p:wait({ timeout = 10 })
    t:close()
    assert.is_truthy(st, err)
    assert.equals("close", st.killed_by)
    assert.is_true((uv.hrtime() - t0) / 1e9 < 5)
  end)
end)
