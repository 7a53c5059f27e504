--- luxec.mcp.config: the configuration of `luxec mcp`. A config file is Lua that returns a table;
--- every key is checked at start (unknown keys, types, ranges, the sandbox policy, that
--- `cwd` and `shell` exist) and an error names the key: `exec.max_sessions: expected an
--- integer >= 1, got 0`. What is not given keeps a safe default: workspace-write with the
--- network denied, variables that look like secrets (*KEY*, *SECRET*, *TOKEN*) not passed on.
---
---   local config = require("luxec.mcp.config")
---   local cfg = assert(config.load("luxec-mcp.lua"))   -- or config.check({...}) for a table
---   print(config.describe(cfg))                        -- what `--check-config` prints
local uv = require("luv")
local sandbox = require("luxec.sandbox")
local policy = require("luxec.engine.policy")
local cs = require("luxec.mcp.config_sandbox")
local spelling = require("luxec.spelling")

local M = {}

local MiB = 1024 * 1024

-- Every key a config may hold: a kind, or a table of fields for a section.
local SCHEMA = {
  sandbox = "sandbox",
  cwd = "dir",
  shell = "shell",
  login = "boolean",
  allow_login_shell = "boolean",
  env = {
    inherit = { "all", "core", "none" },
    default_excludes = "boolean",
    exclude = "string_list",
    set = "string_map",
    include_only = "string_list",
    forced = "string_map",
    extra = "string_map",
  },
  output = {
    clean_pipe = "boolean",
    clean_tty = "boolean",
    truncation = { "luxec", "codex-tokens", "codex-bytes" },
    text = { "luxec", "codex" },
    chunk_id = "boolean",
    max_output_tokens = "count",
    max_output_tokens_limit = "count",
    head = "count",
    tail = "count",
    log = "boolean",
    log_max = "count",
    log_dir = "string",
  },
  exec = {
    max_sessions = "positive",
    protect_recent = "count",
    warn_at = "count",
    exec_yield_ms = "count",
    write_yield_ms = "count",
    min_yield_ms = "count",
    max_yield_ms = "count",
    poll_min_ms = "count",
    poll_max_ms = "count",
    settle_ms = "count",
    early_exit_ms = "count",
    drain_ms = "count",
    early_return = "boolean",
    input_poll_ms = "positive",
    input_quiet_ms = "count",
    timeout_ms = "positive",
    kill_grace_ms = "count",
    rows = "positive",
    cols = "positive",
    pipe_stdin = { "null", "pipe" },
    max_chars = "positive",
    deterministic = "boolean",
  },
  server = {
    progress_interval_ms = "positive",
    cancel = { "keep", "kill" },
    max_message_bytes = "positive",
    read_output_max_bytes = "positive",
    list_ttl_ms = "count",
    list_cache_scope = { "public", "private" },
    instructions = "string",
    log = { "off", "error", "warn", "info", "debug" },
    http_header_bytes = "positive",
    http_request_timeout_ms = "positive",
    http_max_queued_bytes = "positive",
    http_max_sessions = "positive",
    http_max_connections = "positive",
    http_keepalive_ms = "positive",
    http_replay_bytes = "positive",
    http_retry_ms = "positive",
  },
  on_command = "function",
  on_input = "function",
  on_denial = "function",
  hosts = "hosts", -- (luxec.mcp.remote checks these two)
  daemon = "daemon",
}

-- The order sections and keys are printed in (the rest follow, sorted).
local ORDER = { "sandbox", "cwd", "shell", "login", "allow_login_shell", "env", "output", "exec",
  "server", "on_command", "on_input", "on_denial", "hosts", "daemon" }

local TOOLS_TEXT = "Run shell commands with exec_command; when it returns a session_id the "
  .. "process is still running: send it input (tty=true for interactive programs) or poll it "
  .. "with write_stdin. read_output pages through output that was truncated; list_sessions and "
  .. "terminate_session manage running processes."

