--- luxec.process.automation: the methods of luxec.Process that automation scripts use —
--- expect, send*, wait_input, interact, screen — defined here in one place, with their
--- logic in luxec.auto.* (matching in luxec.auto.expect, the person's terminal in
--- luxec.auto.interact, the terminal emulator in luxec.auto.screen). luxec.process defines
--- its class with them; nothing else adds methods to it.
---
--- Every wait is a luxec wait: from top-level code it drives the loop, inside luxec.go it
--- yields. Nothing sleeps: a send is a write, an expect returns as soon as the output matches.
local expect = require("luxec.auto.expect")
local options = require("luxec.process.options")
local uv = require("luv")

local CONTROL_SIGNALS = { c = "INT", ["\\"] = "QUIT", z = "TSTP" }

--- How often wait_input looks whether the program reads (milliseconds): nothing tells that a
--- program blocked reading, so it is looked at after each output and at this interval.
expect.defaults.input_poll_ms = 10

local function closed_error(self, fname)
  if self:closed() then
    error(("attempt to call '%s' on a closed process"):format(fname), 3)
  end
end

-- The timeout of an automation wait: opts.timeout, else p.timeout, else expect's default;
-- false for no limit. Raises at the caller of the method.
local function timeout_of(self, fname, opts)
  local timeout = opts and opts.timeout
  if timeout == nil then timeout = rawget(self, "timeout") end
  if timeout == nil then timeout = expect.defaults.timeout end
  if timeout ~= false and (type(timeout) ~= "number" or timeout ~= timeout or timeout < 0) then
    error(("bad option 'timeout' to '%s' (non-negative number of seconds or false expected, " ..
      "got %s)"):format(fname, tostring(timeout)), 3)
  end
  return timeout
end

