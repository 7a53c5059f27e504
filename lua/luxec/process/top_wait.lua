--- luxec.process.top_wait: the waits of top-level code on a native session (p:wait,
--- p:wait_output and p:expect outside luxec.go), which run each turn of the loop through the
--- core (core:run_once, core:run_read) and look at what they wait for after each turn. Part
--- of luxec.process, which calls these with the session and its core.
local sched = require("luxec.sched")
local uv = require("luv")

local M = {}

local hrtime, running, in_task = uv.hrtime, coroutine.running, sched.in_task

-- A wait with nothing left on the loop that could wake it: an error, not a hang.
local function never_ends(self)
  self._top_wait = false
  error("wait can never end: nothing left on the loop could wake it", 0)
end

-- A wait from top-level code on the native core: the core runs each turn of the loop itself
-- (core:run_once, which keeps the session's output out of Lua meanwhile) and pred is looked
-- at after each turn; no wake function, no timer of Lua's and no hold per wait. With
-- pred == nil it waits for output on stream `a` (past `b` bytes, or past what it carried
-- when the first turn began: the turn says both), the end of that stream or the finish.
-- self._top_wait tells wake_all that a turn may be under way (an error can leave it set: it
-- does no harm, the core ends a turn only while one runs).
function M.wait(self, core, pred, timeout_ms, a, b)
  local deadline = timeout_ms and (hrtime() / 1e6 + timeout_ms)
  local gen = self._interrupts or 0
  local left = timeout_ms -- (the first turn's: no clock read before it)
  local first = true
  self._top_wait = true
  repeat
    -- (a wait of 0 still takes one turn that does not block: it sees what the kernel holds
    -- now, output that came while top-level code ran and nothing turned the loop)
    if left and left <= 0 and not first then break end
    first = false
    if (self._interrupts or 0) ~= gen then break end -- see Process:_interrupt_waits
    local alive, now, before = core:run_once(left, pred == nil and a or nil)
    if self._core ~= core then -- closed meanwhile: over for every wait (see _wait_until)
      self._top_wait = false
      return true
    end
    local held
    if pred then
      held = pred(self, a, b)
    else
      b = b or before
      local eof = self._eof
      held = now > b or self._finished or (eof and eof[a]) or false
    end
    if held then
      self._top_wait = false
      return held
    end
    if not alive then never_ends(self) end
    left = deadline and deadline - hrtime() / 1e6
  until false
  self._top_wait = false
  return false
end

-- The wait of p:_wait_read_ms from top-level code: turns until output past `cursor` on
-- stream 1, its EOF, the finish, a close or an interrupt of the session, or `ms`; each turn and
-- the read of what it brought are one call of the core. Returns what the read returned, or
-- nothing when the wait ended without reading (timeout, interrupt, close).
function M.read(self, core, ms, cursor, deadline)
  deadline = deadline or ms and (hrtime() / 1e6 + ms)
  local gen = self._interrupts or 0
  local left = ms
  local first = true
  self._top_wait = true -- (see M.wait)
  repeat
    if left and left <= 0 and not first then break end -- (see M.wait: one look)
    if left and left < 0 then left = 0 end
    first = false
    if (self._interrupts or 0) ~= gen then break end -- see Process:_interrupt_waits
    local alive, data, next_cursor, dropped, gap_at = core:run_read(left, 1, cursor)
    if self._core ~= core then break end -- closed meanwhile
    local eof = self._eof
    if next_cursor > cursor or self._finished or (eof and eof[1]) then
      self._top_wait = false
      return data, next_cursor, dropped, gap_at
    end
    if not alive then never_ends(self) end
    left = deadline and deadline - hrtime() / 1e6
  until false
  self._top_wait = false
end

-- p:_wait_read_ms, defined on the class.
function M.install(Process)
  -- For a reader of stream 1 at `cursor` that found nothing new there: p:_wait_output_ms(ms),
  -- then the reader's read. Returns what core:read returns (data, next_cursor, dropped,
  -- gap_at), or nil when the session was closed meanwhile. From top-level code on the
  -- native core each turn of the loop and the read after it are one call of the core
  -- (M.read); otherwise the wait, then the read. (deadline: the caller's, hrtime's
  -- milliseconds when ms ends, if it has it at hand)
  function Process:_wait_read_ms(ms, cursor, deadline)
    local core = self._core
    local eof = self._eof
    if core.run_read and not self._finished and not (eof and eof[1]) then
      local _, main = running()
      if main or not in_task() then
        local data, next_cursor, dropped, gap_at = M.read(self, core, ms, cursor, deadline)
        if data then return data, next_cursor, dropped, gap_at end
        if self._core == nil then return nil end
        return core:read(1, cursor)
      end
    end
    self:_wait_output_ms(ms)
    if self._core == nil then return nil end
    return self._core:read(1, cursor)
  end
end

return M