--- The instructions the server gives clients (server.instructions, else a text that says
--- what the sandbox lets commands do).
---@param cfg table  an effective configuration
---@return string
function M.instructions(cfg)
  if cfg.server.instructions then return cfg.server.instructions end
  local sb = cfg.sandbox
  local ok, spec = pcall(sandbox.resolve, sb, cfg.cwd, nil, false)
  local where
  if sb.mode == "full-access" then
    where = "Commands run unconfined"
  elseif sb.mode == "read-only" or not ok then
    where = "Commands run in a read-only sandbox: they can write nothing"
  else
    where = ("Commands run in a sandbox: only %s are writable"):format(table.concat(spec.roots,
      ", "))
  end
  local net = ok and (spec.net and "; the network reaches only the hosts named (" ..
    sandbox.network_text(spec.net):gsub("^by name: ", "") .. ") through a proxy"
    or spec.network == "deny" and "; the network is denied") or ""
  local field = sb.mode ~= "full-access" and "; a result's sandbox field names what was denied"
    or ""
  return ("%s Commands run in %s%s%s%s."):format(TOOLS_TEXT, cfg.cwd,
    (where:gsub("^Commands run", "")), net, field)
end

--- The defaults (a fresh table): what `luxec mcp` runs with when no file is given.
---@return table
function M.defaults()
  local d = policy.defaults
  local function pick(section)
    local t = {}
    for k in pairs(SCHEMA[section]) do t[k] = d[k] end
    return t
  end
  local exec = pick("exec")
  local output = pick("output")
  output.max_output_tokens_limit = 250000 -- a response stays well under a client's 10 MiB
  return {
    sandbox = { mode = "workspace-write", network = "deny" },
    cwd = uv.cwd(),
    shell = nil,
    login = d.login,
    allow_login_shell = d.allow_login_shell,
    env = {
      inherit = "all", default_excludes = true, exclude = {}, set = {}, include_only = {},
      forced = policy.FORCED_ENV, extra = policy.EXTRA_ENV,
    },
    output = output,
    exec = exec,
    server = {
      progress_interval_ms = 1000, cancel = "keep", max_message_bytes = 64 * MiB,
      read_output_max_bytes = 1 * MiB, list_ttl_ms = 300000, list_cache_scope = "private",
      log = "info", http_header_bytes = 16 * 1024, http_request_timeout_ms = 30000,
      http_max_queued_bytes = 16 * MiB, http_max_sessions = 64, http_max_connections = 256,
      http_keepalive_ms = 25000, http_replay_bytes = 4 * MiB, http_retry_ms = 1000,
    },
  }
end

-- Errors -----------------------------------------------------------------------------------

