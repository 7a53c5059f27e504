--- luxec.engine: the agent engine — Codex's `exec_command` / `write_stdin` ("unified exec")
--- on luxec's process core, compatible where agents rely on it and better where Codex falls
--- short: output cut with a marker that says how many bytes went and where to read them
--- back, escape codes and progress lines cleaned, an early return when the program waits for
--- input or the output matches `until`, a first answer (`input`) in the same call, Ctrl-C
--- for pipe sessions, an optional hard timeout, the sandbox verdict in the text.
---
---   local engine = require("luxec.engine").new({ cwd = "/src" })
---   local r = engine:exec_command({ cmd = "make test", yield_time_ms = 5000 })
---   print(require("luxec.engine").format(r))  -- the text a model reads
---
--- Tool calls never raise: bad input returns nil and an error text (Codex's wording where it
--- has one). Every call may run in its own luxec.go task: calls on different sessions run
--- concurrently, calls on one session one after the other. A front end passes what it
--- decides per request — a sandbox, limits, progress, cancellation — as the call's context
--- (luxec.engine.call) and asks the engine about sessions (list, describe, read_output):
--- the engine's store is the only registry, and workdir, shell and clamps are decided here
--- (luxec.engine.policy). Files: session.lua (a session's lock, wait, result and end),
--- meta.lua (descriptions, ended sessions, read-back), output.lua, sessions.lua (the store).
local uv = require("luv")
local sched = require("luxec.sched")
local process = require("luxec.process")
local sessions = require("luxec.engine.sessions")
local session = require("luxec.engine.session")
local call = require("luxec.engine.call")
local clean = require("luxec.engine.clean")
local policy = require("luxec.engine.policy")
local output = require("luxec.engine.output")
local meta = require("luxec.engine.meta")
local args_ = require("luxec.engine.args")

local M = {}

M.denial_guess = policy.denial_guess

M.STDIN_CLOSED = "stdin is closed for this session; rerun exec_command with tty=true to keep "
  .. "stdin open"


--- Every limit and switch, with its default (see luxec.engine.policy).
M.defaults = policy.defaults

local function hrtime_ms()
  return uv.hrtime() / 1e6
end

---@class luxec.ExecEngine
local Engine = {}
Engine.__index = Engine

--- A new engine. Raises on a bad config (a programming error); tool calls never raise.
--- Every session starts through `config.spawn` (luxec.spawn by default) and every time is
--- read from `config.clock` (the loop's clock): the seams a front end or a test gives it.
---@param config luxec.ExecConfig|nil
---@return luxec.ExecEngine
function M.new(config)
  local ok, cfg = pcall(policy.config, config)
  if not ok then error(cfg, 2) end
  if cfg.text == "codex" then -- Codex's truncation (by tokens unless by bytes), its variable
    if cfg.truncation == "luxec" then cfg.truncation = "codex-tokens" end
    local forced = { CODEX_CI = "1" }
    for k, v in pairs(cfg.env_forced) do forced[k] = v end
    cfg.env_forced = forced
  end
  cfg.shell = cfg.shell or policy.default_shell()
  cfg.cwd = cfg.cwd or uv.cwd()
  cfg.spawn = cfg.spawn or process.spawn
  local self = setmetatable({
    _cfg = cfg,
    _now = cfg.clock or hrtime_ms,
    _env = policy.build_env(cfg.env, uv.os_environ(), cfg.env_forced, cfg.env_extra),
    _pending = {}, -- sessions whose first exec_command call is still running
    _ended = {}, -- id -> what is known of an ended session (KEEP_ENDED of them)
    _ended_order = {},
    _carry = {}, -- id -> the result of a cancelled call, for the next call on that id
    _logs = {}, -- every log path a result named
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

-- Tool calls ------------------------------------------------------------------------------

--- How a command would run: its shell, whether as a login shell, and its directory — the
--- engine's defaults and workdir rule, for a front end that must tell a policy hook before
--- the call (args as exec_command takes them; bad ones fall back to the defaults).
---@param args table
---@return {shell: string, login: boolean, cwd: string}
function Engine:resolve(args)
  local cfg = self._cfg
  args = type(args) == "table" and args or {}
  local shell = (type(args.shell) == "string" and args.shell ~= "") and args.shell or cfg.shell
  local login = args.login
  if type(login) ~= "boolean" then login = cfg.login and cfg.allow_login_shell end
  return { shell = shell, login = login, cwd = policy.workdir(cfg.cwd, args.workdir) }
end

function Engine:_argv(a)
  local r = self:resolve(a)
  if r.login and not self._cfg.allow_login_shell then
    return nil, "login shell is disabled by config; omit `login` or set it to false."
  end
  local shell = r.shell
  if self._cfg.text == "codex" then shell = policy.resolve_shell(shell, self._env.PATH) end
  return policy.shell_argv(shell, r.login, a.cmd), r.cwd
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

local function label(cmd)
  return ("`%s`"):format(#cmd > 60 and cmd:sub(1, 60) .. "…" or cmd)
end

function Engine:_exec(args, ctx, lim, no_sandbox)
  local cfg = self._cfg
  local a, err = args_.exec(args)
  if not a then return nil, err end
  if a.host and cfg.spawn == process.spawn then
    return nil, ("unknown host %q: this engine runs commands here only"):format(a.host)
  end
  local argv, cwd = self:_argv(a)
  if not argv then return nil, cwd end
  if a.input and not (a.tty or cfg.pipe_stdin == "pipe") then
    return nil, "`input` needs tty = true: this command's stdin would be /dev/null"
  end
  if ctx.cancelled then return nil, "the call was cancelled before its command started" end
  if not ctx._progress_timer then
    call.start_progress(ctx, self._now, policy.exec_yield(a.yield, lim), label(a.cmd))
  end
  local id
  id, err = self._store:reserve()
  if not id then return nil, err end
  local log
  if not a.host then log, err = self:_log_path(id) end -- (a host's session: in its memory)
  if err then
    self._store:release(id)
    return nil, err
  end
  local tty = a.tty == true
  local sandbox = not no_sandbox
    and call.sandbox(cfg.sandbox, cfg.cwd, ctx, log and self._log_dir, cfg.protect) or nil
  local opts = {
    env = self._env, cwd = cwd, log = log, log_max = log and cfg.log_max or nil,
    head = cfg.head, tail = cfg.tail,
    grace_ms = cfg.drain_ms, tty = tty and { rows = cfg.rows, cols = cfg.cols } or nil,
    stdin = not tty and cfg.pipe_stdin or nil, sandbox = sandbox,
  }
  -- (a front end's spawn learns the host named and what it needs to find the session again)
  local ok, p, serr = pcall(cfg.spawn, argv, opts, { host = a.host, session_id = id,
    cmd = a.cmd, workdir = a.workdir, tty = tty, sandboxed = sandbox ~= nil,
    stdin_pipe = not tty and cfg.pipe_stdin == "pipe", clean = a.clean })
  if not ok or not p then
    if log then os.remove(log) end
    self._store:release(id)
    local why = tostring(ok and serr or p)
    if cfg.text == "codex" then -- Codex's words for a command that could not start
      local words = {}
      for i, w in ipairs(argv) do words[i] = policy.shell_word(w) end
      return nil, ("exec_command failed for `%s`: %s"):format(table.concat(words, " "), why)
    end
    return nil, ("failed to start `%s`: %s"):format(a.cmd, why)
  end
  local start = self._now()
  local do_clean = a.clean
  if do_clean == nil then do_clean = tty and cfg.clean_tty or (not tty and cfg.clean_pipe) end
  local s = {
    id = id, p = p, tty = tty, cmd = a.cmd, cwd = cwd, log = log, log_max = cfg.log_max,
    host = a.host,
    started = start,
    input_possible = tty or cfg.pipe_stdin == "pipe", stdin_pipe = not tty
      and cfg.pipe_stdin == "pipe", sandboxed = sandbox ~= nil,
    cleaner = clean.new({ strip = do_clean, collapse = do_clean }),
    raw_read = 0, raw_done = 0, tail = "", _queue = {}, _busy = 0,
  }
  self._pending[s] = true
  ctx.session = s
  -- Stored before the first wait, as Codex stores it: during the call the id is known to
  -- list_sessions, write_stdin (which queues behind this call) and terminate_session, and
  -- counts toward the limit (pruning another now, not after the wait).
  local pruned_id, pruned, warning = self._store:add(id, s)
  if warning and cfg.text ~= "codex" then -- (Codex's words name its warning threshold as the
    -- maximum; luxec's say both numbers once, and what happens at the maximum)
    warning = ("%d sessions are open; at %d, a new command ends the least recently used one "
      .. "(end sessions you no longer need)"):format(self._store._count, cfg.max_sessions)
  end
  s.stored, s.first_warning, s.first_call = true, warning, true
  if pruned then
    s.note = ("Session %d (%s) was ended to stay within %d open processes"):format(pruned_id,
      pruned.p:finished() and "exited, least recently used" or "least recently used",
      cfg.max_sessions)
    session.kill(self, pruned, "pruned")
  end
  local timeout_ms = a.timeout_ms or lim.timeout_ms
  if timeout_ms then
    s.timeout_ms, s.hard_deadline = timeout_ms, start + timeout_ms
    s.timer = uv.new_timer()
    s.timer:start(timeout_ms, 0, function() session.time_out(self, s) end)
    s.timer:unref()
  end
  session.lock(s, ctx)
  local okc, res = pcall(self._first_call, self, s, a, start, ctx, lim)
  session.unlock(self, s)
  if not okc then
    session.kill(self, s)
    error(res, 0)
  end
  if res.session_id and ctx.cancelled and not s.removed then call.keep(self:_carrier(s.id), res) end
  if res.sandbox and res.sandbox.denied and cfg.on_denial and not no_sandbox
    and not ctx.cancelled then
    local okh, again = pcall(cfg.on_denial, res.sandbox, args)
    if okh and again then
      local res2, err2 = self:_exec(args, ctx, lim, true)
      if not res2 then return nil, err2 end
      res2.sandbox_retry = res.sandbox
      return res2
    end
  end
  if a.terminate and not ctx.cancelled then self:_terminate_after(a.terminate, res) end
  return res
end

-- exec_command's `terminate`: end these sessions once the command's call is over (a
-- server the command was a client of); the result says which ended and which were unknown.
function Engine:_terminate_after(ids, res)
  res.terminated = {}
  for _, id in ipairs(ids) do
    if id == res.session_id then
      res.warnings[#res.warnings + 1] = ("`terminate` names this command's own session %d: "
        .. "not ended"):format(id)
    else
      local ok, err = self:terminate(id)
      if ok then
        res.terminated[#res.terminated + 1] = id
      else
        res.warnings[#res.warnings + 1] = ("`terminate` %d: %s"):format(id, err)
      end
    end
  end
end

-- Where the carried result of session `id` is kept.
function Engine:_carrier(id)
  local c = self._carry[id]
  if not c then
    c = {}
    self._carry[id] = c
  end
  return c
end

-- A max_output_tokens above the limit is lowered to it: say so.
local function capped(a, lim, res)
  if a.tokens and a.tokens > lim.max_output_tokens_limit then
    res.warnings[#res.warnings + 1] = ("max_output_tokens %d was lowered to the limit, %d")
      :format(a.tokens, lim.max_output_tokens_limit)
  end
end

-- Write `chars` to session s as write_stdin does (Ctrl-C on a pipe is SIGINT, Ctrl-D on a
-- pipe closes stdin), then let the program take it. nil and an error when stdin is closed.
function Engine:_send(s, chars)
  local p = s.p
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
  p:wait({ timeout = self._cfg.settle_ms / 1000 })
  return true
end

function Engine:_first_call(s, a, start, ctx, lim)
  local cfg = self._cfg
  local yield = policy.exec_yield(a.yield, lim)
  local tokens = policy.tokens(a.tokens, lim)
  s.until_re, s.until_fresh = a.until_re, a.until_re ~= nil
  local input_note
  if a.input and not lim.early_return then -- no way to tell when it reads: write it at once
    self:_send(s, table.concat(a.input))
  end
  local reason = session.wait(self, s, start + yield, start + math.min(cfg.early_exit_ms, yield),
    lim, ctx)
  if a.input and lim.early_return then -- each answer when the program next waits for input
    for i, answer in ipairs(a.input) do
      if reason ~= "input" and reason ~= "password" then
        input_note = ("%s not written: %s before the program waited for input%s")
          :format(#a.input == 1 and "`input` was" or ("`input` %d of %d and later were")
          :format(i, #a.input), reason == "exited" and "the process ended" or reason == "matched"
          and "the output matched `until`" or "the yield ran out", i > 1 and " again" or "")
        break
      end
      self:_send(s, answer)
      reason = session.wait(self, s, start + yield, self._now(), lim, ctx)
    end
  end
  self._pending[s] = nil
  local res = session.result(self, s, reason, start, tokens, a.keep)
  s.first_call = nil
  if res.session_id == nil then
    self._store:release(s.id) -- ended within its first call: no result named the id
  elseif s.first_warning then
    table.insert(res.warnings, 1, s.first_warning)
  end
  s.first_warning = nil
  if input_note then res.warnings[#res.warnings + 1] = input_note end
  capped(a, lim, res)
  meta.grep_result(s, a, res)
  res.command = a.cmd
  return res
end

function Engine:_write(args, ctx, lim)
  local cfg = self._cfg
  local a, err = args_.write(args, cfg)
  if not a then return nil, err end
  local unknown = ("Unknown process id %d"):format(a.id)
  local s = self._store:get(a.id)
  local res
  if s then
    if not ctx._progress_timer then
      call.start_progress(ctx, self._now, policy.write_yield(a.yield, a.chars ~= "", lim),
        ("session %d"):format(a.id))
    end
    ctx.session = s
    session.lock(s, ctx)
    local ok
    ok, res, err = pcall(self._write_locked, self, s, a, unknown, ctx, lim)
    session.unlock(self, s)
    if not ok then error(res, 0) end
  else
    err = unknown
    -- (luxec's text says what became of a session it knew; Codex's words stay as Codex's)
    if cfg.text ~= "codex" then err = meta.gone(self, a.id, unknown) end
  end
  if ctx.cancelled then -- nobody reads this answer: keep it for the next call on the id
    if res and (res.session_id or res.exit_code) then call.keep(self:_carrier(a.id), res) end
    return res, err
  end
  local carried = self._carry[a.id]
  if carried then
    self._carry[a.id] = nil
    if not res then
      -- the cancelled call saw the session end: that result is the one nobody received
      if carried.carry and carried.carry.exit_code then
        res = carried.carry
        table.insert(res.warnings, "This is the result of a call that was cancelled")
        return res
      end
      return nil, err
    end
    call.take(carried, res)
  end
  return res, err
end

function Engine:_write_locked(s, a, unknown, ctx, lim)
  if s.removed then return nil, unknown end
  self._store:touch(s.id)
  local chars = a.chars
  if ctx.cancelled then chars = "" end -- cancelled while it queued: its input is not sent
  if chars ~= "" then
    local ok, err = self:_send(s, chars)
    if not ok then return nil, err end
  end
  local tokens = policy.tokens(a.tokens, lim)
  local start = self._now()
  s.until_re, s.until_fresh = a.until_re, a.until_re ~= nil
  local reason = session.wait(self, s, start + policy.write_yield(a.yield, chars ~= "", lim),
    start, lim, ctx)
  local res = session.result(self, s, reason, start, tokens, a.keep)
  capped(a, lim, res)
  meta.grep_result(s, a, res)
  return res
end

-- Run fn as a tool call: never raises; a failure inside is reported as an error text.
local function guard(self, fn, args, ctx)
  if self._closed then return nil, "the exec engine is shut down" end
  local lim
  ctx, lim = call.check(ctx, self._cfg)
  if not ctx then return nil, lim end
  local ok, res, err = pcall(fn, self, args, ctx, lim)
  call.stop_progress(ctx)
  ctx.session = nil -- the call is over: cancelling it now touches no session
  if not ok then return nil, "internal error: " .. tostring(res) end
  return res, err
end

---@class luxec.ExecResult
---@field chunk_id string  6 random lowercase hex digits
---@field wall_time number  seconds the call waited (after spawn, or after the settle)
---@field exit_code integer|nil  when the process exited (128+N for signal N; 124 timed out)
---@field session_id integer|nil  when it still runs
---@field state "exited"|"running"|"matched"|"waiting_for_input"|"waiting_for_password"|"timed_out"
---@field original_token_count integer  ceil(bytes/4) of the output before the cut
---@field output string  what the model reads (cleaned, cut)
---@field truncated boolean
---@field removed integer  bytes of the output not in `output`
---@field dropped integer  bytes the output buffer dropped before they were read (in the log)
---@field cleaned integer  raw bytes cleaning removed (escapes, rewritten lines)
---@field log_range {path: string, from: integer, to: integer}|nil  where the cut bytes are
---@field sandbox luxec.DenialGuess|{denied: boolean, guess: false, evidence: table}|nil
---@field warnings string[]
---@field grep table|nil  with `grep`: {pattern, from, to, complete, next_offset, matches}
---@field terminated integer[]|nil  with `terminate`: the sessions ended after the call

--- Codex's exec_command: run `cmd` in a shell; wait until it exits or the yield passes.
--- args: cmd (required), workdir, shell, login, tty (false), yield_time_ms (10000, clamped
--- 250..30000), max_output_tokens (10000); luxec's: timeout_ms, clean, until, input (answers:
--- a string or a list, each written at the next input wait), keep, grep, context, terminate
--- (sessions to end after the call). `ctx`: this call's
--- sandbox, limits, progress and cancellation (luxec.engine.call).
---@param args table
---@param ctx luxec.ExecCall|nil
---@return luxec.ExecResult|nil, string|nil
function Engine:exec_command(args, ctx)
  return args_.with_unknown("exec", args, guard(self, self._exec, args, ctx))
end

--- Codex's write_stdin: write chars (raw) to a session, then wait for output. args:
--- session_id (required), chars (""), yield_time_ms (250), max_output_tokens.
---@param args table
---@param ctx luxec.ExecCall|nil
---@return luxec.ExecResult|nil, string|nil
function Engine:write_stdin(args, ctx)
  return args_.with_unknown("write", args, guard(self, self._write, args, ctx))
end

--- Cancel the call running with context `ctx` (from another task or a loop callback): its
--- wait ends at once and it returns what it read, which the next call on its session gets
--- (with a warning); an input it had not written yet is not written. `how` = "kill" also ends
--- the session's process tree. Returns whether the call was working on a session.
---@param ctx luxec.ExecCall
---@param how "interrupt"|"kill"|nil
---@return boolean
function Engine:cancel(ctx, how)
  if type(ctx) ~= "table" then return false end
  ctx.cancelled = true
  call.stop_progress(ctx)
  local s = ctx.session
  if not s then return false end
  if how == "kill" then -- its wait ends with the process (and reports that end)
    if not s.closed then sched.go(session.kill, self, s, "terminated") end
  else
    session.interrupt(s, ctx)
  end
  return true
end

--- End the wait of the call now waiting on a session — `target` is its session id, or the
--- process a first exec_command started (before it has an id) — so that it returns at once
--- with what it has read. Returns whether a call was waiting. (A front end that knows its
--- call cancels that call with `cancel`.)
---@param target integer|luxec.Process
---@return boolean
function Engine:interrupt(target)
  local s = type(target) == "number" and self._store:get(target) or nil
  if not s then
    for ps in pairs(self._pending) do
      if ps.p == target then s = ps end
    end
  end
  if not s then return false end
  return session.interrupt(s)
end

--- The open sessions, most recently used first.
---@return {session_id: integer, pid: integer, command: string, tty: boolean, cwd: string,
---  running: boolean, age_ms: number, log: string|nil}[]
function Engine:list()
  return meta.list(self)
end

--- End a session's whole process tree and forget it. For a session that ended inside a
--- cancelled call (its end was never reported) returns nil, a message and true.
---@param id integer
---@return boolean|nil, string|nil, boolean|nil
function Engine:terminate(id)
  if math.type(id) ~= "integer" then
    return nil, ("bad session id %s (integer expected)"):format(tostring(id))
  end
  local carried = self._carry[id]
  self._carry[id] = nil
  local s = self._store:get(id)
  if not s then
    if carried then return nil, ("Session %d had already exited"):format(id), true end
    return nil, ("Unknown process id %d"):format(id)
  end
  local ok, err = pcall(session.kill, self, s, "terminated")
  if not ok then return nil, "internal error: " .. tostring(err) end
  return true
end

--- What the engine knows of session `id`: an open one as `list` tells it, or one that ended
--- (among the last ones), with ended = true and the reason ("exited", "timed_out",
--- "terminated", "pruned", "shutdown"); nil for an id it never handed out.
---@param id integer
---@return table|nil
function Engine:describe(id)
  return meta.describe(self, id)
end

--- Read back a session's output (or a log a result named) by byte offset — the offsets of
--- the output as the session printed it, the unit of every result's log_from / log_offset
--- and marker. args: session_id and/or log, offset (0), length (65536, at most max_bytes),
--- clean (clean what is read, as exec results are), or grep (a regex: the matching lines
--- from offset on, each with its offset; context lines around each, max_matches (20),
--- matched on cleaned lines unless clean = false). Returns {data or grep, total, log,
--- offset, next_offset, session_id} (log nil when read from memory), or nil and an error.
---@param args table
---@param max_bytes integer|nil
---@return table|nil, string|nil
function Engine:read_output(args, max_bytes)
  return meta.read_output(self, args, max_bytes)
end

--- End every session (concurrently), remove the logs; later calls fail. Also `<close>`.
function Engine:shutdown()
  if self._closed then return end
  self._closed = true
  local all = {}
  for _, id in ipairs(self._store:ids()) do all[#all + 1] = self._store:get(id) end
  for s in pairs(self._pending) do
    if self._store:get(s.id) ~= s then all[#all + 1] = s end -- (not stored twice)
  end
  local tasks = {}
  for _, s in ipairs(all) do
    tasks[#tasks + 1] = sched.go(session.kill, self, s, "shutdown")
  end
  for _, t in ipairs(tasks) do t:wait() end
  meta.remove_logs(self)
end

Engine.__close = Engine.shutdown

-- An engine collected without a shutdown: its sessions are closed (SIGKILL to each tree, as
-- a collected process is), its logs removed.
function Engine:__gc()
  if self._closed then return end
  self._closed = true
  for _, id in ipairs(self._store:ids()) do session.close(self, self._store:get(id)) end
  for s in pairs(self._pending) do session.close(self, s) end
  meta.remove_logs(self)
end

--- The text a model reads for a result (see luxec.engine.output): opts.text "luxec" (the
--- default, compact) or "codex" (Codex's exactly), opts.chunk_id.
M.format = output.format

--- The text a model reads for a result, in this engine's `text` mode.
---@param r luxec.ExecResult
---@return string
function Engine:format(r)
  return output.format(r, { text = self._cfg.text, chunk_id = self._cfg.chunk_id })
end

--- The engine's `text` mode: "luxec" or "codex".
---@return "luxec"|"codex"
function Engine:text_mode()
  return self._cfg.text
end

return M
