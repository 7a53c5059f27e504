--- luxec.engine.meta: what an engine tells of its sessions besides tool results — an open
--- or ended session's description (the engine keeps the last ended ones) and reading a
--- session's output back by byte offset, from its log or from memory. The engine's store
--- (luxec.engine.sessions) is the one registry; a front end asks here and keeps none.
local uv = require("luv")
local policy = require("luxec.engine.policy")

local M = {}

local KEEP_ENDED = 256 -- ended sessions `describe` and `read_output` still know

--- What describe tells of a session (live or ended).
function M.info(s, now)
  return { session_id = s.id, pid = s.p.pid, command = s.cmd, tty = s.tty, cwd = s.cwd,
    running = not s.closed and not s.p:finished(), age_ms = now - s.started, log = s.log }
end

--- Remember a session the model knew that is now gone (called when it is forgotten); past
--- KEEP_ENDED the oldest are forgotten, with what a cancelled call left for them.
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

--- See Engine:read_output.
function M.read_output(self, args, max_bytes)
  if type(args) ~= "table" then
    return nil, "failed to parse function arguments: expected an object, got " .. type(args)
  end
  local id, log, offset, length, err
  id, err = policy.arg(args, "session_id", "integer", { min = 0 })
  if not err then log, err = policy.arg(args, "log", "string") end
  if not err then offset, err = policy.arg(args, "offset", "integer", { min = 0 }) end
  if not err then length, err = policy.arg(args, "length", "integer", { min = 0 }) end
  if err then return nil, err end
  if not id and not log then
    return nil, "failed to parse function arguments: give `session_id` or `log`"
  end
  offset = offset or 0
  length = math.min(length or 65536, max_bytes or math.huge)
  local s = id and self._store:get(id)
  local meta = s or (id and self._ended[id])
  if id and not meta then return nil, ("Unknown process id %d"):format(id) end
  if log and not (meta and meta.log == log) and not known_log(self, log) then
    return nil, ("unknown log %s: read_output reads only logs this server named"):format(log)
  end
  log = log or meta.log
  local data, total
  if log then data, total = read_file(log, offset, length) end
  if not data and s and not s.closed then
    local ok, d, rerr = pcall(s.p.read_range, s.p, offset, length)
    if ok and d then
      local okt, snap = pcall(s.p.snapshot, s.p)
      data, total = d, okt and snap.total or offset + #d
      log = nil
    elseif ok then
      return nil, tostring(rerr)
    end
  end
  if not data then
    return nil, ("the output of %s is gone: the session ended and its log was removed")
      :format(id and ("session %d"):format(id) or log)
  end
  return { data = data, total = total, log = log, offset = offset, session_id = id }
end

return M
