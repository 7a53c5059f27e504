--- luxec.process.io: the methods of luxec.Process that move bytes and set the terminal —
--- read, reader, read_range, snapshot, write, close_stdin, signal, resize, size — and the
--- hooks through which the session's composed parts (a recorder, a screen) are told of its
--- input and resizes. Part of the class luxec.process defines.

---@param Process luxec.Process  the class, being defined by luxec.process
---@param check_open fun(p: luxec.Process, fname: string)  raises on a closed process
return function(Process, check_open)
  -- A stream number, checked: 1, or 2 where stderr is a stream of its own.
  local function check_stream(self, fname, stream)
    if stream == 1 or stream == 2 and (self._streams or 1) == 2 then return end
    error(("bad argument #1 to '%s' (%s)"):format(fname, stream == 2
      and "this session has one output stream (1): stderr = \"pipe\" makes it two"
      or ("stream 1 or 2 expected, got " .. tostring(stream))), 3)
  end
  Process._check_stream = check_stream

  --- What arrived since this reader's last read: data, dropped, gap_at (the bytes dropped
  --- from memory in between, and where in data they were).
  ---@param stream integer|nil 1 (stdout, or everything when merged) or 2 (stderr apart)
  ---@return string data, integer dropped, integer gap_at
  function Process:read(stream)
    local core = self._core
    if not core then check_open(self, "read") end
    if stream == nil then
      stream = 1
    elseif stream ~= 1 then
      check_stream(self, "read", stream)
    end
    local cursor = self._cursor -- (made by the first read)
    if cursor == nil then
      cursor = { 0, 0 }
      self._cursor = cursor
    end
    local data, next_cursor, dropped, gap_at = core:read(stream, cursor[stream])
    cursor[stream] = next_cursor
    return data, dropped, gap_at
  end

  --- An independent reader with its own cursor: reader:read() -> data, dropped, gap_at.
  ---@param stream integer|nil
  ---@return {read: fun(): string, integer, integer}
  function Process:reader(stream)
    check_open(self, "reader")
    stream = stream or 1
    check_stream(self, "reader", stream)
    -- (a session taken up from a client's cursor starts there: luxec.remote's attach)
    local proc, cursor = self, self._start and self._start[stream] or 0
    return {
      read = function()
        check_open(proc, "read")
        local data, next_cursor, dropped, gap_at = proc._core:read(stream, cursor)
        cursor = next_cursor
        return data, dropped, gap_at
      end,
    }
  end

  --- Bytes offset .. offset+length-1 of a stream, from the log or from what is held.
  ---@return string|nil, string|nil, string|nil
  function Process:read_range(offset, length, stream)
    check_open(self, "read_range")
    return self._core:read_range(stream or 1, offset, length)
  end

  ---@return {head: string, tail: string, dropped: integer, total: integer}
  function Process:snapshot(stream)
    check_open(self, "snapshot")
    local head, tail, dropped, total = self._core:snapshot(stream or 1)
    return { head = head, tail = tail, dropped = dropped, total = total }
  end

  -- Tell the composed parts (recorder, screen) of something: part[what](part, self, ...).
  local function tell_parts(self, what, ...)
    local parts = self._parts -- (made by the first part)
    if parts == nil then return end
    for _, part in ipairs(parts) do
      local fn = part[what]
      if fn then fn(part, self, ...) end
    end
  end

  --- Add a part told of the session's input (part:input(p, data, echo_off)), and of its
  --- resizes (part:resizing(p) before, part:resized(p, rows, cols) after).
  function Process:_add_part(part)
    local parts = self._parts or {}
    self._parts = parts
    parts[#parts + 1] = part
  end

  --- Write to the program's input (its terminal, or its stdin pipe). Never blocks: what the
  --- pipe does not take now is queued. Returns the bytes accepted, or nil, "EPIPE: ...",
  --- "EPIPE" once the program closed its end (a terminal: once its output ended). Every
  --- input path (send, sendline, sendcontrol, sendeof, interact) goes through here, so the
  --- parts (a recording) see all of it.
  ---@param data string
  ---@return integer|nil, string|nil, string|nil
  function Process:write(data)
    local core = self._core
    if not core then check_open(self, "write") end
    if type(data) ~= "string" then
      error(("bad argument #1 to 'write' (string expected, got %s)"):format(type(data)), 2)
    end
    local parts = self._parts
    if parts == nil or #parts == 0 then return core:write(data) end -- (nothing to tell)
    local echo_off = false
    if self._rows then
      -- Looked at before the write: the program may turn echo back on as soon as it has read
      -- the line (what is typed at a password prompt is not kept).
      echo_off = select(2, core:input_state()) == true
    end
    local n, err, code = core:write(data)
    if n then tell_parts(self, "input", data, echo_off) end
    return n, err, code
  end

  --- The end of input: on a pipe, stdin is closed (the program reads EOF); on a terminal, the
  --- EOF character is written after what is queued and the terminal takes no more input.
  --- (p:sendeof() is the terminal's ^D that leaves it usable.) true also when the input is
  --- already gone: no more input reaches the program either way.
  ---@return boolean|nil, string|nil, string|nil
  function Process:close_stdin()
    check_open(self, "close_stdin")
    local eof = self._rows and self._core:tty_char("eof")
    local ok, err, code = self._core:close_stdin()
    if ok and eof then tell_parts(self, "input", eof, false) end
    return ok, err, code
  end

  --- Send a signal to the program (target "group": its whole process group).
  ---@param sig string|integer
  ---@param target "group"|nil
  function Process:signal(sig, target)
    check_open(self, "signal")
    return self._core:signal(sig, target)
  end

  --- pexpect's kill(sig): p:signal(sig) (SIGKILL when sig is nil), to the program only.
  ---@param sig string|integer|nil
  function Process:kill(sig)
    check_open(self, "kill")
    return self._core:signal(sig == nil and "KILL" or sig)
  end

  --- Resize the terminal (the program gets SIGWINCH).
  ---@param rows integer
  ---@param cols integer
  ---@return boolean|nil, string|nil, string|nil
  function Process:resize(rows, cols)
    check_open(self, "resize")
    tell_parts(self, "resizing") -- a screen renders what was drawn at the old size first
    local ok, err, code = self._core:resize(rows, cols)
    if ok and self._rows then
      self._rows, self._cols = rows, cols
      tell_parts(self, "resized", rows, cols)
    end
    return ok, err, code
  end

  --- The terminal's size (rows, cols) as it is now — the program may set its own (`stty rows
  --- 40`); as last set once the session is closed; nil for a pipe session.
  ---@return integer|nil, integer|nil
  function Process:size()
    if not self._rows then return nil end
    local core = self._core
    if core and core.tty_size then
      local rows, cols = core:tty_size()
      if rows then return rows, cols end
    end
    return self._rows, self._cols
  end
end