---@param Process luxec.Process  the class, being defined by luxec.process
return function(Process)
  --- Wait until the output matches one of `patterns` and consume it through the match. A
  --- pattern is a plain string, {lua = "Lua pattern"}, {re = "PCRE2 regex", flags = "i"}
  --- (flags: letters of "imsxU"), luxec.EOF (the output ended) or luxec.TIMEOUT (the wait ran
  --- out); one or a list. The earliest match in the output wins, ties going to the first
  --- listed. Returns the index of the pattern, the matched text and its captures, and sets
  --- p.before (the output before the match), p.after and p.match (the matched text, or
  --- luxec.EOF / luxec.TIMEOUT) and p.captures. Without a matching EOF or TIMEOUT pattern the
  --- end of the output or of the wait returns nil, "eof: ..." or "timeout: ...", and "eof" or
  --- "timeout".
  --- At the end of the output expect also waits for the exit (within the timeout), so
  --- p:status() then says how the program ended; a program that closed its output and goes
  --- on running is still an EOF when the timeout passes, and p:status().running says so.
  --- opts: timeout (seconds, or false for none; default p.timeout or 30), searchwindowsize
  --- or window (one option, pexpect's: each look searches only the last N bytes of the
  --- unmatched output; without it a Lua pattern or regex match may start up to 16384 bytes
  --- before new output).
  ---@param patterns any  a pattern or a list of them
  ---@param opts {timeout: number|false|nil, window: integer|nil, searchwindowsize: integer|nil}|nil
  ---@return integer|nil index, string|table|nil match_or_message, any ...
  function Process:expect(patterns, opts)
    local pats, timeout, window, swin = expect.prepare("expect", self, patterns, opts, false)
    return expect.run(self, pats, timeout, window, swin)
  end

  --- expect with plain strings only (and luxec.EOF / luxec.TIMEOUT).
  ---@param patterns string|table|string[]
  ---@param opts {timeout: number|false|nil, window: integer|nil, searchwindowsize: integer|nil}|nil
  ---@return integer|nil index, string|table|nil match_or_message, any ...
  function Process:expect_exact(patterns, opts)
    local pats, timeout, window, swin = expect.prepare("expect_exact", self, patterns, opts, true)
    return expect.run(self, pats, timeout, window, swin)
  end

  --- The output expect has not consumed yet, what arrived since included (pexpect's
  --- p.buffer); p:buffer(s) makes it s (p:buffer("") drops it, as `p.buffer = b""`).
  ---@param new string|nil
  ---@return string
  function Process:buffer(new)
    if new ~= nil and type(new) ~= "string" then
      error(("bad argument #1 to 'buffer' (string expected, got %s)"):format(type(new)), 2)
    end
    closed_error(self, "buffer")
    return expect.buffer(self, new)
  end

  --- Write `s` as it is; returns the bytes accepted (p:write).
  ---@param s string
  ---@return integer|nil, string|nil, string|nil
  function Process:send(s)
    if type(s) ~= "string" then
      error(("bad argument #1 to 'send' (string expected, got %s)"):format(type(s)), 2)
    end
    return self:write(s)
  end

  --- Write `s` and a line end ("\n", luxec.auto.expect.defaults.linesep).
  ---@param s string|nil
  ---@return integer|nil, string|nil, string|nil
  function Process:sendline(s)
    s = s or ""
    if type(s) ~= "string" then
      error(("bad argument #1 to 'sendline' (string expected, got %s)"):format(type(s)), 2)
    end
    return self:write(s .. expect.defaults.linesep)
  end

  --- Send a control key: sendcontrol("c") writes Ctrl-C (byte 3); "^C" works too, and every
  --- key pexpect takes (a-z, @ [ \ ] ^ _ ?). On a terminal the line discipline turns it into
  --- a signal; a pipe session has none, so there "c", "\\" and "z" signal the process group
  --- (INT, QUIT, TSTP) and "d" closes stdin instead.
  ---@param key string
  ---@return integer|boolean|nil, string|nil, string|nil
  function Process:sendcontrol(key)
    local ch = expect.control(key)
    if not ch then
      error(("bad argument #1 to 'sendcontrol' (a key such as \"c\" or \"^]\" expected, got %s)")
        :format(tostring(key)), 2)
    end
    closed_error(self, "sendcontrol")
    if not self:size() then
      local k = #key == 2 and key:sub(2) or key
      k = k:lower()
      if CONTROL_SIGNALS[k] then return self:signal(CONTROL_SIGNALS[k], "group") end
      if k == "d" then return self:close_stdin() end
    end
    return self:write(ch)
  end

  --- pexpect's sendeof. On a terminal: the terminal's EOF character (^D, as its termios say),
  --- which ends a read at the start of a line — `cat` sees the end of its input — and leaves
  --- the terminal usable (a shell reads the next line). On pipes: stdin is closed.
  ---@return integer|boolean|nil, string|nil, string|nil
  function Process:sendeof()
    closed_error(self, "sendeof")
    if not self:size() then return self:close_stdin() end
    local eof, err, code = self._core:tty_char("eof")
    if code then return nil, err, code end -- (nobody reads the terminal: EPIPE, as a write)
    if not eof then
      return nil, "EINVAL: the terminal's EOF character is disabled (stty eof)", "EINVAL"
    end
    return self:write(eof)
  end

  --- Wait until the program waits for input: it has read everything written to it (nothing
  --- queued, nothing unread in its terminal or pipe) and is blocked reading again — which no
  --- output pattern can tell. With echo_off = true only a prompt that does not echo counts (a
  --- password prompt: ssh and sudo flush what was typed before it, so a password sent at the
  --- sight of "password:" can be lost). Returns true, or nil, "timeout: ...", "timeout" /
  --- nil, "eof: ...", "eof". opts: timeout (seconds or false; default p.timeout or 30),
  --- echo_off.
  ---@param opts {timeout: number|false|nil, echo_off: boolean|nil}|nil
  ---@return boolean|nil, string|nil, string|nil
  function Process:wait_input(opts)
    closed_error(self, "wait_input")
    if opts ~= nil and type(opts) ~= "table" then
      error(("bad argument #1 to 'wait_input' (options table expected, got %s)")
        :format(type(opts)), 2)
    end
    opts = opts or {}
    options.check_keys("wait_input", 1, opts, { timeout = true, echo_off = true }, 2)
    local timeout = timeout_of(self, "wait_input", opts)
    local deadline = timeout and uv.hrtime() / 1e6 + timeout * 1000 or nil
    local core = self._core
    while true do
      if self:finished() then
        return nil, "eof: the session ended before it waited for input", "eof"
      end
      -- First nothing unread, then blocked reading: in that order both held together (the
      -- program read all of it, and then blocked again), since nothing else writes to it.
      local unread = core:input_unread()
      if unread == nil or unread == 0 then
        local waiting, echo_off = core:input_state()
        if waiting and (not opts.echo_off or echo_off) then return true end
      end
      local left = deadline and deadline - uv.hrtime() / 1e6
      if left and left <= 0 then
        return nil, ("timeout: the session did not wait for input%s within %g s")
          :format(opts.echo_off and " with echo off" or "", timeout), "timeout"
      end
      local step = expect.defaults.input_poll_ms
      step = left and math.min(left, step) or step
      -- Output wakes the look at once; else the next look is after the step. (Past EOF,
      -- wait_output waits for the exit: the step bounds it.)
      self:wait_output({ timeout = step / 1000 })
      if self:closed() then
        return nil, "eof: the session was closed while waiting for input", "eof"
      end
    end
  end

  --- Wait until the terminal's echo is off (pexpect's waitnoecho): true as soon as it is,
  --- whether or not the program reads yet (to send a password only once the program reads
  --- it, wait_input{echo_off = true}); nil, "timeout: ...", "timeout"; nil, "eof: ...", "eof"
  --- when the session ends first; nil, "ENOTTY: ...", "ENOTTY" for a pipe session (pipes
  --- never echo). opts: timeout (seconds or false; default p.timeout or 30).
  ---@param opts {timeout: number|false|nil}|nil
  ---@return boolean|nil, string|nil, string|nil
  function Process:wait_echo_off(opts)
    closed_error(self, "wait_echo_off")
    if opts ~= nil and type(opts) ~= "table" then
      error(("bad argument #1 to 'wait_echo_off' (options table expected, got %s)")
        :format(type(opts)), 2)
    end
    if opts then options.check_keys("wait_echo_off", 1, opts, { timeout = true }, 2) end
    if not self:size() then
      return nil, "ENOTTY: a pipe session has no terminal echo", "ENOTTY"
    end
    local timeout = timeout_of(self, "wait_echo_off", opts or {})
    local deadline = timeout and uv.hrtime() / 1e6 + timeout * 1000 or nil
    while true do
      if self._core:tty_echo() == false then return true end
      if self:finished() then
        return nil, "eof: the session ended before its terminal's echo was turned off", "eof"
      end
      local left = deadline and deadline - uv.hrtime() / 1e6
      if left and left <= 0 then
        return nil, ("timeout: the terminal's echo was still on after %g s"):format(timeout),
          "timeout"
      end
      local step = expect.defaults.input_poll_ms
      step = left and math.min(left, step) or step
      self:wait_output({ timeout = step / 1000 }) -- (output wakes the look at once)
      if self:closed() then
        return nil, "eof: the session was closed before its terminal's echo was turned off", "eof"
      end
    end
  end

  --- Turn the terminal's echo on or off (pexpect's setecho): what is written to the session
  --- from then on is (not) shown back in its output. Returns true, or nil, "ENOTTY: ...",
  --- "ENOTTY" for a pipe session (pipes never echo). A program may set its own terminal
  --- modes later (a shell's line editor does): p:getecho() says what holds now.
  ---@param on boolean
  ---@return boolean|nil, string|nil, string|nil
  function Process:setecho(on)
    if type(on) ~= "boolean" then
      error(("bad argument #1 to 'setecho' (boolean expected, got %s)"):format(type(on)), 2)
    end
    closed_error(self, "setecho")
    if not self:size() then
      return nil, "ENOTTY: a pipe session has no terminal echo to set", "ENOTTY"
    end
    local now, err, code = self._core:tty_echo(on)
    if now == nil then return nil, err, code end
    return true
  end

  --- Put the terminal in raw mode (on true or nil: no echo, no line editing, no signal
  --- characters, no output processing: every byte through as it is, for binary protocols
  --- and bulk output) or back to cooked mode with echo (on false). Returns true, or nil,
  --- "ENOTTY: ...", "ENOTTY" for a pipe session. (spawn's tty = {raw = true} sets it before
  --- the program runs.)
  ---@param on boolean|nil
  ---@return boolean|nil, string|nil, string|nil
  function Process:set_raw(on)
    if on ~= nil and type(on) ~= "boolean" then
      error(("bad argument #1 to 'set_raw' (boolean expected, got %s)"):format(type(on)), 2)
    end
    closed_error(self, "set_raw")
    if not self:size() then
      return nil, "ENOTTY: a pipe session has no terminal to set raw", "ENOTTY"
    end
    return self._core:tty_raw(on ~= false)
  end

  --- Whether the terminal echoes what is written to the session now (false for a pipe
  --- session: nothing echoes it).
  ---@return boolean
  function Process:getecho()
    closed_error(self, "getecho")
    if not self:size() then return false end
    return self._core:tty_echo() == true
  end

  --- Hand the session to the person at the terminal (see luxec.auto.interact).
  ---@param opts luxec.InteractOptions|nil
  ---@return "escape"|"exit"|"eof"
  function Process:interact(opts)
    closed_error(self, "interact")
    return require("luxec.auto.interact").interact(self, opts)
  end

  --- The rendered screen of a terminal session (see luxec.auto.screen).
  ---@return luxec.Screen
  function Process:screen()
    closed_error(self, "screen")
    return require("luxec.auto.screen").screen(self)
  end

  --- The screen once it shows `what` (a text, or a function(screen) -> true); see
  --- luxec.auto.screen. opts: timeout (seconds or false; default p.timeout or 30).
  ---@param what string|fun(screen: luxec.Screen): boolean
  ---@param opts {timeout: number|false|nil}|nil
  ---@return luxec.Screen|nil, string|nil, string|nil
  function Process:expect_screen(what, opts)
    closed_error(self, "expect_screen")
    if type(what) ~= "string" and type(what) ~= "function" then
      error(("bad argument #1 to 'expect_screen' (string or function expected, got %s)")
        :format(type(what)), 2)
    end
    if opts ~= nil and type(opts) ~= "table" then
      error(("bad argument #2 to 'expect_screen' (options table expected, got %s)")
        :format(type(opts)), 2)
    end
    if opts then options.check_keys("expect_screen", 2, opts, { timeout = true }, 2) end
    local timeout = timeout_of(self, "expect_screen", opts)
    return require("luxec.auto.screen").expect_screen(self, what, timeout)
  end
end
