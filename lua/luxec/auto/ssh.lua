--- luxec.ssh: log into a machine with OpenSSH's client and run commands at its shell, the
--- job of pexpect's pxssh and of Expect's classic script.
---
--- Each step is decided from what the terminal says, not from guessed text alone: a password
--- prompt counts once the prompt is shown *and* the terminal no longer echoes (ssh turns echo
--- off and discards what was typed before it writes the prompt, so nothing sent after that is
--- lost); the login is over when ssh puts the terminal in raw mode, which it does once the
--- remote shell's session is open. Then the shell's prompt is replaced by a unique one that
--- carries the exit status of the last command, so `s:run(cmd)` returns the command's output
--- and its status exactly.
local expect = require("luxec.auto.expect")
local process = require("luxec.process")
local uv = require("luv")

local M = {}

M.defaults = {
  ssh = "ssh", -- the client program
  timeout = 30, -- seconds for the login, and the default of s:run
  poll_ms = 2, -- how often the terminal's mode is looked at while logging in (no event tells it)
}

local HOST_KEY_QUESTION = { re = [[\(yes/no(/\[fingerprint\])?\)\? ?$]] }
local SECRET_PROMPT = { re = [[(?i)(password|passphrase for key '([^'\n]*)')[^\n]*: ?$]] }
local DENIED = { re = [[Permission denied[^\r\n]*]] }
-- a shell's prompt at the end of the output (for a session that keeps the terminal cooked)
local SHELL_PROMPT = { re = [[[#$%>] ?$]] }
local CHANGED = "REMOTE HOST IDENTIFICATION HAS CHANGED"
local VERIFY_FAILED = "Host key verification failed."

local LOGIN_OPTIONS = {
  host = "string", user = "string", password = "string", passphrase = "string",
  key = "string", port = "number", options = "table", timeout = "number",
  accept_new_host_key = "boolean", ssh = "string", config = "string", env = "table",
}

---@class luxec.SshSession
---@field process luxec.Process  the ssh client's session (expect, send, interact ...)
---@field prompt_re string  the unique prompt, as a PCRE2 regex whose capture is the status
---@field timeout number|false  the default timeout of run and prompt (seconds)
local Session = {}
Session.__index = Session

local function check(opts)
  if type(opts) ~= "table" then
    error(("bad argument #1 to 'login' (options table expected, got %s)"):format(type(opts)), 3)
  end
  for k, v in pairs(opts) do
    local want = LOGIN_OPTIONS[k]
    if not want then
      error(("bad option '%s' to 'login' (unknown option)"):format(tostring(k)), 3)
    end
    if type(v) ~= want then
      error(("bad option '%s' to 'login' (%s expected, got %s)"):format(k, want, type(v)), 3)
    end
  end
  if not opts.host or opts.host == "" then
    error("bad option 'host' to 'login' (a host name or address expected)", 3)
  end
  if opts.port and (math.type(opts.port) ~= "integer" or opts.port < 1 or opts.port > 65535) then
    error(("bad option 'port' to 'login' (1-65535 expected, got %s)"):format(opts.port), 3)
  end
  if opts.timeout and (opts.timeout ~= opts.timeout or opts.timeout < 0) then
    error(("bad option 'timeout' to 'login' (non-negative seconds expected, got %s)")
      :format(opts.timeout), 3)
  end
  for k, v in pairs(opts.options or {}) do
    if type(k) ~= "string" or not k:match("^%a+$") or
        (type(v) ~= "string" and type(v) ~= "number") then
      error(("bad option 'options' to 'login' (a table of ssh -o settings such as " ..
        "{StrictHostKeyChecking = \"yes\"} expected, got [%s] = %s)")
        :format(tostring(k), tostring(v)), 3)
    end
  end
end

-- The ssh command line (sorted -o settings: the same call gives the same command).
local function argv_of(opts)
  local argv = { opts.ssh or M.defaults.ssh, "-t" }
  if opts.config then
    argv[#argv + 1] = "-F"
    argv[#argv + 1] = opts.config
  end
  if opts.port then
    argv[#argv + 1] = "-p"
    argv[#argv + 1] = tostring(opts.port)
  end
  if opts.key then
    argv[#argv + 1] = "-i"
    argv[#argv + 1] = opts.key
    argv[#argv + 1] = "-oIdentitiesOnly=yes"
  end
  local keys = {}
  for k in pairs(opts.options or {}) do
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for _, k in ipairs(keys) do
    argv[#argv + 1] = ("-o%s=%s"):format(k, tostring(opts.options[k]))
  end
  if opts.user then
    argv[#argv + 1] = "-l"
    argv[#argv + 1] = opts.user
  end
  argv[#argv + 1] = "--"
  argv[#argv + 1] = opts.host
  return argv
end

-- The last non-empty lines of what ssh printed, for an error message.
local function last_output(p, text)
  local s = ((p.before or "") .. (text or "")):gsub("\r", "")
  s = s:gsub("%s+$", ""):sub(-400)
  return s ~= "" and s or "(nothing)"
end

local function fail(p, msg, code)
  p:close()
  return nil, msg, code
end

local function where(opts)
  return ("%s%s%s"):format(opts.user and (opts.user .. "@") or "", opts.host,
    opts.port and (":" .. opts.port) or "")
end

-- Wait until the terminal no longer echoes (ssh turns echo off before it writes a secret
-- prompt, so this is at once for OpenSSH); false when the deadline passes first.
local function echo_off_by(p, deadline)
  while true do
    local st = p:status()
    if st.echo_off then return true end
    if not st.running or uv.hrtime() / 1e6 >= deadline then return false end
    p:wait_output({ timeout = M.defaults.poll_ms / 1000 })
  end
end

-- Drive ssh until the remote session is open (the terminal in raw mode): true, or nil,
-- message, code.
local function authenticate(p, opts, deadline, timeout)
  local pats = { HOST_KEY_QUESTION, SECRET_PROMPT, DENIED, CHANGED, VERIFY_FAILED,
    expect.EOF, expect.TIMEOUT, SHELL_PROMPT }
  local secrets_sent = 0
  while true do
    local st = p:status()
    if st.running and st.canonical == false then return true end
    local left = deadline - uv.hrtime() / 1e6
    if left <= 0 then
      return nil, ("timeout: no shell session on %s within %g s; last output: %s")
        :format(where(opts), timeout, last_output(p)), "timeout"
    end
    local i, m = p:expect(pats, { timeout = math.min(left, M.defaults.poll_ms) / 1000 })
    if i == 1 then
      if not opts.accept_new_host_key then
        p:sendline("no")
        return nil, ("host key: %s is not a known host (%s); accept it with " ..
          "accept_new_host_key = true, or add it to known_hosts"):format(where(opts),
          (p.before:match("(%u+%d* key fingerprint is [^\r\n]*)") or "no fingerprint shown")
            :gsub("%.$", "")), "host_key"
      end
      p:sendline("yes")
    elseif i == 2 then
      local is_key = m:lower():find("passphrase", 1, true) ~= nil
      local secret = is_key and opts.passphrase or (not is_key and opts.password)
      if not secret then
        return nil, ("auth: %s asks for %s and none was given"):format(where(opts),
          is_key and "the key's passphrase (option passphrase)" or "a password (option password)"),
          "auth"
      end
      if secrets_sent > 0 and not is_key then
        return nil, ("auth: permission denied: %s refused the password"):format(where(opts)),
          "auth"
      end
      if not echo_off_by(p, deadline) then
        return nil, ("auth: a %s prompt from %s, but the terminal still echoes; last " ..
          "output: %s"):format(is_key and "passphrase" or "password", where(opts),
          last_output(p, m)), "auth"
      end
      p:sendline(secret)
      if not is_key then secrets_sent = secrets_sent + 1 end
    elseif i == 3 then
      return nil, ("auth: permission denied: %s refused %s"):format(where(opts),
        secrets_sent > 0 and "the password" or "every method offered"), "auth"
    elseif i == 5 then -- refused without a change: an unknown host under strict checking
      local why = p.before:gsub("\r", ""):match("([^\n]*)\n?$")
      return nil, ("host key: ssh could not verify the host key of %s: %s"):format(where(opts),
        why ~= "" and why or "Host key verification failed."), "host_key"
    elseif i == 4 then
      p:expect({ expect.EOF }, { timeout = math.max(0.1, left / 1000) })
      return nil, ("host key: the host key of %s has changed (possible man-in-the-middle, or " ..
        "the host was reinstalled); ssh refused to connect. Remove the old key with " ..
        "ssh-keygen -R if the change is expected"):format(where(opts)), "host_key"
    elseif i == 8 then
      -- A prompt after the password was taken, the terminal still cooked: a session that
      -- never puts it in raw mode (a restricted shell, a test double such as pexpect's fake
      -- ssh) is open once the program echoes again and waits for a line.
      st = p:status()
      if st.running and st.canonical == false then return true end
      if secrets_sent > 0 and st.running and not st.echo_off and not st.waiting_for_input then
        -- The prompt came before the program reads (a loaded machine): wait for that read,
        -- within the login's time, not for more output (after a prompt none comes).
        p:wait_input({ timeout = math.max(0, deadline - uv.hrtime() / 1e6) / 1000 })
        st = p:status()
        if st.running and st.canonical == false then return true end
      end
      if secrets_sent > 0 and st.running and st.waiting_for_input and not st.echo_off then
        return true
      end
    elseif i == 6 then -- (the output ends before the exit is reaped: wait for the code)
      local how = p:wait({ timeout = math.max(0.1, left / 1000) }) or p:status()
      return nil, ("eof: ssh to %s ended before a shell session (exit code %s): %s")
        :format(where(opts), tostring(how.code), last_output(p)), "eof"
    end
  end
end

--- Log in with ssh. opts: host (required), user, port, password, key (an identity file;
--- only it is offered), passphrase (for the key), options (ssh -o settings:
--- {UserKnownHostsFile = "/path", ...}), config (ssh -F), accept_new_host_key (answer "yes"
--- when the host is not known yet; default false: the login fails naming the fingerprint),
--- timeout (seconds for the whole login; 30), ssh (the client program), env (overrides of
--- the client's environment; TERM is "dumb" unless given).
--- Returns a session, or nil, message, code — code "auth" (wrong password, permission
--- denied, a secret asked for and not given), "host_key" (unknown or changed host key),
--- "timeout", "eof" (ssh ended: connection refused, no route ...), or spawn's codes.
---@return luxec.SshSession|nil, string|nil, string|nil
function M.login(opts)
  check(opts)
  local timeout = opts.timeout or M.defaults.timeout
  local deadline = uv.hrtime() / 1e6 + timeout * 1000
  local env = { TERM = "dumb" } -- no colours, no bracketed paste from the remote line editor
  for k, v in pairs(opts.env or {}) do
    env[k] = v
  end
  local p, err, code = process._spawn_at(2, argv_of(opts), { tty = true, env = env,
    inherit_env = true })
  if not p then return nil, err, code end
  local ok, aerr, acode = authenticate(p, opts, deadline, timeout)
  if not ok then return fail(p, aerr, acode) end
  -- (a session on a cooked terminal echoes what is sent: this terminal stops, as pxssh's)
  if p:getecho() then p:setecho(false) end
  -- The unique prompt, with the exit status of the last command. The line as typed reads
  -- differently from the prompt it sets (the quotes split the token), so its echo never
  -- matches. The remote terminal stops echoing; PS2 is empty (no continuation prompts).
  -- PS1 is set by a line of its own: a shell that does not take the first line whole (a
  -- test double that knows only `PS1=...`, as pexpect's fake ssh) still sets it; one that
  -- does not expand $? in it shows "$?" where the status would be (run's status is then nil).
  local token = ("%08x"):format(math.random(0, 0x7fffffff))
  local s = setmetatable({ process = p, timeout = opts.timeout or M.defaults.timeout,
    prompt_re = ("\\[luxec-%s:(\\d+|\\$\\?)\\] "):format(token), _where = where(opts) },
    Session)
  p:sendline("stty -echo; unset PROMPT_COMMAND; PS2=''")
  p:sendline(("PS1='[luxec''-%s:$?] '"):format(token))
  local left = (deadline - uv.hrtime() / 1e6) / 1000
  local i = p:expect({ { re = s.prompt_re }, expect.EOF, expect.TIMEOUT },
    { timeout = math.max(left, 0) })
  if i ~= 1 then
    return fail(p, ("%s: the shell on %s did not show the prompt set for it; last " ..
      "output: %s"):format(i == 2 and "eof" or "timeout", s._where, last_output(p)),
      i == 2 and "eof" or "timeout")
  end
  return s
end

-- The session's timeout for a call: opts.timeout, else s.timeout.
local function timeout_of(self, fname, opts)
  if opts ~= nil and type(opts) ~= "table" then
    error(("bad argument #2 to '%s' (options table expected, got %s)"):format(fname,
      type(opts)), 3)
  end
  local t = opts and opts.timeout
  if t == nil then t = self.timeout end
  return t
end

--- Wait for the unique prompt: the output before it and the status it shows, or nil,
--- message, code ("timeout", "eof"). For a command sent with s.process:sendline.
---@param opts {timeout: number|false|nil}|nil
---@return string|nil, integer|string|nil, string|nil
function Session:prompt(opts)
  local p = self.process
  if p:closed() then error("attempt to call 'prompt' on a closed ssh session", 2) end
  local i, msg, code = p:expect({ re = self.prompt_re },
    { timeout = timeout_of(self, "prompt", opts) })
  if not i then return nil, msg, code end
  return (p.before:gsub("\r\n", "\n")), tonumber(p.captures[1])
end

--- Run one command line at the remote shell: its output (the terminal's "\r\n" as "\n")
--- and its exit status; nil, message, code ("timeout" or "eof") when the prompt does not
--- come back. After a timeout the command still runs: s.process:sendcontrol("c") and
--- s:prompt() take the session back.
---@param cmd string
---@param opts {timeout: number|false|nil}|nil
---@return string|nil output, integer|string|nil status, string|nil code
function Session:run(cmd, opts)
  if type(cmd) ~= "string" then
    error(("bad argument #1 to 'run' (string expected, got %s)"):format(type(cmd)), 2)
  end
  if cmd:find("[\r\n]") then
    error("bad argument #1 to 'run' (one command line expected: join commands with ';', " ..
      "or send a script with s.process:send and wait with s:prompt())", 2)
  end
  local p = self.process
  if p:closed() then error("attempt to call 'run' on a closed ssh session", 2) end
  local timeout = timeout_of(self, "run", opts)
  p:sendline(cmd)
  local out, status, code = self:prompt({ timeout = timeout })
  if not out then
    return nil, ("%s (running %q on %s)"):format(status, cmd, self._where), code
  end
  return out, status
end

--- Leave the remote shell ("exit") and wait for ssh to end: its status (the remote shell's
--- exit code is ssh's), or nil, message, code. The session is closed either way.
---@param opts {timeout: number|false|nil}|nil
---@return luxec.Status|nil, string|nil, string|nil
function Session:logout(opts)
  local p = self.process
  if p:closed() then error("attempt to call 'logout' on a closed ssh session", 2) end
  local timeout = timeout_of(self, "logout", opts)
  p:sendline("exit")
  local i, msg, code = p:expect(expect.EOF, { timeout = timeout })
  local st = i and p:wait({ timeout = timeout }) or nil
  p:close()
  if not st then return nil, msg or "timeout: ssh did not end after the logout", code or
    "timeout" end
  return st
end

--- End the session at once (the client's whole process tree).
function Session:close()
  self.process:close()
end

Session.__close = Session.close

function Session:__tostring()
  return ("<ssh %s%s>"):format(self._where, self.process:closed() and " (closed)" or "")
end

return M
