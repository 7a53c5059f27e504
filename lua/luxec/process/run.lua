--- luxec.run: a command to completion, on luxec.spawn.
local options = require("luxec.process.options")
local process = require("luxec.process")

local M = {}

local RUN_OPTIONS = { input = "string" }

---@class luxec.RunOptions: luxec.SpawnOptions
---@field timeout number|false|nil  seconds before it is terminated (false or nil: no limit)
---@field input string|nil  written to stdin, then EOF

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

--- Run a command to completion: {code, signal, signal_name, output, stderr, dropped,
--- timed_out, sandbox, ...}; sandbox is status().sandbox of a sandboxed run (layers,
--- denials, protected and masked paths), else nil. opts: every spawn option, plus timeout
--- (seconds, or false for none) and input (written to stdin, then EOF).
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
  if sopts.stdin == nil then
    sopts.stdin = opts.input and "pipe" or "null"
  end
  local p, err, code = process._spawn_at(2, argv, sopts)
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
  local timed_out = false
  if not p:wait({ timeout = opts.timeout }) then
    timed_out = true
    p:terminate({ grace_ms = 0 })
  end
  local st = p:status()
  local out, dropped = p:read(1)
  local res = {
    code = st.code, signal = st.signal, signal_name = st.signal_name,
    core_dumped = st.core_dumped, output = out, dropped = dropped, timed_out = timed_out,
    holders = st.holders, pid = st.pid,
    sandbox = st.sandbox, -- the core's report: layers, denials, protected and masked paths
  }
  if st.tty == false and sopts.stderr == "pipe" then
    res.stderr, res.stderr_dropped = p:read(2)
  end
  p:close()
  return res
end

return M
