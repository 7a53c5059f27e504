--- luxec.replwrap: drive a REPL (python, bash, node, sqlite3 ...) so that `repl:run(code)`
--- returns that code's output — pexpect's replwrap.
---
--- The REPL runs on a terminal without echo (readline and libedit honour it, so nothing
--- typed comes back) and shows a unique prompt, set when it starts where the program allows
--- (python -c, bash's PS1, sqlite3's .prompt, node's repl.start), else by a line sent at its
--- first prompt. A line that leaves a statement open gets the continuation prompt: run sends
--- the next line; after the last one, python gets one empty line (which ends a block); a
--- statement still open then is abandoned (^C, node's .break) and run says so.
local expect = require("luxec.auto.expect")
local process = require("luxec.process")
local options = require("luxec.process.options")

local M = {}

M.defaults = {
  timeout = 30, -- seconds for the start and for each run
}

---@class luxec.Repl
---@field process luxec.Process  the REPL's session
---@field prompt string  the prompt it shows when it waits for a statement
---@field continuation string|nil  the one it shows inside an unfinished statement
---@field timeout number|false  the default timeout of run (seconds)
local Repl = {}
Repl.__index = Repl

local OPTIONS = {
  prompt = "string", continuation = "string", init = "string",
  orig_prompt = { "string", "table" }, -- (a pattern: {re = "[$#] "}, as pexpect's regex)
  timeout = "number", env = "table", cwd = "string", command = "string", args = "table",
  finish = "string", cancel = { "string", "boolean" },
}

-- Check the options; errors point at `level` (3: the caller of the public function).
local function check(fname, opts, need_prompt, level)
  level = level or 3
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #%d to '%s' (options table expected, got %s)")
      :format(need_prompt and 2 or 1, fname, type(opts)), level)
  end
  opts = opts or {}
  for k, v in pairs(opts) do
    if not OPTIONS[k] then
      error(("bad option '%s' to '%s' (unknown option)"):format(tostring(k), fname), level)
    end
    local want = OPTIONS[k]
    if type(want) == "table" then want = type(v) == want[1] and want[1] or want[2] end
    if type(v) ~= want or v == true then
      local what = type(OPTIONS[k]) ~= "table" and want
        or k == "cancel" and "string or false" or table.concat(OPTIONS[k], " or ")
      error(("bad option '%s' to '%s' (%s expected, got %s)"):format(k, fname, what,
        tostring(type(v))), level)
    end
  end
  if need_prompt and (not opts.prompt or opts.prompt == "") then
    error(("bad option 'prompt' to '%s' (the prompt the REPL shows expected)"):format(fname), level)
  end
  if opts.init and not opts.orig_prompt then
    error(("bad option 'orig_prompt' to '%s' (init is sent at this prompt: it is needed " ..
      "with init)"):format(fname), level)
  end
  return opts
end

local function token()
  return ("%06x"):format(math.random(0, 0xffffff))
end

local function crlf(s)
  return (s:gsub("\r\n", "\n"))
end

-- Output quoted on one line, for a message.
local function quoted(s)
  return (("%q"):format(crlf(s)):gsub("\\\n", "\\n"))
end

-- Start the REPL (or take the session given) and wait for its prompt: the repl, or nil,
-- message, code.
local function start(level, argv, opts)
  local p, err, code
  if getmetatable(argv) == process.Process then
    p = argv
    if p:closed() then
      error("bad argument #1 to 'replwrap' (the process is closed)", level + 1)
    end
    argv = { "session " .. tostring(p.pid) }
    -- (as pexpect's REPLWrapper: a terminal that echoes is set not to, or every line sent
    -- would come back before its output; a line editor reading a line at this moment may put
    -- its saved echo back when that line ends)
    if p:size() and p:getecho() then
      p:setecho(false)
      p:wait_echo_off({ timeout = opts.timeout or M.defaults.timeout })
    end
  else
    local env = { TERM = "dumb" } -- no colours, no bracketed paste from the line editor
    for k, v in pairs(opts.env or {}) do
      env[k] = v
    end
    p, err, code = process._spawn_at(level + 1, argv, { tty = true, echo = false,
      env = env, inherit_env = true, cwd = opts.cwd })
    if not p then return nil, err, code end
  end
  local timeout = opts.timeout or M.defaults.timeout
  local r = setmetatable({ process = p, prompt = opts.prompt, continuation = opts.continuation,
    timeout = timeout, _name = argv[1], _finish = opts.finish, _cancel = opts.cancel }, Repl)
  if opts.init then
    local i, msg, ecode = p:expect(opts.orig_prompt, { timeout = timeout })
    if not i then
      p:close()
      return nil, ("%s (the first prompt of %s)"):format(msg, argv[1]), ecode
    end
    p:sendline(opts.init)
  end
  local i, msg, ecode = p:expect(opts.prompt, { timeout = timeout })
  if not i then
    p:close()
    return nil, ("%s (the prompt of %s)"):format(msg, argv[1]), ecode
  end
  return r
end

--- Wrap a REPL. argv: the program, or a session already started (on a terminal; one that
--- echoes is set not to, as pexpect does); opts: prompt (required:
--- the prompt it shows, or the one init sets), continuation (its continuation prompt), init
--- (a line sent at orig_prompt that changes the prompt), orig_prompt, finish (a line sent
--- once when the code ends inside a statement: "" ends a Python block), cancel (the line
--- that abandons an open statement; default ^C; false: it cannot be, the repl is closed),
--- timeout (seconds; 30), env, cwd.
--- Returns the repl, or nil, message, code.
---@param argv string[]|luxec.Process
---@param opts table
---@return luxec.Repl|nil, string|nil, string|nil
function M.replwrap(argv, opts)
  opts = check("replwrap", opts, true)
  return start(2, argv, opts)
end

-- luxec.replwrap(argv, opts) is luxec.replwrap.replwrap(argv, opts).
local function call(_, argv, opts)
  opts = check("replwrap", opts, true)
  return start(2, argv, opts)
end

--- Run code (one line or several) and return its output (the terminal's "\r\n" as "\n"),
--- or nil, message, code: "timeout" (the code still runs: repl:interrupt() takes the REPL
--- back), "eof" (the REPL ended) or "incomplete" (the code left a statement open; it was
--- abandoned).
---@param code string
---@param opts {timeout: number|false|nil}|nil
---@return string|nil, string|nil, string|nil
function Repl:run(code, opts)
  if type(code) ~= "string" then
    error(("bad argument #1 to 'run' (string expected, got %s)"):format(type(code)), 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #2 to 'run' (options table expected, got %s)"):format(type(opts)), 2)
  end
  if opts then options.check_keys("run", 2, opts, { timeout = true }, 2) end
  local p = self.process
  if p:closed() then error("attempt to call 'run' on a closed repl", 2) end
  local timeout = opts and opts.timeout
  if timeout == nil then timeout = self.timeout end
  local pats = { self.prompt, self.continuation or expect.TIMEOUT, expect.EOF }
  if not self.continuation then pats[2] = pats[1] end
  local out = {}
  local function line(s)
    p:sendline(s)
    local i, msg, ecode = p:expect(pats, { timeout = timeout })
    if not i then return nil, msg, ecode end
    if i == 3 then
      return nil, ("eof: %s ended; last output: %s"):format(self._name, quoted(p.before)), "eof"
    end
    out[#out + 1] = p.before
    return i
  end
  local lines = {}
  for l in (code .. "\n"):gmatch("([^\n]*)\n") do
    lines[#lines + 1] = (l:gsub("\r$", ""))
  end
  local i, msg, ecode
  for _, l in ipairs(lines) do
    i, msg, ecode = line(l)
    if not i then return nil, msg, ecode end
  end
  if i == 2 and self.continuation and self._finish then
    i, msg, ecode = line(self._finish) -- an empty line ends a Python block
    if not i then return nil, msg, ecode end
  end
  if i == 2 and self.continuation then
    local what = ("incomplete: the code leaves a statement open (%s shows its " ..
      "continuation prompt after the last line)"):format(self._name)
    if self._cancel == false then
      p:close()
      return nil, what .. "; it cannot be abandoned, so the repl was closed", "incomplete"
    end
    if self._cancel then
      p:sendline(self._cancel)
      p:expect(self.prompt, { timeout = timeout })
    else
      -- ^C is a signal at once, not input queued behind the line: sent before the line
      -- editor reads again, it lands where the editor neither discards the line nor prompts.
      p:wait_input({ timeout = timeout })
      self:interrupt({ timeout = timeout })
    end
    return nil, what .. "; it was abandoned", "incomplete"
  end
  return crlf(table.concat(out))
end

--- Interrupt what runs (^C) and wait for the prompt: the output before it (a Python
--- traceback ending in KeyboardInterrupt), or nil, message, code. Once the prompt shows, it
--- also waits until the REPL reads again: what is typed while a line editor recovers from
--- the signal is lost. (node's REPL, started without a terminal of its own, ends at ^C.)
---@param opts {timeout: number|false|nil}|nil
---@return string|nil, string|nil, string|nil
function Repl:interrupt(opts)
  local p = self.process
  if p:closed() then error("attempt to call 'interrupt' on a closed repl", 2) end
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #1 to 'interrupt' (options table expected, got %s)"):format(type(opts)),
      2)
  end
  if opts then options.check_keys("interrupt", 1, opts, { timeout = true }, 2) end
  local timeout = opts and opts.timeout
  if timeout == nil then timeout = self.timeout end
  p:sendcontrol("c")
  local i, msg, code = p:expect({ self.prompt, expect.EOF }, { timeout = timeout })
  if not i then return nil, msg, code end
  if i == 2 then
    return nil, ("eof: %s ended at the interrupt; last output: %s"):format(self._name,
      quoted(p.before)), "eof"
  end
  local out = crlf(p.before)
  p:wait_input({ timeout = timeout })
  return out
end

--- End the REPL (its whole process tree).
function Repl:close()
  self.process:close()
end

Repl.__close = Repl.close

function Repl:__tostring()
  return ("<repl %s%s>"):format(self._name, self.process:closed() and " (closed)" or "")
end

local function with_args(argv, opts)
  for _, a in ipairs(opts.args or {}) do
    argv[#argv + 1] = a
  end
  return argv
end

--- python3 -i with a unique prompt (no banner; no history file written). opts: command
--- ("python3"), args (after the others), timeout, env, cwd.
---@return luxec.Repl|nil, string|nil, string|nil
function M.python(opts)
  opts = check("python", opts, false)
  local t = token()
  local ps1, ps2 = ("[py-%s]> "):format(t), ("[py-%s]+ "):format(t)
  -- Without the interactive hook, site neither loads nor writes ~/.python_history.
  local init = ("import sys; sys.ps1 = %q; sys.ps2 = %q; sys.__interactivehook__ = None")
    :format(ps1, ps2)
  return start(2, with_args({ opts.command or "python3", "-q", "-i", "-c", init }, opts),
    { prompt = ps1, continuation = ps2, finish = "", timeout = opts.timeout, env = opts.env,
      cwd = opts.cwd })
end

--- bash without startup files and without history, PS1/PS2 unique, PAGER=cat. opts as
--- python's.
---@return luxec.Repl|nil, string|nil, string|nil
function M.bash(opts)
  opts = check("bash", opts, false)
  local t = token()
  -- "\133" is "[" once bash expands the prompt: the variables' text (which `env` or `set`
  -- print) never reads as the prompt.
  local env = { PS1 = ("\\133sh-%s]$ "):format(t), PS2 = ("\\133sh-%s]+ "):format(t),
    PROMPT_COMMAND = false, PAGER = "cat" } -- no pager waiting for a key
  for k, v in pairs(opts.env or {}) do
    env[k] = v
  end
  return start(2, with_args({ opts.command or "bash", "--norc", "--noprofile", "+o", "history" },
    opts), { prompt = ("[sh-%s]$ "):format(t), continuation = ("[sh-%s]+ "):format(t),
    timeout = opts.timeout, env = env, cwd = opts.cwd })
end

--- sqlite3 (opts.args: the database file, else an in-memory one), prompts set by .prompt,
--- no history file. A statement left open (no ";") cannot be abandoned in sqlite3 (^C keeps
--- it): run then closes the repl. opts as python's.
---@return luxec.Repl|nil, string|nil, string|nil
function M.sqlite3(opts)
  opts = check("sqlite3", opts, false)
  local t = token()
  local ps1, ps2 = ("[sql-%s]> "):format(t), ("[sql-%s]+ "):format(t)
  local env = { SQLITE_HISTORY = "/dev/null" }
  for k, v in pairs(opts.env or {}) do
    env[k] = v
  end
  return start(2, with_args({ opts.command or "sqlite3", "-interactive", "-cmd",
    (".prompt '%s' '%s'"):format(ps1, ps2) }, opts),
    { prompt = ps1, continuation = ps2, cancel = false, timeout = opts.timeout, env = env,
      cwd = opts.cwd })
end

--- node's REPL (repl.start with a unique prompt; its continuation prompt is node's fixed
--- "... "; .break abandons an open statement). opts as python's.
---@return luxec.Repl|nil, string|nil, string|nil
function M.node(opts)
  opts = check("node", opts, false)
  local ps1 = ("[js-%s]> "):format(token())
  local script = ("require('repl').start({prompt: %q, terminal: false, useColors: false})")
    :format(ps1)
  return start(2, with_args({ opts.command or "node", "-e", script }, opts),
    { prompt = ps1, continuation = "... ", cancel = ".break", timeout = opts.timeout,
      env = opts.env, cwd = opts.cwd })
end

return setmetatable(M, { __call = call })
