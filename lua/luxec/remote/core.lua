--- luxec.remote.core: the handle behind a remote session — the same methods as the native
--- handle (read by cursor, status, write, signal, resize, snapshot, ...), so that the one
--- Process class (luxec.process) drives it. Output comes from the server's notifications,
--- applied in sequence order; a gap (notifications the server held back from a slow client,
--- or a client that attached late) is filled with process/read. The bytes are kept here up to
--- `keep` per stream (the oldest are dropped, and a read says how many). Bytes the server no
--- longer holds as chunks but still has (its log, the session's head and tail) are fetched by
--- offset in pieces of `PIECE`, each once the readers have taken all but `keep` of what is
--- here (or at once while a wait for the end is under way); only what the server no longer
--- has at all is counted as dropped.
local base64 = require("luxec.serve.base64")
local sched = require("luxec.sched")
local uv = require("luv")

local M = {}

local Core = {}
Core.__index = Core

M.KEEP = 4 * 1024 * 1024
M.PIECE = 1024 * 1024
-- Bytes written to a connection's sessions and not yet answered by the server (which answers
-- once the program has taken its input) above which a write waits.
M.WINDOW = 8 * 1024 * 1024

function M.new(conn, id, info)
  local self = setmetatable({ conn = conn, id = id, tty = info.tty, pid = info.pid,
    streams = info.tty and 1 or info.streams, seen = 0, bufs = {}, exited = false,
    closed = false, keep = info.keep or M.KEEP, taken = { 0, 0 }, paced = true,
    queued = 0 }, Core)
  for s = 1, 2 do self.bufs[s] = M.buffer() end
  return self
end

-- A stream's bytes as they arrived, in parts (an append copies nothing): `base` is the offset
-- of the first part held, `total` the offset after the last.
function M.buffer()
  return { parts = {}, starts = {}, first = 1, n = 0, base = 0, total = 0 }
end

