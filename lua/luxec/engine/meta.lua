--- luxec.engine.meta: what an engine tells of its sessions besides tool results — an open
--- or ended session's description (the engine keeps the last ended ones) and reading a
--- session's output back by byte offset, from its log or from memory — and the removal of
--- the logs it made. The engine's store (luxec.engine.sessions) is the one registry; a front
--- end asks here and keeps none.
local uv = require("luv")
local policy = require("luxec.engine.policy")
local clean = require("luxec.engine.clean")
local search = require("luxec.engine.search")
local args_mod = require("luxec.engine.args")

local M = {}

local KEEP_ENDED = 256 -- ended sessions `describe` and `read_output` still know

--- What describe tells of a session (live or ended).
function M.info(s, now)
  return { session_id = s.id, pid = s.p.pid, command = s.cmd, tty = s.tty, cwd = s.cwd,
    running = not s.closed and not s.p:finished(), age_ms = now - s.started, log = s.log,
    host = s.host }
end

--- Remember a session the model knew that is now gone (called when it is forgotten); past
--- KEEP_ENDED the oldest are forgotten, with what a cancelled call left for them.
--- The open sessions, most recently used first (Engine:list).
function M.list(eng)
  local list, now = {}, eng._now()
  for _, id in ipairs(eng._store:ids()) do
    list[#list + 1] = M.info(eng._store:get(id), now)
  end
  return list
end

function M.ended_add(eng, s, why)
  local rec = M.info(s, eng._now())
  rec.running, rec.age_ms, rec.ended, rec.reason = false, nil, true, why
  eng._ended[s.id] = rec
  local order = eng._ended_order
  order[#order + 1] = s.id
  if #order > 2 * KEEP_ENDED then
    local kept = {}
    for i, id in ipairs(order) do
      if i > #order - KEEP_ENDED then
        kept[#kept + 1] = id
      else
        eng._ended[id], eng._carry[id] = nil, nil
      end
    end
    eng._ended_order = kept
  end
end

-- What became of a session that is gone, for an error about its id.
local GONE = {
  exited = "ended: the process exited (an earlier result gave its exit code)",
  timed_out = "ended: it ran past its timeout_ms and was ended",
  terminated = "was ended by terminate",
  pruned = "was ended to make room for a new one (the least recently used of too many)",
  shutdown = "ended with the server",
}

--- The error about id `id` that names no session now (`unknown`, Codex's words), with what
--- became of its session when the engine remembers it.
---@return string
function M.gone(eng, id, unknown)
  local rec = eng._ended[id]
  if not rec then return unknown end
  return ("%s: its session %s"):format(unknown, GONE[rec.reason] or "ended")
end

--- See Engine:describe.
function M.describe(eng, id)
  local s = eng._store:get(id)
  if s then return M.info(s, eng._now()) end
  local rec = eng._ended[id]
  if not rec then return nil end
  local copy = {}
  for k, v in pairs(rec) do copy[k] = v end
  return copy
end

-- Whether `path` is a log this engine named (in a result, or as a session's log).
local function known_log(self, path)
  if self._logs[path] then return true end
  for _, id in ipairs(self._store:ids()) do
    if self._store:get(id).log == path then return true end
  end
  for _, rec in pairs(self._ended) do
    if rec.log == path then return true end
  end
  return false
end

local function read_file(path, offset, length)
  local fd = uv.fs_open(path, "r", 0)
  if not fd then return nil end
  local st = uv.fs_fstat(fd)
  local data = ""
  if st and offset < st.size and length > 0 then
    data = uv.fs_read(fd, math.min(length, st.size - offset), offset) or ""
  end
  uv.fs_close(fd)
  return data, st and st.size or 0
end

local GREP_SCAN_MAX = 64 * 1024 * 1024 -- the most bytes one grep looks at

-- read_output's arguments; or nil and the error text.
local function read_args(args)
  if type(args) ~= "table" then
    return nil, "failed to parse function arguments: expected an object, got " .. type(args)
  end
  local a = {}
  for _, f in ipairs({ { "session_id", "integer" }, { "log", "string" }, { "offset", "integer" },
    { "length", "integer" }, { "grep", "string" }, { "context", "integer" },
    { "max_matches", "integer" }, { "clean", "boolean" } }) do
    local lim = f[2] == "integer" and { min = 0 } or nil
    if f[1] == "context" then lim.max = search.MAX_CONTEXT end
    if f[1] == "max_matches" then lim = { min = 1, max = search.MAX_MATCHES } end
    local v, err = policy.arg(args, f[1], f[2], lim)
    if err then return nil, err end
    a[f[1]] = v
  end
  if not a.session_id and not a.log then
    return nil, "failed to parse function arguments: give `session_id` or `log`"
  end
  if a.grep then
    local re, rerr = args_mod.compile_until(a.grep)
    if not re then return nil, (rerr:gsub("`until`", "`grep`")) end
    a.re = re
  end
  return a
end

--- See Engine:read_output.
function M.read_output(self, args, max_bytes)
  local a, err = read_args(args)
  if not a then return nil, err end
  local id, log, offset = a.session_id, a.log, a.offset or 0
  local s = id and self._store:get(id)
  local meta = s or (id and self._ended[id])
  if id and not meta then return nil, ("Unknown process id %d"):format(id) end
  if log and not (meta and meta.log == log) and not known_log(self, log) then
    return nil, ("unknown log %s: read_output reads only logs this server named"):format(log)
  end
  log = log or meta.log
  local read, total -- a reader of the output's bytes, and how many there are
  if log and uv.fs_stat(log) then
    total = uv.fs_stat(log).size
    read = function(off, n) return (read_file(log, off, n)) end
  elseif s and not s.closed then
    local okt, snap = pcall(s.p.snapshot, s.p)
    total = okt and snap.total or 0
    log = nil
    read = function(off, n)
      local ok, d = pcall(s.p.read_range, s.p, off, n)
      return ok and d or nil
    end
  else
    return nil, ("the output of %s is gone: the session ended and its log was removed")
      :format(id and ("session %d"):format(id) or log)
  end
  local res = { total = total, log = log, offset = offset, session_id = id }
  if a.re then
    local to = math.min(total, offset + math.min(a.length or GREP_SCAN_MAX, GREP_SCAN_MAX))
    res.grep = search.grep(read, offset, to, a.re, { context = a.context or 0,
      max = a.max_matches or search.DEFAULT_MATCHES, clean = a.clean ~= false })
    res.next_offset = res.grep.next_offset
    return res
  end
  local length = math.min(a.length or 65536, max_bytes or math.huge)
  local data = ""
  if offset < total and length > 0 then
    data = read(offset, math.min(length, total - offset))
    if not data then return nil, ("cannot read the output of %s"):format(log or "the session") end
  end
  res.next_offset = offset + #data
  if a.clean then
    -- (a sequence cut at the end of the range is held back: next_offset says where it starts)
    local out = clean.output()
    local stop = clean.new():feed(out, data, offset, res.next_offset >= total)
    res.data, res.next_offset, res.cleaned = clean.text(out), stop, true
  else
    res.data = data
  end
  return res
end

--- exec_command's and write_stdin's `grep`: the lines of this result's output bytes
--- (log_from..log_offset, the part the cut removed included) that match, with `context` lines
--- around each (a.grep_re, a.context), as res.grep = {pattern, matches, complete, from, to}.
---@param s table  the session
---@param a table  the checked arguments
---@param res luxec.ExecResult
function M.grep_result(s, a, res)
  if not a.grep_re or not res.log_offset then return end
  local read
  if s.log and uv.fs_stat(s.log) then
    read = function(off, n) return (read_file(s.log, off, n)) end
  elseif not s.closed then
    read = function(off, n)
      local ok, d = pcall(s.p.read_range, s.p, off, n)
      return ok and d or nil
    end
  else
    res.warnings[#res.warnings + 1] = "`grep` found no output to search (the log is gone)"
    return
  end
  local g = search.grep(read, res.log_from, res.log_offset, a.grep_re, { context = a.context
    or 0, max = search.DEFAULT_MATCHES, clean = true })
  res.grep = { pattern = a.grep, matches = g.matches, complete = g.complete,
    from = res.log_from, to = res.log_offset, next_offset = g.next_offset }
end

--- The log directory the engine made (not one the configuration named), with the logs in it.
function M.remove_logs(self)
  if not self._log_dir or self._cfg.log_dir then return end
  local st = uv.fs_lstat(self._log_dir) -- the directory made, never what replaced it
  if not st or st.type ~= "directory" then return end
  local req = uv.fs_scandir(self._log_dir)
  while req do
    local name = uv.fs_scandir_next(req)
    if not name then break end
    os.remove(self._log_dir .. "/" .. name)
  end
  uv.fs_rmdir(self._log_dir)
end

return M
