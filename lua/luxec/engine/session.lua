--- luxec.engine.session: one exec session's life inside the engine — its lock (one call at a
--- time), the wait of a call (exit, deadline, input, cancellation), the result it returns,
--- and its end (the terminate task, forgetting the id, closing the process). Functions take
--- the engine and the session; the engine's registry (luxec.engine.sessions) stays the only
--- list of sessions.
local sched = require("luxec.sched")
local output = require("luxec.engine.output")
local meta = require("luxec.engine.meta")
local args = require("luxec.engine.args")
local clean = require("luxec.engine.clean")

local M = {}

local function chunk_id()
  return ("%06x"):format(math.random(0, 0xFFFFFF))
end

--- One call at a time per session: later callers queue; `unlock` hands the lock over. `ctx`
--- is the call holding it (what a cancellation of that call interrupts).
---@param s table
---@param ctx table|nil
function M.lock(s, ctx)
  if s._locked then
    sched.suspend(function(wake) s._queue[#s._queue + 1] = wake end)
  else
    s._locked = true
  end
  s._holder = ctx
end

--- Close the process of a session (once).
function M.close(eng, s)
  if s.closed then return end
  s.closed = true
  eng._pending[s] = nil
  if s.timer then
    s.timer:close()
    s.timer = nil
  end
  s.p:close()
  if s.log and not s.log_referenced then os.remove(s.log) end
end

-- Close a session nobody needs any more, once no call and no terminate is using it.
local function maybe_close(eng, s)
  if s.close_pending and not s._locked and s._busy == 0 then M.close(eng, s) end
end

function M.unlock(eng, s)
  s._holder = nil
  local nxt = table.remove(s._queue, 1)
  if nxt then
    nxt()
  else
    s._locked = false
    maybe_close(eng, s)
  end
end

--- Forget a session: its id is unknown from now on (the engine remembers it as ended, for
--- `describe` and `read_output`); it closes when no call uses it.
---@param why "exited"|"timed_out"|"terminated"|"pruned"|"shutdown"
function M.forget(eng, s, why)
  if s.id and eng._store:get(s.id) == s then eng._store:remove(s.id) end
  -- (pruning removed it; one that ends within its first call was never named by a result:
  -- its id is given back, not remembered)
  if s.stored and not s.removed and not s.first_call then meta.ended_add(eng, s, why) end
  s.removed = true
  s.close_pending = true
end

-- The task that ends a session's process tree (TERM, the grace, KILL): one per session,
-- started on first need; whoever needs the tree gone waits for it.
local function ending(eng, s)
  if not s.kill_task then
    s.terminating = true
    s._busy = s._busy + 1
    s.kill_task = sched.go(function()
      pcall(s.p.terminate, s.p, { grace_ms = eng._cfg.kill_grace_ms })
      s._busy = s._busy - 1
      maybe_close(eng, s)
    end)
  end
  return s.kill_task
end

--- End a session's process tree and forget it; returns once nothing of it is left.
function M.kill(eng, s, why)
  M.forget(eng, s, why or "terminated")
  if s.closed then return end
  ending(eng, s):wait()
end

--- The hard timeout (from the session's timer or a call that sees it pass).
function M.time_out(eng, s)
  if s.terminating or s.closed or s.p:finished() then return end
  s.timed_out = true
  ending(eng, s)
end

--- Interrupt the wait of the call holding session `s` (if `ctx` is given: only when that
--- call holds it). Returns whether a call was waiting.
function M.interrupt(s, ctx)
  if s.closed or not s._locked then return false end
  if ctx ~= nil and s._holder ~= ctx then return false end
  s.interrupted = true
  s.p:_interrupt_waits()
  return true
end

local NOTBOL

-- The part of reader data (raw bytes from `start`, `dropped` of them missing at `gap_at`)
-- that lies at or after raw offset `from`.
local function from_offset(data, start, dropped, gap_at, from)
  local skip = from - start
  if skip <= 0 then return data end
  if dropped == 0 or skip <= gap_at then return data:sub(skip + 1) end
  if skip <= gap_at + dropped then return data:sub(gap_at + 1) end
  return data:sub(skip - dropped + 1)
end

-- Whether the call's `until` regex (s.until_re) matches the output this call returns. The
-- output is watched through a reader of its own (it does not consume what the call will
-- return, so the output buffer still bounds memory) and cleaned as the result is; each new
-- piece is searched together with the UNTIL_WINDOW bytes of text before it. Sets s.match.
local function until_matched(s)
  local re = s.until_re
  if not re then return false end
  local u = s.until_state
  if not u then
    u = { reader = s.p:reader(), pos = 0 }
    s.until_state = u
  end
  if s.until_fresh then -- a new call: its output starts where the last result's ended
    s.until_fresh = nil
    u.from, u.window, u.bol = s.raw_read, "", true
    u.cleaner = clean.new({ strip = s.cleaner.strip, collapse = s.cleaner.collapse })
  end
  local data, dropped, gap_at = u.reader.read()
  local start = u.pos
  u.pos = start + #data + dropped
  if u.pos <= u.from then return false end
  local out = clean.output()
  u.cleaner:feed(out, from_offset(data, start, dropped, gap_at, u.from), math.max(start, u.from),
    false)
  local text = clean.text(out)
  if text == "" then return false end
  local subject = u.window .. text
  local flags
  if not u.bol then
    NOTBOL = NOTBOL or require("rex_pcre2").flags().NOTBOL
    flags = NOTBOL -- (the window starts inside a line: ^ does not match there)
  end
  local a, b = re:find(subject, 1, flags)
  if a then
    s.match = subject:sub(a, b)
    return true
  end
  if #subject > args.UNTIL_WINDOW then
    local cut = #subject - args.UNTIL_WINDOW
    u.bol = subject:byte(cut) == 10
    u.window = subject:sub(cut + 1)
  else
    u.window = subject
  end
  return false
end

--- Wait until the process finished (exited, output closed or the drain over), the deadline
--- passed, the output matched the call's `until`, or — from input_from on — it waits for
--- input with no output for a moment. `lim` is the call's limits (the engine's config, or a
--- call's override of it). Returns "exited", "deadline", "matched", "input" or "password".
function M.wait(eng, s, deadline, input_from, lim, ctx)
  local p = s.p
  local watch = lim.early_return and s.input_possible
  local now_ms = eng._now
  -- From input_from on, the input state is looked at only while no output flows: at once
  -- ("look"), then after every input_poll_ms without output ("poll"); output, or a look that
  -- finds the program waiting, starts a wait for input_quiet_ms without output ("quiet"), at
  -- the end of which a program that (still) waits waits for input.
  local step = "look"
  while true do
    if p:finished() then return "exited" end
    if until_matched(s) then
      -- a program that ends right after the match (a server that printed its error, `echo
      -- READY; exit`): its exit, and what it printed last, in this result (drain_ms at most)
      local left = math.min(lim.drain_ms, deadline - now_ms())
      if left > 0 then p:wait({ timeout = left / 1000 }) end
      return p:finished() and "exited" or "matched"
    end
    if s.interrupted or (ctx and ctx.cancelled) then -- the caller gave up on this call
      s.interrupted = nil
      return "deadline"
    end
    local now = now_ms()
    if s.hard_deadline and now >= s.hard_deadline then M.time_out(eng, s) end
    if s.terminating then -- a timeout or terminate is ending it: wait for that, bounded
      s.kill_task:wait()
      if not p:finished() then p:wait({ timeout = 1 }) end
      return p:finished() and "exited" or "deadline"
    elseif now >= deadline then
      return "deadline"
    else
      local left = math.min(deadline, s.hard_deadline or math.huge) - now
      if (not watch and not s.until_re) or p:eof() then
        -- with the output closed (or nothing to watch it for), only the exit ends the wait
        p:wait({ timeout = left / 1000 })
      elseif now < input_from then
        p:wait_output({ timeout = math.min(left, input_from - now) / 1000 })
      elseif step == "look" then
        step = p:_input_wait() and "quiet" or "poll"
      elseif step == "quiet" then
        if not p:wait_output({ timeout = math.min(left, lim.input_quiet_ms) / 1000 }) then
          local waiting, echo_off, canonical = p:_input_wait()
          if waiting then
            -- a secret prompt reads whole lines without echo; a line editor reads keys
            local secret = echo_off and (canonical or canonical == nil)
            return secret and "password" or "input"
          end
          step = "poll"
        end
      else
        step = p:wait_output({ timeout = math.min(left, lim.input_poll_ms) / 1000 }) and "quiet"
          or "look"
      end
    end
  end
end

--- The result of a call that waited: output, then exit code (and the session forgotten) or
--- the session id and what it is doing. `keep`: which end of a long output to keep.
function M.result(eng, s, reason, start, tokens, keep)
  local p = s.p
  local finished = p:finished()
  local res = { chunk_id = chunk_id(), warnings = {} }
  output.collect(s, eng._cfg.truncation, tokens, finished, res, keep)
  if s.until_re then
    res.match = s.match
    s.until_re, s.until_fresh, s.match = nil, nil, nil
  end
  res.wall_time = (eng._now() - start) / 1000
  if res.log_range then eng._logs[res.log_range.path] = true end
  if finished then
    local st = p:status()
    if s.timed_out then
      res.exit_code, res.state, res.timed_out = 124, "timed_out", true
      res.timeout_ms = s.timeout_ms
    else
      res.exit_code = st.signal and 128 + st.signal or st.code
      res.state = "exited"
    end
    res.signal_name = st.signal_name
    res.sandbox = output.verdict(s, st, res)
    M.forget(eng, s, s.timed_out and "timed_out" or "exited")
  else
    res.session_id = s.id
    res.sandbox = output.new_denials(s)
    res.state = reason == "input" and "waiting_for_input"
      or reason == "password" and "waiting_for_password"
      or reason == "matched" and "matched" or "running"
  end
  if s.note then
    res.warnings[#res.warnings + 1] = s.note
    s.note = nil
  end
  res.full_output = nil
  return res
end

return M
