--- luxec.engine.adopt: take into an engine a session that an earlier engine started and
--- that lives on elsewhere (a daemon's session, found again after the front end restarted):
--- it gets back its session id, and the next write_stdin returns its output from the start
--- (as far as the process still holds it), so nothing it printed meanwhile is lost.
local clean = require("luxec.engine.clean")

--- Store process `p` as session `id` of engine `eng`. info: cmd, cwd, tty, stdin_pipe,
--- sandboxed, clean (nil: the engine's default for its stdio), log, host, age_ms. Returns the
--- session, or nil and a message when the id is taken.
---@param eng luxec.ExecEngine
---@param id integer
---@param p luxec.Process
---@param info table
return function(eng, id, p, info)
  local cfg = eng._cfg
  if math.type(id) ~= "integer" then return nil, "a session id must be an integer" end
  if eng._store:get(id) then return nil, ("session id %d is taken"):format(id) end
  local tty = info.tty == true
  local do_clean = info.clean
  if do_clean == nil then do_clean = tty and cfg.clean_tty or (not tty and cfg.clean_pipe) end
  local s = {
    id = id, p = p, tty = tty, cmd = info.cmd or "?", cwd = info.cwd, log = info.log,
    log_max = cfg.log_max, host = info.host, started = eng._now() - (info.age_ms or 0),
    input_possible = tty or info.stdin_pipe == true, stdin_pipe = info.stdin_pipe == true,
    sandboxed = info.sandboxed == true,
    cleaner = clean.new({ strip = do_clean, collapse = do_clean }),
    raw_read = 0, raw_done = 0, tail = "", _queue = {}, _busy = 0, stored = true,
  }
  eng._store._used[id] = "reserved"
  local _, pruned = eng._store:add(id, s)
  if pruned then require("luxec.engine.session").kill(eng, pruned, "pruned") end
  return s
end
