--- luxec.run: a command to completion, on luxec.spawn.
local expect = require("luxec.auto.expect")
local options = require("luxec.process.options")
local process = require("luxec.process")
local uv = require("luv")

local M = {}

local RUN_OPTIONS = { input = "string", events = "table" }

---@class luxec.RunOptions: luxec.SpawnOptions
---@field timeout number|false|nil  seconds before it is terminated (false, nil or -1: no limit)
---@field input string|nil  written to stdin, then EOF
---@field events table|nil  pattern -> answer: a string to send, or fn(p, match, count)

---@class luxec.RunResult
---@field code integer|nil
---@field signal integer|nil
---@field signal_name string|nil
---@field core_dumped boolean|nil
---@field output string
---@field dropped integer
---@field stderr string|nil  with stderr = "pipe"
---@field stderr_dropped integer|nil
---@field timed_out boolean
---@field holders table|nil
---@field pid integer
---@field sandbox table|nil
---@field events integer|nil  with events: how many were answered
---@field stopped boolean|nil  with events: a function returned true and the run ended it

-- events as given -> the patterns (checked, in a fixed order) and the answers. A list of
-- {pattern, answer} keeps its order; a table pattern -> answer is sorted by pattern text.
local function check_events(events)
  local list = {}
  if events[1] ~= nil then
    for i, e in ipairs(events) do
      if type(e) ~= "table" or e[1] == nil or e[2] == nil then
        error(("bad option 'events' to 'run' (entry %d: {pattern, answer} expected)")
          :format(i), 0)
      end
      list[i] = { e[1], e[2] }
    end
  else
    for k, v in pairs(events) do
      list[#list + 1] = { k, v }
    end
    local function text(pat)
      return type(pat) == "string" and pat or (pat.re or pat.lua or "")
    end
    table.sort(list, function(a, b) return text(a[1]) < text(b[1]) end)
  end
  if #list == 0 then error("bad option 'events' to 'run' (no event given)", 0) end
  local pats, answers = {}, {}
  for i, e in ipairs(list) do
    if e[1] == expect.EOF or e[1] == expect.TIMEOUT then
      error(("bad option 'events' to 'run' (%s is not an event: the end of the output ends " ..
        "the run, and run's timeout ends it too)"):format(tostring(e[1])), 0)
    end
    if type(e[2]) ~= "string" and type(e[2]) ~= "function" then
      error(("bad option 'events' to 'run' (the answer to %s must be a string or a " ..
        "function, got %s)"):format(type(e[1]) == "string" and ("%q"):format(e[1])
        or "a pattern", type(e[2])), 0)
    end
    pats[i], answers[i] = e[1], e[2]
  end
  local ok, err = pcall(expect.compile, "run", pats)
  if not ok then
    error((tostring(err):gsub("^bad argument #1 to 'run' %(", "bad option 'events' to 'run' (")),
      0)
  end
  pats[#pats + 1] = expect.EOF
  return pats, answers
end

-- Answer the events until the output ends: count, stopped, timed_out. An error raised by an
-- answer function propagates (run closes the session).
local function answer_events(p, pats, answers, timeout_ms)
  local deadline = timeout_ms and uv.hrtime() / 1e6 + timeout_ms
  local count = 0
  while true do
    local left = deadline and math.max(0, deadline - uv.hrtime() / 1e6) / 1000
    local i, m = p:expect(pats, { timeout = left or false })
    if i == nil then return count, false, true end -- the timeout passed
    if i == #pats then return count, false, false end -- EOF
    local answer = answers[i]
    count = count + 1
    if type(answer) == "function" then
      -- (count - 1: the events answered before this one, pexpect's event_count)
      local r = answer(p, m, count - 1)
      if r ~= nil and r ~= false and type(r) ~= "string" then return count, true, false end
      answer = r or nil
    end
    -- (A program that ended first leaves nobody to read it: the send returns EPIPE, and the
    -- next expect finds the EOF.)
    if answer then p:send(answer) end
  end
end

--- Run a command to completion: {code, signal, signal_name, output, stderr, dropped,
--- timed_out, sandbox, ...}; sandbox is status().sandbox of a sandboxed run (layers,
--- denials, protected and masked paths), else nil. opts: every spawn option, plus timeout
--- (seconds, or false for none; -1 is the default, none, as pexpect's run(timeout=-1)) and
--- input (written to stdin, then EOF).
--- events (pexpect's run with events): {[pattern] = answer} or {{pattern, answer}, ...};
--- whenever the output matches a pattern (as p:expect takes them: a plain string, {re =},
--- {lua =}), its answer is sent — a string as it is, or a function fn(p, match, count) (count:
--- the events answered before this one, 0 at the first, as pexpect's event_count) whose
--- string result is sent, whose nil or false sends nothing, and whose any other result (true)
--- ends the run (the program is terminated; result.stopped is true), as in pexpect.
--- result.events counts the answers. With events the program runs on a terminal unless tty =
--- false is given.
---@param argv string[]
---@param opts luxec.RunOptions|nil
---@return luxec.RunResult|nil, string|nil, string|nil
function M.run(argv, opts)
  local checked, why = pcall(options.check_argv, "run", argv)
  if not checked then
    error(why, 2)
  end
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument #2 to 'run' (options must be a table, got " .. type(opts) .. ")", 2)
  end
  -- (timeout = -1: run's default, no limit, as pexpect's run(timeout=-1) keeps its default)
  if opts and opts.timeout == -1 then
    local copy = {}
    for k, v in pairs(opts) do copy[k] = v end
    copy.timeout = nil
    opts = copy
  end
  local sopts = {}
  for k, v in pairs(opts or {}) do
    if k == "timeout" then
      local okt, terr = pcall(process.timeout_ms, "run", v)
      if not okt then error(terr, 2) end
    elseif RUN_OPTIONS[k] then
      local okt, terr = pcall(options.check_type, "run", k, v, RUN_OPTIONS[k])
      if not okt then error(terr, 2) end
    else
      sopts[k] = v
    end
  end
  opts = opts or {}
  local pats, answers
  if opts.events then
    local okp, perr, a = pcall(check_events, opts.events)
    if not okp then error(perr, 2) end
    pats, answers = perr, a
    if sopts.tty == nil then sopts.tty = true end
  end
  if sopts.stdin == nil and not sopts.tty then
    sopts.stdin = (opts.input or pats) and "pipe" or "null"
  end
  local p, err, code = process._spawn_at(2, argv, sopts, "run")
  if not p then
    return nil, err, code
  end
  if opts.input then
    local ok, werr, wcode = p:write(opts.input)
    if ok then
      p:close_stdin()
    elseif wcode ~= "EPIPE" then
      p:close()
      return nil, werr, wcode
    end
  end
  -- Whatever ends the wait early (an error raised by an answer, the prompt's Ctrl-C) ends
  -- the program too: nothing run started outlives the call.
  local ok, timed_out, count, stopped = pcall(function()
    local to, c, st = false, nil, nil
    if pats then
      c, st, to = answer_events(p, pats, answers, process.timeout_ms("run", opts.timeout))
    end
    if st or to then
      p:terminate({ grace_ms = 0 })
    elseif not p:wait({ timeout = opts.timeout }) then
      to = true
      p:terminate({ grace_ms = 0 })
    end
    return to, c, st
  end)
  if not ok then
    p:close()
    error(timed_out, 0)
  end
  local st = p:status()
  local out, dropped = p:read(1)
  local res = {
    code = st.code, signal = st.signal, signal_name = st.signal_name,
    core_dumped = st.core_dumped, output = out, dropped = dropped, timed_out = timed_out,
    holders = st.holders, pid = st.pid,
    sandbox = st.sandbox, -- the core's report: layers, denials, protected and masked paths
    events = count, stopped = stopped,
  }
  if st.tty == false and sopts.stderr == "pipe" then
    res.stderr, res.stderr_dropped = p:read(2)
  end
  p:close()
  return res
end

return M
