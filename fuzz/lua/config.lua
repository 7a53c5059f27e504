--- fuzz_config: luxec.mcp.config on any configuration. A config file is Lua that returns a table;
--- the input is read as one of:
---   0, 1  a table tree (keys mostly the real ones, values of every type) for config.check;
---   2     the bytes of a config file for config.load (run with the restricted globals below);
---   3     a tree written out as a Lua file for config.load, which must agree with check.
--- Checked: either a configuration whose every key has its documented type and range (and
--- that the engine, instructions and describe accept), or an error string that names the
--- problem — never a Lua error from inside luxec ("attempt to …", "bad argument …", a file
--- position in lua/luxec/). What describe prints reads back as the same configuration.
---
--- Config files are trusted Lua (they hold the hooks); config.load runs them with the full
--- globals. Random bytes must not run os.execute, so for the raw files `_G` (which load's
--- environment falls back on) is a table of safe functions while the file runs.
local traced = require("lib.traced")
local Input = require("lib.input")
local native = require("fuzz.native")
-- The harness has no luxec.core: the search for repositories that checking a whole sandbox
-- policy runs (below the config's cwd, the target's empty tmpdir) finds none here; the search
-- itself is spec/native/sandbox_paths_spec's.
package.preload["luxec.core"] = package.preload["luxec.core"] or function()
  return { sandbox_scan = function() return {}, 1 end }
end
local sandbox = require("luxec.sandbox")
local policy = require("luxec.engine.policy")
local config = traced.module(require("luxec.mcp.config"))

native.set_budget(5 * 1000 * 1000) -- a config file may loop: 5 M instructions is plenty

local PATH = native.tmpdir .. "/config.lua"
local MiB = 1024 * 1024

local q, check = require("lib.check").q, require("lib.check").check

-- What a configuration may hold, as this checker reads config.lua's documentation.
local SECTIONS = {
  env = { inherit = { "all", "core", "none" }, default_excludes = "boolean",
    exclude = "string_list", set = "string_map", include_only = "string_list",
    forced = "string_map", extra = "string_map" },
  output = { clean_pipe = "boolean", clean_tty = "boolean",
    truncation = { "luxec", "codex-tokens", "codex-bytes" }, text = { "luxec", "codex" },
    chunk_id = "boolean", max_output_tokens = "count",
    max_output_tokens_limit = "count", head = "count", tail = "count", log = "boolean",
    log_max = "count", log_dir = "string" },
  exec = { max_sessions = "positive", protect_recent = "count", warn_at = "count",
    exec_yield_ms = "count", write_yield_ms = "count", min_yield_ms = "count",
    max_yield_ms = "count", poll_min_ms = "count", poll_max_ms = "count", settle_ms = "count",
    early_exit_ms = "count", drain_ms = "count", early_return = "boolean",
    input_poll_ms = "positive", input_quiet_ms = "count", timeout_ms = "positive",
    kill_grace_ms = "count", rows = "positive", cols = "positive",
    pipe_stdin = { "null", "pipe" }, max_chars = "positive", deterministic = "boolean" },
  server = { progress_interval_ms = "positive", cancel = { "keep", "kill" },
    max_message_bytes = "positive", read_output_max_bytes = "positive",
    list_ttl_ms = "count", list_cache_scope = { "public", "private" },
    instructions = "string", log = { "off", "error", "warn", "info", "debug" },
    http_header_bytes = "positive", http_request_timeout_ms = "positive",
    http_max_queued_bytes = "positive", http_max_sessions = "positive",
    http_max_connections = "positive",
    http_keepalive_ms = "positive", http_replay_bytes = "positive", http_retry_ms = "positive" },
}
local TOP = { "sandbox", "cwd", "shell", "login", "allow_login_shell", "env", "output", "exec",
  "server", "on_command", "on_input", "on_denial" }
local TOP_SET = {}
for _, k in ipairs(TOP) do TOP_SET[k] = true end

-- Decoding a tree -------------------------------------------------------------------------