local function buf_append(b, data, keep)
  local n = b.n + 1 -- (not #b.parts: the parts before `first` are gone)
  b.n = n
  b.parts[n], b.starts[n] = data, b.total
  b.total = b.total + #data
  while b.total - b.base > 2 * keep and b.first < n do -- whole parts go, the newest stays
    b.parts[b.first], b.starts[b.first] = nil, nil
    b.first = b.first + 1
    b.base = b.starts[b.first]
  end
end

-- Forget everything held: the stream continues at `offset`.
local function buf_reset(b, offset)
  b.parts, b.starts, b.first, b.n, b.base, b.total = {}, {}, 1, 0, offset, offset
end

-- The stream continues at `offset` (> total): the bytes between are gone (what is held stays).
local function buf_skip(b, offset)
  if b.n < b.first then return buf_reset(b, offset) end
  b.total = offset
end

-- What is held from `cursor` on: data, next cursor, dropped (the bytes of the gaps: before
-- what is held, between the parts fetched around what the server no longer had, at the end)
-- and gap_at (where in data the first gap was).
local function buf_read(b, cursor)
  if cursor >= b.total then return "", b.total, 0, 0 end
  local dropped = 0
  if cursor < b.base then dropped, cursor = b.base - cursor, b.base end
  if b.n < b.first then return "", b.total, dropped, 0 end -- (nothing held since a reset)
  local i = b.n
  while i > b.first and b.starts[i] > cursor do i = i - 1 end
  local out, at, len, gap_at = {}, cursor, 0, dropped > 0 and 0 or nil
  for k = i, b.n do
    local start, part = b.starts[k], b.parts[k]
    if start > at then -- a gap
      gap_at, dropped, at = gap_at or len, dropped + start - at, start
    end
    if at < start + #part then
      out[#out + 1] = at == start and part or part:sub(at - start + 1)
      len, at = len + start + #part - at, start + #part
    end
  end
  if b.total > at then gap_at, dropped = gap_at or len, dropped + b.total - at end
  return table.concat(out), b.total, dropped, gap_at or 0
end

local STREAM = { pty = 1, stdout = 1, stderr = 2 }

--- (attach from a cursor) The chunks up to `seq` and the bytes before `offsets` were received
--- by an earlier client: this one starts after them.
function Core:_start_at(seq, offsets)
  self.seen = seq
  for s = 1, 2 do
    buf_reset(self.bufs[s], offsets[s])
    self.taken[s] = offsets[s]
  end
end

function Core:_append(stream, data)
  if #data == 0 then return end
  buf_append(self.bufs[stream], data, self.keep)
  if self.proc and not self.proc:closed() then self.proc:_event("output", stream, #data) end
end

-- Whether every output chunk before the exit has been applied: then the session ends.
function Core:_maybe_finish()
  if not (self.exit_seq and self.closed and self.seen >= self.exit_seq - 1) then return end
  if self.finished then return end
  self.finished = true
  -- (each event may wake a task that closes the session before the next is told)
  for s = 1, self.streams do
    if self.proc and not self.proc:closed() then self.proc:_event("eof", s) end
  end
  if self.proc and not self.proc:closed() then self.proc:_event("exit") end
end

local STREAM_NUMBER = { 1, 2 }

--- A chunk (its bytes) from a notification or a read: applied if it is the next one; a later
--- one starts filling the gap. `stream`: a name ("pty", "stdout", "stderr") or 1 or 2.
function Core:_chunk(seq, stream, data, offset)
  if seq <= self.seen or self.lagging then return end -- (read again once caught up)
  local n = STREAM_NUMBER[stream] or STREAM[stream] or 1
  if seq ~= self.seen + 1 or (offset and offset > self.bufs[n].total) then
    if not self.filling then self:_fill() end -- (a fill under way fetches it)
    return
  end
  self.seen = seq
  self:_append(n, data)
  self:_maybe_finish()
end

-- Wake the catching up (deferred: a read may come from inside a loop callback or a task).
function Core:_room()
  local w = self.room_wake
  if not w then return end
  self.room_wake = nil
  local t = uv.new_timer()
  t:start(0, 0, function()
    t:close()
    w()
  end)
end

--- Stop pacing by the readers (a wait for the end is under way): what the server holds comes
--- at once, and this buffer keeps the newest of it.
function Core:unpace()
  self.paced = false
  self:_room()
end

-- Where the server holds a stream's bytes again after `offset` (they are not in its log: the
-- gap between the session's head and tail), and the end of its head.
function Core:_held_after(stream)
  local r = self:_rpc("process/snapshot", { stream = stream })
  if not r then return nil end
  local head = #(base64.decode(r.head) or "")
  return head + r.dropped, head
end

-- (in the filling task) Bytes of a stream the server no longer holds as chunks, from what its
-- session still has (its log, or its head and tail), fetched from here up to `offset` in
-- pieces, each once the readers have room for it; what the server has not got is skipped
-- (a read says how much was dropped).
function Core:_recover(stream, offset)
  local b = self.bufs[stream]
  local head, held_from, asked_at = math.maxinteger, nil, nil
  self.lagging = true
  while b.total < offset and not self.conn.lost and not self.gone do
    if self.paced and b.total - self.taken[stream] >= self.keep then
      sched.suspend(function(w) self.room_wake = w end)
    else
      local from = b.total
      if held_from and from < held_from and from >= head then -- (the gap: skipped)
        buf_skip(b, math.min(held_from, offset))
      else
        local want = math.min(M.PIECE, offset - from, head > from and head - from or M.PIECE)
        local data = self:read_range(stream, from, want)
        if data and #data > 0 then
          self:_append(stream, data)
        elseif asked_at == from then
          buf_skip(b, offset) -- (nothing of it is held any more)
        else -- (asked once at each place: the tail moves on while the session writes)
          asked_at = from
          held_from, head = self:_held_after(stream)
          if not held_from then buf_skip(b, offset) end
          head = head or 0
        end
      end
    end
  end
  self.room_wake, self.lagging = nil, false
end

function Core:_exited(params)
  self.exited = true
  self.exit_seq = params.seq
  local x = params.luxec or {}
  self.code = x.code or (not x.signal and params.exitCode) or nil
  self.signal_name = x.signal
  self.killed_by = x.killedBy
  if self.seen < params.seq - 1 then self:_fill() end
  self:_maybe_finish()
end

function Core:_closed()
  self.closed = true
  self:_maybe_finish()
end

--- The connection is gone: the session ends here (a daemon keeps it running there).
function Core:_lost(why)
  self:_room() -- (a catching up that waits for the readers ends)
  if self.finished then return end
  self.exited, self.closed, self.lost = true, true, why
  self.exit_seq = self.seen + 1
  self:_maybe_finish()
end

--- Fetch what the server holds after the last chunk applied; `done()` (optional) once that is
--- here (or the connection is gone).
function Core:_fill(done)
  if done then
    self.fill_waiters = self.fill_waiters or {}
    table.insert(self.fill_waiters, done)
  end
  if self.filling then return end
  self.filling = true
  self.conn.fills = self.conn.fills + 1
  sched.go(function()
    while not self.conn.lost and not self.gone do
      local r = self.conn:call("process/read", { processId = self.id, afterSeq = self.seen })
      if not r then break end
      local stop = false
      for _, c in ipairs(r.chunks) do
        if c.seq > self.seen then
          local n = STREAM[c.stream] or 1
          if c.offset and c.offset > self.bufs[n].total then
            -- (the readers are told of what is here, while the rest comes)
            self.seen = c.seq - 1
            self:_fill_told()
            self:_recover(n, c.offset)
            stop = true -- (what came after the gap is read again, from the server's chunks)
            break
          end
          self.seen = c.seq - 1
          self.filling = false
          self:_chunk(c.seq, c.stream, base64.decode(c.chunk) or "")
          self.filling = true
        end
      end
      if (not stop and #r.chunks == 0) or (self.exit_seq and self.seen >= self.exit_seq - 1) then
        break
      end
    end
    self.filling = false
    if self.exit_seq and self.seen < self.exit_seq - 1 then self.seen = self.exit_seq - 1 end
    self:_maybe_finish()
    self:_fill_told()
  end)
end

-- The fill has brought what the server holds as chunks: its waiters go on.
function Core:_fill_told()
  local waiters = self.fill_waiters or {}
  self.fill_waiters = nil
  for _, w in ipairs(waiters) do w() end
end

-- The native handle's methods ------------------------------------------------------------------

function Core:read(stream, cursor)
  local b = self.bufs[stream]
  local data, next_cursor, dropped, gap_at = buf_read(b, cursor)
  if cursor <= b.total and next_cursor > self.taken[stream] then -- (not a look at the total)
    self.taken[stream] = next_cursor
    if self.room_wake and b.total - next_cursor < self.keep then self:_room() end
  end
  return data, next_cursor, dropped, gap_at
end

function Core:status()
  return { pid = self.pid, running = not self.exited, exited = self.exited, code = self.code,
    signal_name = self.signal_name, killed_by = self.killed_by or (self.lost and "connection")
      or nil, eof = self.closed, tty = self.tty, cgroup = false, connection_lost = self.lost,
    write_queued = self.queued }
end

--- The session's sandbox report (layers, limits, denials with evidence), asked of the server;
--- inside a loop callback, or once the connection is gone, the last one asked.
function Core:sandbox_report()
  if require("luv").loop_mode() or self.conn.lost or self.no_sandbox then return self._sandbox end
  local st = self.conn:call("process/status", { processId = self.id })
  if st then
    self._sandbox = st.sandbox
    self.no_sandbox = st.sandbox == nil
  end
  return self._sandbox
end

function Core.holders() return nil end

function Core:ref(on)
  if (self.reffed or false) ~= on then -- (one never held lets go of nothing)
    self.reffed = on
    self.conn:hold(on and 1 or -1)
  end
end

function Core.want_output() end

function Core:input_unread()
  local r, err = self.conn:call("process/inputState", { processId = self.id })
  if not r then error(err, 0) end
  self._input = r
  return math.type(r.unread) and r.unread or nil -- (a JSON null: not known)
end

function Core:input_state()
  local r = self._input
  self._input = nil
  if not r then
    if require("luv").loop_mode() or self.exited then return false end
    local err
    r, err = self.conn:call("process/inputState", { processId = self.id })
    if not r then error(err, 0) end
  end
  return r.waiting == true, r.echoOff == true, r.canonical == true
end

--- Write: sent at once while less than the connection's window is in flight; else a write
--- from a task (or from the main chunk, which runs the loop) waits for room, and one from a
--- loop callback, which cannot wait, is refused (EAGAIN) — so the bytes waiting to go, here,
--- never grow past the window and the largest single write.
function Core:write(data)
  local conn = self.conn
  while true do
    if self.exited then return nil, "EPIPE: the session ended", "EPIPE" end
    if self.write_error then return nil, self.write_error, "EPIPE" end
    if conn.writing == 0 or conn.writing + #data <= conn.window then break end
    if uv.loop_mode() then
      return nil, ("EAGAIN: %d bytes written to %s are not yet taken (a write from a loop "
        .. "callback cannot wait for room)"):format(conn.writing, conn.name), "EAGAIN"
    end
    sched.suspend(function(w) conn.write_waiters[#conn.write_waiters + 1] = w end)
  end
  local n = #data
  conn.writing, self.queued = conn.writing + n, self.queued + n
  conn:send_write(self.id, data, function(r, err)
    conn.writing, self.queued = conn.writing - n, self.queued - n
    if not r then self.write_error = err
    elseif r.status ~= "accepted" then
      self.write_error = "EPIPE: " .. ((r.luxec or {}).error or r.status)
    end
    local waiters = conn.write_waiters
    conn.write_waiters = {}
    for _, w in ipairs(waiters) do w() end
  end)
  return n
end

function Core:_rpc(method, params)
  params.processId = self.id
  local r, err = self.conn:call(method, params)
  if not r then return nil, err, "EREMOTE" end
  return r
end

function Core:close_stdin()
  if not self:_rpc("process/closeStdin", {}) then return nil end
  return true
end

function Core:signal(sig, target)
  local r, err, code = self:_rpc("process/signal", { signal = sig, target = target })
  if not r then return nil, err, code end
  return true
end

function Core:resize(rows, cols)
  local r, err, code = self:_rpc("process/resize", { rows = rows, cols = cols })
  if not r then return nil, err, code end
  return true
end

function Core:tty_char(name)
  if self.tty and name == "eof" then return "\4" end
  return nil
end

function Core:snapshot(stream)
  local r, err = self:_rpc("process/snapshot", { stream = stream })
  if not r then error(err, 0) end
  return base64.decode(r.head), base64.decode(r.tail), r.dropped, r.total
end

function Core:read_range(stream, offset, length)
  local r, err, code = self:_rpc("process/readRange", { stream = stream, offset = offset,
    length = length })
  if not r then return nil, err, code end
  return base64.decode(r.chunk)
end

--- The session is closed here: the server ends it (a kill of its whole tree).
function Core:close()
  self.gone = true
  self:_room()
  if self.conn.cores[self.id] == self then self.conn.cores[self.id] = nil end
  self:ref(false)
  if not self.exited and not self.conn.lost then
    self.conn:send_call("process/terminate", { processId = self.id,
      luxec = { signal = "KILL", grace_ms = 0 } }, function() end)
  end
end

function Core:__tostring()
  return ("luxec.remote.proc %s on %s"):format(self.id, self.conn.name)
end

return M
