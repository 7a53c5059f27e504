--- luxec.engine: the agent engine — Codex's `exec_command` / `write_stdin` ("unified exec")
--- on luxec's process core, compatible where agents rely on it and better where Codex falls
--- short: output cut with a marker that says how many bytes went and where to read them
--- back, escape codes and progress lines cleaned, an early return when the program waits for
--- input, Ctrl-C for pipe sessions, an optional hard timeout, the sandbox verdict in the text.
---
---   local engine = require("luxec.engine").new({ cwd = "/src" })
---   local r = engine:exec_command({ cmd = "make test", yield_time_ms = 5000 })
---   print(require("luxec.engine").format(r))  -- the text a model reads
---
--- Tool calls never raise: bad input returns nil and an error text (Codex's wording where it
--- has one). Every call may run in its own luxec.go task: calls on different sessions run
--- concurrently, calls on one session one after the other.
local uv = require("luv")
local sched = require("luxec.sched")
local process = require("luxec.process")
local sessions = require("luxec.engine.sessions")
local clean = require("luxec.engine.clean")
local policy = require("luxec.engine.policy")
local output = require("luxec.engine.output")

local M = {}

M.denial_guess = policy.denial_guess

M.STDIN_CLOSED = "stdin is closed for this session; rerun exec_command with tty=true to keep "
  .. "stdin open"

local MAX_MS = (1 << 31) - 1 -- a yield, budget or timeout above this is not a number anyone meant

--- Every limit and switch, with its default (see luxec.engine.policy).
M.defaults = policy.defaults

local function default_shell()
  return uv.fs_access("/bin/bash", "X") and "/bin/bash" or "/bin/sh"
end

local function now_ms()
  return uv.hrtime() / 1e6
end

local function chunk_id()
  return ("%06x"):format(math.random(0, 0xFFFFFF))
end

---@class luxec.ExecEngine
local Engine = {}
Engine.__index = Engine

--- A new engine. Raises on a bad config (a programming error); tool calls never raise.
---@param config luxec.ExecConfig|nil
---@return luxec.ExecEngine
function M.new(config)
  local ok, cfg = pcall(policy.config, config)
  if not ok then error(cfg, 2) end
  cfg.shell = cfg.shell or default_shell()
  cfg.cwd = cfg.cwd or uv.cwd()
  cfg.spawn = cfg.spawn or process.spawn
  local self = setmetatable({
    _cfg = cfg,
    _env = policy.build_env(cfg.env, uv.os_environ(), cfg.env_forced, cfg.env_extra),
    _pending = {}, -- sessions whose first exec_command call is still running
    _serial = 0,
    _closed = false,
  }, Engine)
  self._store = sessions.new({
    deterministic = cfg.deterministic,
    max = cfg.max_sessions,
    protect = cfg.protect_recent,
    warn_at = cfg.warn_at,
    exited = function(s) return s.p:finished() end,
  })
  return self
end

-- Sessions ------------------------------------------------------------------------------

