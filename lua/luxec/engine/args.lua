--- luxec.engine.args: checking the arguments of exec_command and write_stdin — Codex's
--- (cmd, workdir, shell, login, tty, yield_time_ms, max_output_tokens; session_id, chars)
--- and luxec's (timeout_ms, clean, until, input, keep). Errors carry Codex's prefix
--- ("failed to parse function arguments: ..."), naming the argument.
local policy = require("luxec.engine.policy")

local M = {}

local MAX_MS = (1 << 31) - 1 -- a yield, budget or timeout above this is not a number anyone meant
M.MAX_MS = MAX_MS

local PREFIX = "failed to parse function arguments: "

--- How far before the output that just arrived a match of `until` may start (bytes of text).
M.UNTIL_WINDOW = 16384

local KEEP = { head = true, tail = true, both = true }

local rex -- rex_pcre2, loaded with the first `until`

--- Compile an `until` (or grep) regex: PCRE2, multi-line (^ and $ at each line). The
--- compiled regex, or nil and the error text.
---@param src string
---@return userdata|nil, string|nil
function M.compile_until(src)
  if src == "" then return nil, PREFIX .. "`until` is empty" end
  if not rex then
    local ok, mod = pcall(require, "rex_pcre2")
    if not ok then
      return nil, "`until` needs lua-rex-pcre2 (require \"rex_pcre2\" failed: " .. tostring(mod)
        .. ")"
    end
    rex = mod
  end
  local ok, re = pcall(rex.new, src, "m") -- (^ and $ match at line ends)
  if not ok then
    return nil, PREFIX .. ("invalid regex %q for `until`: %s"):format(src, tostring(re))
  end
  return re
end

local function parse_common(args, res)
  local err
  res.yield, err = policy.arg(args, "yield_time_ms", "integer", { min = 0, max = MAX_MS })
  if err then return nil, err end
  res.tokens, err = policy.arg(args, "max_output_tokens", "integer", { min = 0, max = MAX_MS })
  if err then return nil, err end
  res.keep, err = policy.arg(args, "keep", "string")
  if err then return nil, err end
  if res.keep ~= nil and not KEEP[res.keep] then
    return nil, PREFIX .. ("invalid value: string %q for `keep`, expected \"head\", \"tail\" "
      .. "or \"both\""):format(res.keep)
  end
  res["until"], err = policy.arg(args, "until", "string")
  if err then return nil, err end
  if res["until"] then
    res.until_re, err = M.compile_until(res["until"])
    if not res.until_re then return nil, err end
  end
  return res
end

local function not_object(args)
  return PREFIX .. "expected an object, got " .. type(args)
end

--- exec_command's arguments, checked; or nil and the error text.
---@param args any
---@return table|nil, string|nil
function M.exec(args)
  if type(args) ~= "table" then return nil, not_object(args) end
  local a = {}
  local err
  for _, f in ipairs({ { "cmd", "string" }, { "workdir", "string" }, { "shell", "string" },
    { "login", "boolean" }, { "tty", "boolean" }, { "clean", "boolean" },
    { "input", "string" }, { "host", "string" } }) do
    a[f[1]], err = policy.arg(args, f[1], f[2], { required = f[1] == "cmd" })
    if err then return nil, err end
  end
  if a.cmd:find("^%s*$") then
    return nil, PREFIX .. "`cmd` is empty"
  elseif a.cmd:find("\0", 1, true) then
    return nil, PREFIX .. "`cmd` contains a NUL byte"
  end
  if a.input == "" then a.input = nil end
  a.timeout_ms, err = policy.arg(args, "timeout_ms", "integer", { min = 1, max = MAX_MS })
  if err then return nil, err end
  return parse_common(args, a)
end

--- write_stdin's arguments, checked against the engine's config; or nil and the error text.
---@param args any
---@param cfg table
---@return table|nil, string|nil
function M.write(args, cfg)
  if type(args) ~= "table" then return nil, not_object(args) end
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

return M
