--- luxec.engine.args: checking the arguments of exec_command and write_stdin — Codex's
--- (cmd, workdir, shell, login, tty, yield_time_ms, max_output_tokens; session_id, chars)
--- and luxec's (timeout_ms, clean, until, input, keep, grep, context, terminate). Errors carry
--- Codex's prefix ("failed to parse function arguments: ..."), naming the argument.
local policy = require("luxec.engine.policy")
local spelling = require("luxec.spelling")

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
  -- (any non-negative integer, as Codex's u64 and usize take them: clamped where used)
  res.yield, err = policy.arg(args, "yield_time_ms", "integer", { min = 0 })
  if err then return nil, err end
  res.tokens, err = policy.arg(args, "max_output_tokens", "integer", { min = 0 })
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
  res.grep, err = policy.arg(args, "grep", "string")
  if err then return nil, err end
  if res.grep then
    res.grep_re, err = M.compile_until(res.grep)
    if not res.grep_re then return nil, (err:gsub("`until`", "`grep`")) end
  end
  res.context, err = policy.arg(args, "context", "integer", { min = 0, max = M.MAX_CONTEXT })
  if err then return nil, err end
  return res
end

M.MAX_CONTEXT = 20
M.MAX_ANSWERS = 64 -- the most answers one `input` list holds
M.MAX_TERMINATE = 64

-- A list argument: an array of values of `kind` (at most `max`), or nil and the error text.
local function list_of(args, name, kind, max)
  local v = args[name]
  if v == nil then return nil end
  if type(v) ~= "table" then
    return nil, PREFIX .. ("invalid type: a %s for `%s`, expected an array"):format(type(v), name)
  end
  local n = #v
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      return nil, PREFIX .. ("invalid value: an object for `%s`, expected an array"):format(name)
    end
  end
  if n > max then
    return nil, PREFIX .. ("`%s` has %d items; at most %d"):format(name, n, max)
  end
  local out = {}
  for i = 1, n do
    local x, err = policy.arg(v, i, kind)
    if err then return nil, (err:gsub("for `" .. i .. "`", ("for `%s[%d]`"):format(name, i))) end
    out[i] = x
  end
  return out
end

-- The arguments each tool takes (Codex's own approval fields, which mean nothing here, are
-- taken without a word, as Codex's clients send them).
local CODEX_ONLY = { sandbox_permissions = true, justification = true, prefix_rule = true,
  with_escalated_permissions = true }
local KNOWN = {
  exec = { cmd = 1, workdir = 1, shell = 1, login = 1, tty = 1, clean = 1, host = 1, input = 1,
    terminate = 1, timeout_ms = 1, yield_time_ms = 1, max_output_tokens = 1, keep = 1,
    ["until"] = 1, grep = 1, context = 1, sandbox_permissions = 1, justification = 1,
    prefix_rule = 1, with_escalated_permissions = 1 },
  write = { session_id = 1, chars = 1, yield_time_ms = 1, max_output_tokens = 1, keep = 1,
    ["until"] = 1, grep = 1, context = 1 },
}

--- A warning naming the arguments `tool` ("exec" or "write") does not take (ignored, as
--- Codex ignores them), each with the one it may have meant; nil when there are none.
---@param tool "exec"|"write"
---@param args table
---@return string|nil
function M.unknown(tool, args)
  local known, names = KNOWN[tool], {}
  for k in pairs(args) do
    if not known[k] then
      local name = tostring(k)
      local best = spelling.nearest(name, known, function(n) return CODEX_ONLY[n] end)
      names[#names + 1] = ("`%s`%s"):format(name, best and (" (did you mean `%s`?)"):format(best)
        or "")
    end
  end
  if #names == 0 then return nil end
  table.sort(names)
  return ("Ignored: %s %s of %s"):format(table.concat(names, ", "),
    #names == 1 and "is not an argument" or "are not arguments",
    tool == "exec" and "exec_command" or "write_stdin")
end

--- A tool's result (and what follows it), with a warning naming the arguments it does not
--- take.
function M.with_unknown(tool, args, res, ...)
  if res and type(args) == "table" and type(res.warnings) == "table" then
    local w = M.unknown(tool, args)
    if w then res.warnings[#res.warnings + 1] = w end
  end
  return res, ...
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
    { "host", "string" } }) do
    a[f[1]], err = policy.arg(args, f[1], f[2], { required = f[1] == "cmd" })
    if err then return nil, err end
  end
  if a.cmd:find("^%s*$") then
    return nil, PREFIX .. "`cmd` is empty"
  elseif a.cmd:find("\0", 1, true) then
    return nil, PREFIX .. "`cmd` contains a NUL byte"
  end
  -- input: one answer (a string) or answers in order (an array of strings)
  if type(args.input) == "table" then
    a.input, err = list_of(args, "input", "string", M.MAX_ANSWERS)
    if err then return nil, err end
  else
    a.input, err = policy.arg(args, "input", "string")
    if err then return nil, (err:gsub("expected a string", "expected a string or an array of "
      .. "strings")) end
    a.input = a.input and { a.input }
  end
  if a.input then
    local kept = {}
    for _, x in ipairs(a.input) do
      if x ~= "" then kept[#kept + 1] = x end
    end
    a.input = kept[1] and kept or nil
  end
  a.terminate, err = list_of(args, "terminate", "integer", M.MAX_TERMINATE)
  if err then return nil, err end
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