local function describe_value(v)
  if type(v) == "string" then
    return ("%q"):format(#v > 40 and v:sub(1, 40) .. "..." or v)
  elseif type(v) == "table" or type(v) == "function" then
    return "a " .. type(v)
  end
  return tostring(v)
end

local function suggest(key, fields)
  local best, best_d
  for k in pairs(fields) do -- (within two edits only: a config key is short)
    local d = spelling.distance(key:lower(), k)
    if d <= 2 and (not best_d or d < best_d or (d == best_d and k < best)) then
      best, best_d = k, d
    end
  end
  return best and (" (did you mean '%s'?)"):format(best) or ""
end

-- A check collects every problem it finds: `note` adds one, `fail` adds one and gives up on
-- the value at hand (the others are still checked). The list is M.check's, for one call.
local problems
local GIVE_UP = setmetatable({}, { __tostring = function() return "(config value given up)" end })

local function note(key, fmt, ...)
  problems[#problems + 1] = { key = key, msg = fmt:format(...) }
end

local function fail(key, fmt, ...)
  note(key, fmt, ...)
  error(GIVE_UP, 0)
end

-- fn(...) -> true, its result; or false when it gave up (what it found is noted).
local function attempt(fn, ...)
  local ok, r = pcall(fn, ...)
  if ok then return true, r end
  if r ~= GIVE_UP then error(r, 0) end
  return false
end

-- Checks -----------------------------------------------------------------------------------

local function check_enum(key, v, values)
  for _, ok in ipairs(values) do
    if v == ok then return v end
  end
  local quoted = {}
  for i, ok in ipairs(values) do quoted[i] = ("%q"):format(ok) end
  fail(key, "expected one of %s, got %s", table.concat(quoted, ", "), describe_value(v))
end

local function check_string_list(key, v)
  if type(v) ~= "table" then fail(key, "expected a list of strings, got %s", describe_value(v)) end
  local n, before = #v, #problems
  for _, k in ipairs(cs.sorted_keys(v)) do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      note(key, "expected a list of strings, got a table with key %s", describe_value(k))
    elseif type(v[k]) ~= "string" then
      note(("%s[%d]"):format(key, k), "expected a string, got %s", describe_value(v[k]))
    end
  end
  local copy = {}
  for i = 1, n do
    if v[i] == nil then -- {"a", os.getenv("UNSET"), "c"}: ipairs would stop at the hole
      note(("%s[%d]"):format(key, i), "expected a string, got nil (a list cannot have holes)")
    end
    copy[i] = v[i]
  end
  if #problems > before then error(GIVE_UP, 0) end
  return copy
end

local function check_string_map(key, v)
  if type(v) ~= "table" then
    fail(key, "expected a table of NAME = \"value\", got %s", describe_value(v))
  end
  local copy, before = {}, #problems
  for _, k in ipairs(cs.sorted_keys(v)) do
    local item = v[k]
    if type(k) ~= "string" or not k:find("^[^=%z]+$") then
      note(key, "a variable name must be a non-empty string without '=', got %s",
        describe_value(k))
    elseif type(item) ~= "string" then
      note(("%s.%s"):format(key, k), "expected a string, got %s", describe_value(item))
    end
    copy[k] = item
  end
  if #problems > before then error(GIVE_UP, 0) end
  return copy
end

local function find_in_path(name)
  for dir in (os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
    local p = dir .. "/" .. name
    if uv.fs_access(p, "X") then return p end
  end
end

local function check_value(key, kind, v, base)
  if kind == "boolean" or kind == "string" or kind == "function" then
    if type(v) ~= kind then fail(key, "expected a %s, got %s", kind, describe_value(v)) end
    return v
  elseif kind == "count" or kind == "positive" then
    local n = type(v) == "number" and math.tointeger(v)
    local min = kind == "count" and 0 or 1
    if not n or n < min then
      fail(key, "expected an integer >= %d, got %s", min, describe_value(v))
    end
    return n
  elseif type(kind) == "table" and kind[1] then
    return check_enum(key, v, kind)
  elseif kind == "string_list" then
    return check_string_list(key, v)
  elseif kind == "string_map" then
    return check_string_map(key, v)
  elseif kind == "dir" then
    if type(v) ~= "string" or v == "" then
      fail(key, "expected a directory path, got %s", describe_value(v))
    end
    local path = v:sub(1, 1) == "/" and v or base .. "/" .. v
    local st = uv.fs_stat(path)
    if not st or st.type ~= "directory" then fail(key, "%q is not a directory", path) end
    return uv.fs_realpath(path) or path
  elseif kind == "shell" then
    if type(v) ~= "string" or v == "" then
      fail(key, "expected the path of a shell, got %s", describe_value(v))
    end
    local path = v:find("/", 1, true) and v or find_in_path(v)
    if not path or not uv.fs_access(path, "X") then
      fail(key, "%q is not an executable file", v)
    end
    return path
  elseif kind == "hosts" or kind == "daemon" then
    return require("luxec.mcp.remote")["check_" .. kind](key, v)
  elseif kind == "sandbox" then
    if v == false then return { mode = "full-access" } end
    if type(v) == "string" then v = { mode = v } end
    if type(v) ~= "table" then
      fail(key, "expected a sandbox policy table, a mode or false, got %s", describe_value(v))
    end
    local copy = {}
    for k, x in pairs(v) do copy[k] = x end
    return copy
  end
  error("config schema: unknown kind " .. tostring(kind))
end

-- Each key of a section on its own; `bad` collects the keys that had a problem.
local function check_section(name, fields, given, into, base, bad)
  if type(given) ~= "table" then
    bad[name] = true
    fail(name, "expected a table, got %s", describe_value(given))
  end
  for _, k in ipairs(cs.sorted_keys(given)) do
    local key = name .. "." .. tostring(k)
    local kind = type(k) == "string" and fields[k]
    if not kind then
      note(key, "unknown key%s", suggest(tostring(k), fields))
    else
      local ok, v = attempt(check_value, key, kind, given[k], base)
      if ok then into[k] = v else bad[key] = true end
    end
  end
end

-- Checks between keys, each made only when the keys it compares were good on their own.
local function cross_checks(cfg, bad)
  local function good(...)
    for _, key in ipairs({ ... }) do
      if bad[key] or bad[key:match("^[^.]+")] then return false end
    end
    return true
  end
  local e = cfg.exec
  if good("exec.min_yield_ms", "exec.max_yield_ms") and e.min_yield_ms > e.max_yield_ms then
    note("exec.min_yield_ms", "%d is above exec.max_yield_ms (%d)", e.min_yield_ms, e.max_yield_ms)
  end
  if good("exec.poll_min_ms", "exec.poll_max_ms") and e.poll_min_ms > e.poll_max_ms then
    note("exec.poll_min_ms", "%d is above exec.poll_max_ms (%d)", e.poll_min_ms, e.poll_max_ms)
  end
  if good("exec.protect_recent", "exec.max_sessions") and e.protect_recent >= e.max_sessions then
    note("exec.protect_recent", "%d leaves nothing to prune below exec.max_sessions (%d)",
      e.protect_recent, e.max_sessions)
  end
  local s = cfg.server
  if good("server.max_message_bytes") and s.max_message_bytes < 1024 then
    note("server.max_message_bytes", "expected at least 1024, got %d", s.max_message_bytes)
  end
  if good("server.http_header_bytes") and s.http_header_bytes < 256 then
    note("server.http_header_bytes", "expected at least 256, got %d", s.http_header_bytes)
  end
  if good("server.read_output_max_bytes") and s.read_output_max_bytes > 16 * MiB then
    note("server.read_output_max_bytes", "expected at most %d (16 MiB), got %d", 16 * MiB,
      s.read_output_max_bytes)
  end
  if good("sandbox", "cwd") then
    for _, msg in ipairs(cs.problems(cfg.sandbox, cfg.cwd)) do note("sandbox", "%s", msg) end
  end
end

--- Check a config table over the defaults. Returns the effective configuration, or nil and
--- every problem found, one line each naming its key (`config FILE: exec.rows: expected an
--- integer >= 1, got -1`), and the same as a list of {key =, msg =}. `source` names where the
--- table came from (the file), `base` is what a relative `cwd` is relative to (the file's
--- directory; the current one by default).
---@param t table
---@param source string|nil
---@param base string|nil
---@return table|nil cfg, string|nil err, {key: string, msg: string}[]|nil problems
function M.check(t, source, base)
  local prefix = source and ("config %s: "):format(source) or "config: "
  if type(t) ~= "table" then
    return nil, prefix .. ("the file must return a table, got %s"):format(describe_value(t))
  end
  local cfg = M.defaults()
  base = base or uv.cwd()
  local found, bad = {}, {}
  local outer = problems
  problems = found
  local ok, err = pcall(function()
    -- cwd first: the sandbox policy is checked against it
    if t.cwd ~= nil then
      local good, dir = attempt(check_value, "cwd", "dir", t.cwd, base)
      if good then cfg.cwd = dir else bad.cwd = true end
    end
    for _, k in ipairs(cs.sorted_keys(t)) do
      local kind = type(k) == "string" and SCHEMA[k]
      if not kind then
        note(tostring(k), "unknown key%s", suggest(tostring(k), SCHEMA))
      elseif type(kind) == "table" and not kind[1] then
        attempt(check_section, k, kind, t[k], cfg[k], base, bad)
      elseif k ~= "cwd" then
        local good, v = attempt(check_value, k, kind, t[k], base)
        if good then cfg[k] = v else bad[k] = true end
      end
    end
    cross_checks(cfg, bad)
    -- Codex's text brings Codex's truncation (by tokens unless by bytes), its chunk id and
    -- its CODEX_CI variable: the effective configuration says so (the engine does the same)
    if cfg.output.text == "codex" then
      if cfg.output.truncation == "luxec" then cfg.output.truncation = "codex-tokens" end
      cfg.output.chunk_id = true
      local forced = { CODEX_CI = "1" }
      for k, v in pairs(cfg.env.forced) do forced[k] = v end
      cfg.env.forced = forced
    end
  end)
  problems = outer
  if not ok then
    return nil, prefix .. tostring(err)
  end
  if #found > 0 then
    local lines = {}
    for i, p in ipairs(found) do lines[i] = ("%s%s: %s"):format(prefix, p.key, p.msg) end
    return nil, table.concat(lines, "\n"), found
  end
  cfg.source = source
  return cfg
end

--- Load and check a config file (Lua returning a table; it runs with the standard globals in
--- an environment of its own). Returns the effective configuration, or nil and an error.
---@param path string
---@return table|nil cfg, string|nil err
function M.load(path)
  local env = setmetatable({}, { __index = _G })
  local chunk, err = loadfile(path, "t", env)
  if not chunk then
    if not uv.fs_stat(path) then
      return nil, ("config %s: cannot read the file (%s)"):format(path, err)
    end
    return nil, ("config %s: %s"):format(path, (tostring(err):gsub("^" .. path:gsub("%p", "%%%0")
      .. ":", "line ")))
  end
  local ok, t = pcall(chunk)
  if not ok then
    return nil, ("config %s: the file raised an error: %s"):format(path, tostring(t))
  end
  local abs = path:sub(1, 1) == "/" and path or uv.cwd() .. "/" .. path
  return M.check(t, path, abs:match("^(.*)/[^/]*$") or "/")
end

--- A path as given on the command line (`--config`), absolute against the directory the
--- server started in.
---@param path string
---@return string
function M.abs(path)
  return path:sub(1, 1) == "/" and path or uv.cwd() .. "/" .. path
end

--- The options of luxec.engine.new for a configuration (the spawn seam is the caller's).
---@param cfg table  an effective configuration (from check or load)
---@return luxec.ExecConfig
function M.engine_config(cfg)
  local e = {
    shell = cfg.shell, login = cfg.login, allow_login_shell = cfg.allow_login_shell,
    cwd = cfg.cwd, sandbox = cfg.sandbox, on_denial = cfg.on_denial,
    -- the config file read-only for every command, whatever sandbox on_command gives it
    protect = cfg.source and { M.abs(cfg.source) } or nil,
    env = {
      inherit = cfg.env.inherit, default_excludes = cfg.env.default_excludes,
      exclude = cfg.env.exclude, set = cfg.env.set, include_only = cfg.env.include_only,
    },
    env_forced = cfg.env.forced, env_extra = cfg.env.extra,
  }
  for _, section in ipairs({ "output", "exec" }) do
    for k, v in pairs(cfg[section]) do e[k] = v end
  end
  return e
end

-- Printing ---------------------------------------------------------------------------------

local KEYWORDS = {}
for w in ("and break do else elseif end false for function goto if in local nil not or repeat "
  .. "return then true until while"):gmatch("%a+") do
  KEYWORDS[w] = true
end

local function is_ident(k)
  return type(k) == "string" and k:find("^[%a_][%w_]*$") ~= nil and not KEYWORDS[k]
end

local function order_keys(t, top)
  local keys, rank = {}, {}
  if top then
    for i, k in ipairs(ORDER) do rank[k] = i end
  end
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b)
    local ra, rb = rank[a] or math.huge, rank[b] or math.huge
    if ra ~= rb then return ra < rb end
    return tostring(a) < tostring(b)
  end)
  return keys
end

local function literal(v, indent, out, top)
  if type(v) == "table" then
    if next(v) == nil then
      out[#out + 1] = "{}"
      return
    end
    local n = #v
    local list = n > 0
    for k in pairs(v) do
      if math.type(k) ~= "integer" or k < 1 or k > n then list = false end
    end
    if list then
      local items = {}
      for i = 1, n do
        local o = {}
        literal(v[i], indent, o)
        items[i] = table.concat(o)
      end
      out[#out + 1] = "{ " .. table.concat(items, ", ") .. " }"
      return
    end
    out[#out + 1] = "{\n"
    for _, k in ipairs(order_keys(v, top)) do
      out[#out + 1] = indent .. "  " .. (is_ident(k) and k or ("[%q]"):format(k)) .. " = "
      literal(v[k], indent .. "  ", out)
      out[#out + 1] = ",\n"
    end
    out[#out + 1] = indent .. "}"
  elseif type(v) == "function" then
    local info = debug.getinfo(v, "S")
    out[#out + 1] = ("<function at %s:%d>"):format(info.source:gsub("^[@=]", ""),
      info.linedefined)
  elseif type(v) == "string" then
    out[#out + 1] = ("%q"):format(v):gsub("\\\n", "\\n")
  else
    out[#out + 1] = tostring(v)
  end
end

--- The effective configuration as Lua (what `luxec mcp --check-config FILE` prints), with a
--- comment naming the sandbox's writable roots.
---@param cfg table
---@return string
function M.describe(cfg)
  local t = {}
  for k, v in pairs(cfg) do
    if k ~= "source" then t[k] = v end
  end
  t.shell = t.shell or policy.default_shell()
  local out = { ("-- luxec mcp: the effective configuration (%s)\n"):format(cfg.source
    and "from " .. cfg.source or "the defaults") }
  local ok, spec = pcall(sandbox.resolve, cfg.sandbox, cfg.cwd)
  if ok then
    out[#out + 1] = ("-- sandbox: %s, network %s; writable: %s\n"):format(spec.mode,
      sandbox.network_text(spec.net or spec.network), spec.mode == "full-access" and "everything"
      or #spec.roots == 0 and "nothing (but /dev/null and the terminal)"
      or table.concat(spec.roots, ", "))
  end
  out[#out + 1] = "return "
  literal(t, "", out, true)
  out[#out + 1] = "\n"
  return table.concat(out)
end

return M