-- One call at a time per session: later callers queue; unlock hands the lock over.
local function lock(s)
  if s._locked then
    sched.suspend(function(wake) s._queue[#s._queue + 1] = wake end)
  else
    s._locked = true
  end
end

local function close_session(self, s)
  if s.closed then return end
  s.closed = true
  self._pending[s] = nil
  if s.timer then
    s.timer:close()
    s.timer = nil
  end
  s.p:close()
  if s.log and not s.log_referenced then os.remove(s.log) end
end

-- Close a session nobody needs any more, once no call and no terminate is using it.
local function maybe_close(self, s)
  if s.close_pending and not s._locked and s._busy == 0 then close_session(self, s) end
end

local function unlock(self, s)
  local nxt = table.remove(s._queue, 1)
  if nxt then
    nxt()
  else
    s._locked = false
    maybe_close(self, s)
  end
end

-- Forget a session: its id is unknown from now on; it closes when no call uses it.
local function forget(self, s)
  if s.id and self._store:get(s.id) == s then self._store:remove(s.id) end
  s.removed = true
  s.close_pending = true
end

-- The task that ends a session's process tree (TERM, the grace, KILL): one per session,
-- started on first need; whoever needs the tree gone waits for it.
local function ending(self, s)
  if not s.kill_task then
    s.terminating = true
    s._busy = s._busy + 1
    s.kill_task = sched.go(function()
      pcall(s.p.terminate, s.p, { grace_ms = self._cfg.kill_grace_ms })
      s._busy = s._busy - 1
      maybe_close(self, s)
    end)
  end
  return s.kill_task
end

-- End a session's process tree and forget it; returns once nothing of it is left.
local function kill(self, s)
  forget(self, s)
  if s.closed then return end
  ending(self, s):wait()
end

-- The hard timeout (from the session's timer or a call that sees it pass).
local function time_out(self, s)
  if s.terminating or s.closed or s.p:finished() then return end
  s.timed_out = true
  ending(self, s)
end

-- The wait --------------------------------------------------------------------------------

-- Wait until the process finished (exited, output closed or the drain over), the deadline
-- passed, or — from input_from on — it waits for input with no output for a moment.
-- Returns "exited", "deadline", "input" or "password".
function Engine:_wait(s, deadline, input_from)
  local p, cfg = s.p, self._cfg
  local watch = cfg.early_return and s.input_possible
  while true do
    if p:finished() then return "exited" end
    if s.interrupted then -- Engine:interrupt: the caller gave up on this call
      s.interrupted = nil
      return "deadline"
    end
    local now = now_ms()
    if s.hard_deadline and now >= s.hard_deadline then time_out(self, s) end
    if s.terminating then -- a timeout or terminate is ending it: wait for that, bounded
      s.kill_task:wait()
      if not p:finished() then p:wait({ timeout = 1 }) end
      return p:finished() and "exited" or "deadline"
    elseif now >= deadline then
      return "deadline"
    else
      local left = math.min(deadline, s.hard_deadline or math.huge) - now
      if not watch or p:eof() then -- with the output closed, only the exit can end the wait
        p:wait({ timeout = left / 1000 })
      elseif now < input_from then
        p:wait_output({ timeout = math.min(left, input_from - now) / 1000 })
      elseif p:status().waiting_for_input then
        if not p:wait_output({ timeout = math.min(left, cfg.input_quiet_ms) / 1000 }) then
          local st = p:status()
          if st.waiting_for_input then
            -- a secret prompt reads whole lines without echo; a line editor reads keys
            local secret = st.echo_off and (st.canonical or st.canonical == nil)
            return secret and "password" or "input"
          end
        end
      else
        p:wait_output({ timeout = math.min(left, cfg.input_poll_ms) / 1000 })
      end
    end
  end
end

-- The result of a call that waited: output, then exit code (and the session forgotten) or
-- the session id and what it is doing.
function Engine:_result(s, reason, start, tokens)
  local p = s.p
  local finished = p:finished()
  local res = { chunk_id = chunk_id(), warnings = {} }
  output.collect(s, self._cfg.truncation, tokens, finished, res)
  res.wall_time = (now_ms() - start) / 1000
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
    forget(self, s)
  else
    res.session_id = s.id
    res.state = reason == "input" and "waiting_for_input"
      or reason == "password" and "waiting_for_password" or "running"
  end
  if s.note then
    res.warnings[#res.warnings + 1] = s.note
    s.note = nil
  end
  res.full_output = nil
  return res
end

-- Tool calls ------------------------------------------------------------------------------

local function parse_common(args, res)
  local err
  res.yield, err = policy.arg(args, "yield_time_ms", "integer", { min = 0, max = MAX_MS })
  if err then return nil, err end
  res.tokens, err = policy.arg(args, "max_output_tokens", "integer", { min = 0, max = MAX_MS })
  if err then return nil, err end
  return res
end

local function parse_exec(args)
  if type(args) ~= "table" then
    return nil, "failed to parse function arguments: expected an object, got " .. type(args)
  end
  local a = {}
  local err
  for _, f in ipairs({ { "cmd", "string" }, { "workdir", "string" }, { "shell", "string" },
    { "login", "boolean" }, { "tty", "boolean" }, { "clean", "boolean" } }) do
    a[f[1]], err = policy.arg(args, f[1], f[2], { required = f[1] == "cmd" })
    if err then return nil, err end
  end
  if a.cmd:find("^%s*$") then
    return nil, "failed to parse function arguments: `cmd` is empty"
  elseif a.cmd:find("\0", 1, true) then
    return nil, "failed to parse function arguments: `cmd` contains a NUL byte"
  end
  a.timeout_ms, err = policy.arg(args, "timeout_ms", "integer", { min = 1, max = MAX_MS })
  if err then return nil, err end
  return parse_common(args, a)
end

function Engine:_argv(a)
  local cfg = self._cfg
  local shell = (a.shell ~= nil and a.shell ~= "") and a.shell or cfg.shell
  local login = a.login
  if login == nil then login = cfg.login and cfg.allow_login_shell end
  if login and not cfg.allow_login_shell then
    return nil, "login shell is disabled by config; omit `login` or set it to false."
  end
  return { shell, login and "-lc" or "-c", a.cmd }
end

function Engine:_log_path(id)
  local cfg = self._cfg
  if not cfg.log then return nil end
  if not self._log_dir then
    local tmp = os.getenv("TMPDIR")
    tmp = (tmp and tmp ~= "") and tmp or "/tmp"
    local dir, err = cfg.log_dir
    if dir then
      uv.fs_mkdir(dir, 448) -- 0700; it may exist
    else
      dir, err = uv.fs_mkdtemp(tmp .. "/luxec-exec-XXXXXX")
      if not dir then return nil, "cannot create the log directory: " .. tostring(err) end
    end
    self._log_dir = dir
  end
  self._serial = self._serial + 1
  local path = ("%s/%d-%d.log"):format(self._log_dir, id, self._serial)
  os.remove(path) -- a configured log_dir may hold an old one: the log is appended to
  return path
end

function Engine:_exec(args, no_sandbox)
  local cfg = self._cfg
  local a, err = parse_exec(args)
  if not a then return nil, err end
  local argv
  argv, err = self:_argv(a)
  if not argv then return nil, err end
  local cwd = cfg.cwd
  if a.workdir and a.workdir ~= "" then
    cwd = a.workdir:sub(1, 1) == "/" and a.workdir or cfg.cwd .. "/" .. a.workdir
  end
  local id
  id, err = self._store:reserve()
  if not id then return nil, err end
  local log
  log, err = self:_log_path(id)
  if err then
    self._store:release(id)
    return nil, err
  end
  local tty = a.tty == true
  local sandbox = not no_sandbox and cfg.sandbox or nil
  if sandbox and sandbox.workspace == nil then
    -- the engine's directory is the workspace: a command's workdir must not widen it
    local copy = { workspace = cfg.cwd }
    for k, v in pairs(sandbox) do copy[k] = v end
    sandbox = copy
  end
  local opts = {
    env = self._env, cwd = cwd, log = log, log_max = log and cfg.log_max or nil,
    head = cfg.head, tail = cfg.tail,
    grace_ms = cfg.drain_ms, tty = tty and { rows = cfg.rows, cols = cfg.cols } or nil,
    stdin = not tty and cfg.pipe_stdin or nil, sandbox = sandbox,
  }
  local ok, p, serr = pcall(cfg.spawn, argv, opts)
  if not ok or not p then
    if log then os.remove(log) end
    self._store:release(id)
    return nil, ("failed to start `%s`: %s"):format(a.cmd, tostring(ok and serr or p))
  end
  local start = now_ms()
  local do_clean = a.clean
  if do_clean == nil then do_clean = tty and cfg.clean_tty or (not tty and cfg.clean_pipe) end
  local s = {
    id = id, p = p, tty = tty, cmd = a.cmd, cwd = cwd, log = log, log_max = cfg.log_max,
    started = start,
    input_possible = tty or cfg.pipe_stdin == "pipe", stdin_pipe = not tty
      and cfg.pipe_stdin == "pipe", sandboxed = sandbox ~= nil,
    cleaner = clean.new({ strip = do_clean, collapse = do_clean }),
    raw_read = 0, raw_done = 0, tail = "", _queue = {}, _busy = 0,
  }
  self._pending[s] = true
  local timeout_ms = a.timeout_ms or cfg.timeout_ms
  if timeout_ms then
    s.timeout_ms, s.hard_deadline = timeout_ms, start + timeout_ms
    s.timer = uv.new_timer()
    s.timer:start(timeout_ms, 0, function() time_out(self, s) end)
    s.timer:unref()
  end
  lock(s)
  local okc, res = pcall(self._first_call, self, s, a, start)
  unlock(self, s)
  if not okc then
    kill(self, s)
    error(res, 0)
  end
  if res.sandbox and res.sandbox.denied and cfg.on_denial and not no_sandbox then
    local okh, again = pcall(cfg.on_denial, res.sandbox, args)
    if okh and again then
      local res2, err2 = self:_exec(args, true)
      if not res2 then return nil, err2 end
      res2.sandbox_retry = res.sandbox
      return res2
    end
  end
  return res
end

function Engine:_first_call(s, a, start)
  local cfg = self._cfg
  local yield = policy.exec_yield(a.yield, cfg)
  local tokens = math.min(a.tokens or cfg.max_output_tokens, cfg.max_output_tokens_limit)
  local reason = self:_wait(s, start + yield, start + math.min(cfg.early_exit_ms, yield))
  local res
  if s.p:finished() or self._closed or s.removed then
    res = self:_result(s, reason, start, tokens)
    if res.session_id == nil then self._store:release(s.id) end -- ended unseen: not kept
  else
    self._pending[s] = nil
    local pruned_id, pruned, warning = self._store:add(s.id, s)
    if pruned then
      s.note = ("Session %d (%s) was ended to stay within %d open processes"):format(pruned_id,
        pruned.p:finished() and "exited, least recently used" or "least recently used",
        cfg.max_sessions)
      kill(self, pruned)
    end
    res = self:_result(s, reason, start, tokens)
    if warning then table.insert(res.warnings, 1, warning) end
  end
  res.command = a.cmd
  return res
end

local function parse_write(args, cfg)
  if type(args) ~= "table" then
    return nil, "failed to parse function arguments: expected an object, got " .. type(args)
  end
  local a = {}
  local err
  a.id, err = policy.arg(args, "session_id", "integer", { required = true })
  if err then return nil, err end
  a.chars, err = policy.arg(args, "chars", "string")
  if err then return nil, err end
  a.chars = a.chars or ""
  if #a.chars > cfg.max_chars then
    return nil, ("chars is %d bytes; write_stdin takes at most %d bytes in one call")
      :format(#a.chars, cfg.max_chars)
  end
  return parse_common(args, a)
end

function Engine:_write(args)
  local cfg = self._cfg
  local a, err = parse_write(args, cfg)
  if not a then return nil, err end
  local unknown = ("Unknown process id %d"):format(a.id)
  local s = self._store:get(a.id)
  if not s then return nil, unknown end
  lock(s)
  local ok, res, werr = pcall(self._write_locked, self, s, a, unknown)
  unlock(self, s)
  if not ok then error(res, 0) end
  return res, werr
end

function Engine:_write_locked(s, a, unknown)
  local cfg = self._cfg
  if s.removed then return nil, unknown end
  self._store:touch(s.id)
  local p, chars = s.p, a.chars
  if chars ~= "" then
    if not s.tty and chars == "\3" then
      if not p:finished() then pcall(p.signal, p, "INT", "group") end
    elseif not s.stdin_pipe and not s.tty then
      return nil, M.STDIN_CLOSED
    elseif s.stdin_pipe and chars == "\4" then
      pcall(p.close_stdin, p)
    else
      local okw, n, werr = pcall(p.write, p, chars)
      if not (okw and n) and not p:finished() then
        s.note = "writing to stdin failed: " .. tostring(okw and werr or n)
      end
    end
    p:wait({ timeout = cfg.settle_ms / 1000 })
  end
  local tokens = math.min(a.tokens or cfg.max_output_tokens, cfg.max_output_tokens_limit)
  local start = now_ms()
  local reason = self:_wait(s, start + policy.write_yield(a.yield, chars ~= "", cfg), start)
  return self:_result(s, reason, start, tokens)
end

-- Run fn as a tool call: never raises; a failure inside is reported as an error text.
local function guard(self, fn, ...)
  if self._closed then return nil, "the exec engine is shut down" end
  local ok, res, err = pcall(fn, self, ...)
  if not ok then return nil, "internal error: " .. tostring(res) end
  return res, err
end

---@class luxec.ExecResult
---@field chunk_id string  6 random lowercase hex digits
---@field wall_time number  seconds the call waited (after spawn, or after the settle)
---@field exit_code integer|nil  when the process exited (128+N for signal N; 124 timed out)
---@field session_id integer|nil  when it still runs
---@field state "exited"|"running"|"waiting_for_input"|"waiting_for_password"|"timed_out"
---@field original_token_count integer  ceil(bytes/4) of the output before the cut
---@field output string  what the model reads (cleaned, cut)
---@field truncated boolean
---@field removed integer  bytes of the output not in `output`
---@field dropped integer  bytes the output buffer dropped before they were read (in the log)
---@field cleaned integer  raw bytes cleaning removed (escapes, rewritten lines)
---@field log_range {path: string, from: integer, to: integer}|nil  where the cut bytes are
---@field sandbox luxec.DenialGuess|{denied: boolean, guess: false, evidence: table}|nil
---@field warnings string[]

--- Codex's exec_command: run `cmd` in a shell; wait until it exits or the yield passes.
--- args: cmd (required), workdir, shell, login, tty (false), yield_time_ms (10000, clamped
--- 250..30000), max_output_tokens (10000); luxec's: timeout_ms, clean.
---@param args table
---@return luxec.ExecResult|nil, string|nil
function Engine:exec_command(args)
  return guard(self, self._exec, args)
end

--- Codex's write_stdin: write chars (raw) to a session, then wait for output. args:
--- session_id (required), chars (""), yield_time_ms (250), max_output_tokens.
---@param args table
---@return luxec.ExecResult|nil, string|nil
function Engine:write_stdin(args)
  return guard(self, self._write, args)
end

--- End the wait of the call now waiting on a session — `target` is its session id, or the
--- process a first exec_command started (before it has an id) — so that it returns at once
--- with what it has read; a cancelled request does not keep the session locked until its
--- yield ends. Returns whether a call was waiting.
---@param target integer|luxec.Process
---@return boolean
function Engine:interrupt(target)
  local s = type(target) == "number" and self._store:get(target) or nil
  if not s then
    for ps in pairs(self._pending) do
      if ps.p == target then s = ps end
    end
  end
  if not s or s.closed or not s._locked then return false end
  s.interrupted = true
  s.p:_interrupt_waits()
  return true
end

--- The open sessions, most recently used first.
---@return {session_id: integer, pid: integer, command: string, tty: boolean, cwd: string,
---  running: boolean, age_ms: number, log: string|nil}[]
function Engine:list()
  local list = {}
  for _, id in ipairs(self._store:ids()) do
    local s = self._store:get(id)
    list[#list + 1] = { session_id = id, pid = s.p.pid, command = s.cmd, tty = s.tty,
      cwd = s.cwd, running = not s.p:finished(), age_ms = now_ms() - s.started, log = s.log }
  end
  return list
end

--- End a session's whole process tree and forget it.
---@param id integer
---@return boolean|nil, string|nil
function Engine:terminate(id)
  if math.type(id) ~= "integer" then
    return nil, ("bad session id %s (integer expected)"):format(tostring(id))
  end
  local s = self._store:get(id)
  if not s then return nil, ("Unknown process id %d"):format(id) end
  local ok, err = pcall(kill, self, s)
  if not ok then return nil, "internal error: " .. tostring(err) end
  return true
end

local function remove_logs(self)
  if not self._log_dir or self._cfg.log_dir then return end
  local req = uv.fs_scandir(self._log_dir)
  while req do
    local name = uv.fs_scandir_next(req)
    if not name then break end
    os.remove(self._log_dir .. "/" .. name)
  end
  uv.fs_rmdir(self._log_dir)
end

--- End every session (concurrently), remove the logs; later calls fail. Also `<close>`.
function Engine:shutdown()
  if self._closed then return end
  self._closed = true
  local all = {}
  for _, id in ipairs(self._store:ids()) do all[#all + 1] = self._store:get(id) end
  for s in pairs(self._pending) do all[#all + 1] = s end
  local tasks = {}
  for _, s in ipairs(all) do
    tasks[#tasks + 1] = sched.go(kill, self, s)
  end
  for _, t in ipairs(tasks) do t:wait() end
  remove_logs(self)
end

Engine.__close = Engine.shutdown

-- An engine collected without a shutdown: its sessions are closed (SIGKILL to each tree, as
-- a collected process is), its logs removed.
function Engine:__gc()
  if self._closed then return end
  self._closed = true
  for _, id in ipairs(self._store:ids()) do close_session(self, self._store:get(id)) end
  for s in pairs(self._pending) do close_session(self, s) end
  remove_logs(self)
end

--- The text a model reads for a result (see luxec.engine.output).
M.format = output.format

return M
