--- luxec.process.status: what a session's status says (Process:status), and the part of it a
--- wait for input looks at several times a second (Process:_input_wait) without the rest.
--- Part of the class luxec.process defines.
local lazy = require("luxec.lazy") -- loaded by the first sandboxed status
local limits = lazy("luxec.sandbox.limits")
local sandbox = lazy("luxec.sandbox")

---@param Process luxec.Process  the class, being defined by luxec.process
---@param check_open fun(p: luxec.Process, fname: string)  raises on a closed process
return function(Process, check_open)
  -- Whether a running program waits for input, echo_off, canonical. Nothing unread first, then
  -- blocked reading: in that order both held together (input written a moment ago and not yet
  -- read is not a wait for more).
  local function input_wait(core)
    local unread = core:input_unread()
    local waiting, echo_off, canonical = core:input_state()
    if math.type(unread) and unread > 0 then waiting = false end
    return waiting, echo_off, canonical
  end

  -- The core's status with what the session knows besides: the finish, the holders, how it
  -- was killed, the sandbox's report (its limits' counters read now from the cgroup).
  local function core_status(self)
    local st = self._core:status()
    st.finished = self._finished
    st.holders = self._holders
    st.killed_by = st.killed_by or self._killed_by
    st.sandbox = self._core:sandbox_report()
    if st.sandbox and self._sbx then sandbox.annotate(st.sandbox, self._sbx, self._proxy) end
    if st.sandbox and st.sandbox.limits then
      st.sandbox.limits_hit = limits.explain(st.sandbox.limits)
    end
    return st
  end

  ---@class luxec.Status
  ---@field pid integer
  ---@field running boolean
  ---@field exited boolean
  ---@field code integer|nil
  ---@field signal integer|nil
  ---@field signal_name string|nil
  ---@field core_dumped boolean|nil
  ---@field killed_by string|nil
  ---@field eof boolean
  ---@field finished boolean
  ---@field holders {pid: integer, cmd: string}[]|nil
  ---@field waiting_for_input boolean
  ---@field echo_off boolean|nil
  ---@field canonical boolean|nil
  ---@field tty boolean
  ---@field cgroup boolean
  ---@field sandbox table|nil

  --- {pid, running, exited, code, signal, signal_name, core_dumped, killed_by, eof, finished,
  ---  holders, waiting_for_input, echo_off, canonical, tty, cgroup, sandbox}; sandbox.limits
  ---  says how each limit is enforced and what it counted, sandbox.limits_hit in one line which
  ---  limit ended or throttled the session (nil when none did)
  ---@return luxec.Status
  function Process:status()
    local final = self._final
    if final and not self._core then -- (closed: the status it had then, a copy)
      local st = {}
      for k, v in pairs(final) do st[k] = v end
      return st
    end
    check_open(self, "status")
    local st = core_status(self)
    if st.running then
      st.waiting_for_input, st.echo_off, st.canonical = input_wait(self._core)
    else
      st.waiting_for_input = false
    end
    return st
  end

  --- The status a session being closed keeps for status() and wait() after the close: a
  --- program still running is killed by the close (SIGKILL to its tree). Nothing of the
  --- input state (no program reads any more).
  ---@return luxec.Status
  function Process:_final_status()
    local st = core_status(self)
    if st.running then
      st.running, st.signal, st.signal_name = false, 9, "KILL"
      st.killed_by = st.killed_by or "close"
    end
    st.waiting_for_input = false
    return st
  end

  --- status()'s waiting_for_input, echo_off and canonical of a running program, without the
  --- rest of the status (what a wait for input looks at, several times a second).
  ---@return boolean waiting, boolean|nil echo_off, boolean|nil canonical
  function Process:_input_wait()
    if self._finished or self:_ended() then return false end -- (exited)
    return input_wait(self._core)
  end
end