local function keys_of(t)
  local list = {}
  for k in pairs(t) do list[#list + 1] = k end
  table.sort(list)
  return list
end

local KEYSETS = {
  top = TOP,
  sandbox = { "mode", "network", "roots", "best_effort", "evidence", "tmp", "workspace" },
  evidence = { "network", "files" },
}
for name, fields in pairs(SECTIONS) do KEYSETS[name] = keys_of(fields) end
local JUNK_KEYS = { "", "Exec", "exec_yield", "max_sesions", "sandbox", 1, 2, 3, 1.5, true, {} }

local STRINGS = { "luxec", "codex-tokens", "codex-bytes", "workspace-write", "read-only",
  "full-access", "deny", "allow", "keep", "kill", "pipe", "null", "all", "core", "none",
  "public", "private", "off", "error", "warn", "info", "debug", "/", "/tmp", "/bin/sh", "sh",
  "bash", "/nonexistent", "lua", "..", ".", "", "A=B", "*KEY*", "HOME", "x\0y", "/dev/null",
  "/etc/passwd", "PATH", "é", "\255" }
local INTEGERS = { 0, 1, -1, 2, 3, 15, 1023, 1024, 1025, 4096, 16 * MiB, 16 * MiB + 1,
  (1 << 31) - 1, 1 << 31, math.maxinteger, math.mininteger }
local FLOATS = { 0.5, 1.0, -0.0, 1e300, math.huge, -math.huge, 0 / 0, 3.0, 2.0 ^ 53, 2.0 ^ 63,
  1024.0, -1.5 }

local function noop() end
local function raises() error("a hook that raises") end

local decode_value

local function decode_table(inp, depth, keyset)
  local t = {}
  local keys = KEYSETS[keyset] or KEYSETS.top
  for _ = 1, inp:byte() % 7 do
    local b = inp:byte()
    local k
    if b < 200 then
      k = keys[b % #keys + 1]
    elseif b < 240 then
      k = JUNK_KEYS[b % #JUNK_KEYS + 1]
    else
      k = #t + 1 -- a list
    end
    t[k] = decode_value(inp, depth + 1, type(k) == "string" and k or nil)
  end
  return t
end

decode_value = function(inp, depth, key)
  local tag = inp:byte() % 12
  if tag == 0 then return inp:byte() % 2 == 0 end
  if tag == 1 then return inp:pick(INTEGERS) end
  if tag == 2 then return inp:byte() * (inp:byte() % 2 == 0 and 1 or 1000) end
  if tag == 3 then return inp:pick(FLOATS) end
  if tag <= 5 then return inp:pick(STRINGS) end
  if tag == 6 then return inp:bytes(inp:byte() % 16) end
  if tag == 7 then return inp:byte() % 2 == 0 and noop or raises end
  if depth >= 4 then return nil end
  if tag == 8 then -- a list
    local t = {}
    for i = 1, inp:byte() % 4 do t[i] = decode_value(inp, 4, nil) end
    return t
  end
  return decode_table(inp, depth, key)
end

-- Writing a tree as a Lua file --------------------------------------------------------------

local function literal(v, out)
  local t = type(v)
  if t == "string" or t == "number" then
    out[#out + 1] = ("%q"):format(v)
  elseif t == "boolean" or t == "nil" then
    out[#out + 1] = tostring(v)
  elseif t == "function" then
    out[#out + 1] = v == noop and "function() end" or "function() error('a hook that raises') end"
  else
    out[#out + 1] = "{"
    for k, x in pairs(v) do
      out[#out + 1] = "["
      literal(k, out)
      out[#out + 1] = "]="
      literal(x, out)
      out[#out + 1] = ","
    end
    out[#out + 1] = "}"
  end
end

local function write_file(text)
  local f = assert(io.open(PATH, "wb"))
  f:write(text)
  f:close()
end

-- The globals a raw config file runs with: read-only views of the safe libraries.
local function read_only(lib)
  return setmetatable({}, { __index = lib, __newindex = function() error("read-only", 2) end })
end

local real_G = _G
local function safe_globals()
  return {
    string = read_only(string), table = read_only(table), math = read_only(math),
    utf8 = read_only(utf8), assert = assert, error = error, ipairs = ipairs, next = next,
    pairs = pairs, select = select, tonumber = tonumber, tostring = tostring,
    type = type, rawequal = rawequal, rawlen = rawlen, print = function() end,
    -- a pcall that does not catch the budget's error: a file that loops in a loop of pcalls
    -- would catch it every time and run forever (a timeout)
    pcall = function(...)
      local r = table.pack(pcall(...))
      if not r[1] and native.exceeded() then error(r[2], 0) end
      return table.unpack(r, 1, r.n)
    end,
    os = read_only({ getenv = os.getenv, time = os.time, clock = os.clock, date = os.date }),
  }
end

-- Checking a result --------------------------------------------------------------------------

-- An error from inside luxec rather than a message about the input. A Lua error raised in
-- luxec's code ("attempt to …", "bad argument …", an error() call) carries its position: the
-- short source of a file of lua/luxec/, as Lua prints it, then ":<line>:". Anything else in
-- the message may be the input's own text (a key, a path, a value, quoted or not), so only
-- that exact prefix counts, and a non-string error object (its tostring).
local LUXEC_SOURCES = {}
for name, mod in pairs(package.loaded) do
  if type(name) == "string" and name:find("^luxec%.") and type(mod) == "table" then
    for _, fn in pairs(mod) do
      if type(fn) == "function" then
        local info = debug.getinfo(fn, "S")
        if info.what == "Lua" then LUXEC_SOURCES[info.short_src] = true end
      end
    end
  end
end
assert(next(LUXEC_SOURCES), "no source file of luxec found")

local function internal(err)
  for src in pairs(LUXEC_SOURCES) do
    local at = err:find(src .. ":", 1, true)
    if at and err:find("^%d+:", at + #src + 1) then return true end
  end
  local own = err:gsub("^config: ", "", 1):gsub("^config " .. PATH:gsub("%p", "%%%0") .. ": ", "",
    1)
  return own == "nil" or own:find("^%a+: 0x%x+$") ~= nil
end

local function check_value(key, kind, v)
  if type(kind) == "table" then
    for _, ok in ipairs(kind) do
      if v == ok then return end
    end
    check(false, "%s = %s: not one of its values", key, q(v))
  elseif kind == "count" or kind == "positive" then
    check(math.type(v) == "integer" and v >= (kind == "count" and 0 or 1), "%s = %s", key, q(v))
  elseif kind == "string_list" then
    check(type(v) == "table", "%s is not a list", key)
    local n = #v
    for k, x in pairs(v) do
      check(math.type(k) == "integer" and k >= 1 and k <= n and type(x) == "string",
        "%s[%s] = %s", key, q(k), q(x))
    end
  elseif kind == "string_map" then
    check(type(v) == "table", "%s is not a table", key)
    for k, x in pairs(v) do
      check(type(k) == "string" and k:find("^[^=%z]+$") and type(x) == "string",
        "%s[%s] = %s", key, q(k), q(x))
    end
  else
    check(type(v) == kind, "%s = %s, a %s expected", key, q(v), kind)
  end
end

-- A configuration check accepted: every key as documented, and what uses it accepts it.
local function check_config(cfg)
  for k in pairs(cfg) do
    check(k == "source" or TOP_SET[k], "unknown key %s in the configuration", q(k))
  end
  for name, fields in pairs(SECTIONS) do
    check(type(cfg[name]) == "table", "no section %s", name)
    for k, v in pairs(cfg[name]) do
      check(fields[k], "unknown key %s.%s", name, q(k))
      check_value(name .. "." .. k, fields[k], v)
    end
  end
  check(type(cfg.cwd) == "string" and cfg.cwd:sub(1, 1) == "/", "cwd %s", q(cfg.cwd))
  check(cfg.shell == nil or type(cfg.shell) == "string", "shell %s", q(cfg.shell))
  check(type(cfg.login) == "boolean" and type(cfg.allow_login_shell) == "boolean", "login")
  for _, h in ipairs({ "on_command", "on_input", "on_denial" }) do
    check(cfg[h] == nil or type(cfg[h]) == "function", "%s is a %s", h, type(cfg[h]))
  end
  local e, s = cfg.exec, cfg.server
  check(e.min_yield_ms <= e.max_yield_ms and e.poll_min_ms <= e.poll_max_ms
    and e.protect_recent < e.max_sessions, "exec's limits contradict each other")
  check(s.max_message_bytes >= 1024 and s.read_output_max_bytes <= 16 * MiB
    and s.http_header_bytes >= 256, "server's limits")
  local ok, err = pcall(sandbox.resolve, cfg.sandbox, cfg.cwd, nil, false)
  check(ok, "the sandbox policy does not resolve: %s", q(err))
  ok, err = pcall(policy.config, config.engine_config(cfg))
  check(ok, "the engine rejects a configuration config accepted: %s", q(err))
  check(type(config.instructions(cfg)) == "string", "instructions")
  return config.describe(cfg)
end

local function has_function(v, seen)
  if type(v) == "function" then return true end
  if type(v) ~= "table" or seen[v] then return false end
  seen[v] = true
  for k, x in pairs(v) do
    if has_function(k, seen) or has_function(x, seen) then return true end
  end
  return false
end

-- Whether two effective configurations are the same (functions: both functions).
-- nil when a and b are the same configuration, else the path where they first differ.
local function differ(a, b, path)
  path = path or "config"
  if type(a) == "function" then return type(b) ~= "function" and path or nil end
  if type(a) ~= "table" or type(b) ~= "table" then
    if a == b or (a ~= a and b ~= b) then return nil end
    return ("%s: %s ~= %s"):format(path, q(a), q(b))
  end
  for k, v in pairs(a) do
    local d = differ(v, b[k], path .. "." .. tostring(k))
    if d then return d end
  end
  for k in pairs(b) do
    if a[k] == nil then return ("%s.%s: only in the second"):format(path, tostring(k)) end
  end
  return nil
end

local function same(a, b)
  return differ(a, b) == nil
end

local function effective(cfg)
  local t = {}
  for k, v in pairs(cfg) do
    if k ~= "source" and k ~= "sandbox" then t[k] = v end
  end
  local ok, spec = pcall(sandbox.resolve, cfg.sandbox, cfg.cwd, nil, false)
  if ok then spec.resolve_us = nil end -- (how long it took: a measurement, not the policy)
  t.sandbox = spec
  return t
end

-- describe prints the configuration as Lua (luxec mcp --check-config): it reads back as the
-- same one.
local function check_describe(cfg, text)
  check(type(text) == "string", "describe returned a %s", type(text))
  if has_function(cfg, {}) then return end -- "<function at …>" is for reading, not loading
  local chunk, err = load(text, "=describe", "t", {})
  check(chunk, "describe printed Lua that does not load: %s\n%s", q(err), text)
  local ok, t = pcall(chunk)
  check(ok and type(t) == "table", "describe printed Lua that fails: %s", q(t))
  local again, aerr = config.check(t, nil, "/")
  check(again, "describe printed a configuration check rejects: %s\n%s", q(aerr), text)
  if cfg.shell == nil then again.shell = nil end -- describe names the default shell
  local d = differ(effective(cfg), effective(again))
  check(d == nil, "describe printed another configuration (%s):\n%s", d, text)
end

local VERBOSE = os.getenv("FUZZ_VERBOSE")

local function check_outcome(cfg, err, how)
  if VERBOSE then io.stderr:write(how, ": ", cfg and "a configuration" or err, "\n") end
  if native.exceeded() then return end -- a file that loops: its own doing
  if cfg == nil then
    check(type(err) == "string" and err:find("^config[ :]") and #err > 8,
      "%s: not an error message: %s", how, q(err))
    if how == "load" and (err:find("the file raised an error", 1, true)
        or err:find("^config [^\n]*: line %d+:") or err:find("binary chunk", 1, true)) then
      return -- the file's own error (its positions are its own), or Lua's about it
    end
    if err:find("not enough memory", 1, true) then return end
    check(not internal(err), "%s: an internal error: %s", how, q(err))
    return
  end
  check(type(cfg) == "table", "%s returned a %s", how, type(cfg))
  -- (a file may spend most of the budget or the heap and still return a configuration: what
  -- is left may not be enough to check it)
  local ok, text = pcall(check_config, cfg)
  if not ok and (native.exceeded() or text:find("not enough memory", 1, true)) then return end
  check(ok, "%s", text)
  local dok, derr = pcall(check_describe, cfg, text)
  if not dok and (native.exceeded() or derr:find("not enough memory", 1, true)) then return end
  if not dok then error(derr, 0) end
end

return function(data)
  traced.off()
  local inp = Input.new(data)
  local mode = inp:byte() % 4
  if mode == 2 then -- a config file's bytes, run with safe globals
    write_file(inp:rest())
    real_G._G = safe_globals()
    local ok, cfg, err = pcall(config.load, PATH)
    real_G._G = real_G
    check(ok, "load raised: %s", q(cfg))
    return check_outcome(cfg, err, "load")
  end
  local tree = decode_table(inp, 0, "top")
  local cfg, err = config.check(tree, mode == 3 and PATH or nil, native.tmpdir)
  check_outcome(cfg, err, "check")
  if mode == 3 then -- the same tree from a file: load must agree with check
    local out = { "return " }
    literal(tree, out)
    write_file(table.concat(out))
    local lcfg, lerr = config.load(PATH)
    -- (with more than one bad key, which one the error names depends on the table's order)
    check((lcfg == nil) == (cfg == nil) and (cfg == nil or same(cfg, lcfg)),
      "load and check disagree: %s / %s", q(lerr), q(err))
    check_outcome(lcfg, lerr, "load")
  end
end
