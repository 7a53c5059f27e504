--- luxec.engine.policy: the pure decisions of the exec engine — its config, the children's
--- environment, the yield clamps, tool argument checking and the sandbox-denial guess. No
--- process, no loop: everything here is unit-tested as plain functions.
local M = {}

--- Forced on every child (Codex's list): no colour, no pager, a dumb terminal, UTF-8.
M.FORCED_ENV = {
  NO_COLOR = "1", TERM = "dumb", LANG = "C.UTF-8", LC_CTYPE = "C.UTF-8", LC_ALL = "C.UTF-8",
  COLORTERM = "", PAGER = "cat", GIT_PAGER = "cat", GH_PAGER = "cat",
}

--- Added by default on top (what Codex users asked for): git never prompts for credentials,
--- man never pages.
M.EXTRA_ENV = { GIT_TERMINAL_PROMPT = "0", MANPAGER = "cat" }

--- What `inherit = "core"` keeps (Codex's list).
M.CORE_VARS = { "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP" }

--- The patterns `default_excludes = true` removes.
M.DEFAULT_EXCLUDES = { "*KEY*", "*SECRET*", "*TOKEN*" }

local KiB = 1024

---@class luxec.ExecConfig
M.defaults = {
  shell = nil, ---@type string|nil  the shell cmd runs in (/bin/bash, else /bin/sh)
  login = true, -- run [shell, "-lc", cmd] (false: "-c")
  allow_login_shell = true,
  cwd = nil, ---@type string|nil  where workdir is relative to (the host's cwd)
  deterministic = false, -- session ids 1000, 1001, … instead of random ones
  max_sessions = 64,
  protect_recent = 8,
  warn_at = 60,
  exec_yield_ms = 10000, -- exec_command's default yield
  write_yield_ms = 250, -- write_stdin's default yield
  min_yield_ms = 250,
  max_yield_ms = 30000,
  poll_min_ms = 5000, -- an empty write_stdin waits at least this long (unless it can return)
  poll_max_ms = 300000,
  settle_ms = 100, -- after writing chars, before the wait starts
  early_exit_ms = 150, -- no early return on input before this, after spawn
  drain_ms = 50, -- after exit, how long to wait for the output to close
  max_output_tokens = 10000,
  max_output_tokens_limit = 1000000, -- a larger request is lowered to this
  truncation = "luxec", -- "luxec" | "codex-tokens" | "codex-bytes"
  text = "luxec", -- the result's text: "luxec" (compact) | "codex" (Codex's, exactly)
  chunk_id = false, -- "luxec" text: start with Codex's "Chunk ID" line
  clean_pipe = nil, ---@type boolean|nil  clean output of pipe sessions (default: true, but
  -- false with text = "codex": Codex gives a pipe's bytes as they came)
  clean_tty = false, -- and of terminal sessions
  early_return = true, -- end a wait when the program waits for input
  input_poll_ms = 15,
  input_quiet_ms = 15, -- waiting for input must hold this long with no output
  timeout_ms = nil, ---@type integer|nil  default hard timeout of a command (none)
  kill_grace_ms = 200, -- TERM, then this long, then KILL (timeouts, terminate, pruning)
  rows = 24,
  cols = 80,
  head = 512 * KiB, -- output kept in memory per session: the first bytes …
  tail = 512 * KiB, -- … and the last; the rest is counted, and in the log
  pipe_stdin = "null", -- "null" (Codex) | "pipe": pipe sessions get a stdin write_stdin feeds
  max_chars = 1024 * KiB, -- the most write_stdin takes in one call
  log = true, -- keep each session's whole output in a file (to page back what was cut)
  log_max = 256 * 1024 * KiB, -- but no more than this per session
  log_dir = nil, ---@type string|nil  where (a fresh directory under $TMPDIR or /tmp)
  env = nil, ---@type luxec.EnvPolicy|nil  inherit "all" | "core" | "none", exclude, set, …
  env_forced = M.FORCED_ENV,
  env_extra = M.EXTRA_ENV,
  sandbox = nil, ---@type table|nil  passed as is to luxec.spawn's `sandbox` option
  -- paths read-only in every restricted session, whatever sandbox a call gets (the MCP
  -- server's config file: a command that rewrote it would choose the next start's policy)
  protect = nil, ---@type string[]|nil
  on_denial = nil, ---@type function|nil  fn(verdict, args) -> true: rerun without sandbox
  spawn = nil, ---@type function|nil  luxec.spawn (the seam every session starts through)
  clock = nil, ---@type (fun(): number)|nil  milliseconds, monotonic (uv.hrtime by default)
}

local CONFIG_TYPES = {
  shell = "string", login = "boolean", allow_login_shell = "boolean", cwd = "string",
  deterministic = "boolean", max_sessions = "count", protect_recent = "count", warn_at = "count",
  exec_yield_ms = "count", write_yield_ms = "count", min_yield_ms = "count",
  max_yield_ms = "count", poll_min_ms = "count", poll_max_ms = "count", settle_ms = "count",
  early_exit_ms = "count", drain_ms = "count", max_output_tokens = "count",
  max_output_tokens_limit = "count", truncation = "string", text = "string",
  chunk_id = "boolean", clean_pipe = "boolean",
  clean_tty = "boolean", early_return = "boolean", input_poll_ms = "count",
  input_quiet_ms = "count", timeout_ms = "count", kill_grace_ms = "count", rows = "count",
  cols = "count", head = "count", tail = "count", pipe_stdin = "string", max_chars = "count",
  log = "boolean", log_max = "count", log_dir = "string", env = "table", env_forced = "table",
  env_extra = "table", sandbox = "table", protect = "table", on_denial = "function",
  spawn = "function",
  clock = "function",
}

--- The engine's config: `config` checked (unknown keys, types, enumerations) over the
--- defaults. Raises a message naming the key.
---@param config luxec.ExecConfig|nil
---@return table
function M.config(config)
  if config ~= nil and type(config) ~= "table" then
    error(("bad argument #1 to 'new' (config table expected, got %s)"):format(type(config)), 0)
  end
  local cfg = {}
  for k, v in pairs(M.defaults) do cfg[k] = v end
  for k, v in pairs(config or {}) do
    local want = CONFIG_TYPES[k]
    if not want then
      error(("bad config key '%s' for luxec.engine"):format(tostring(k)), 0)
    end
    local ok = want == "count" and math.type(v) == "integer" and v >= 0 or type(v) == want
    if not ok then
      error(("bad config '%s' for luxec.engine (%s expected, got %s)"):format(k,
        want == "count" and "non-negative integer" or want, tostring(v)), 0)
    end
    cfg[k] = v
  end
  local modes = { luxec = true, ["codex-tokens"] = true, ["codex-bytes"] = true }
  if not modes[cfg.truncation] then
    error(("bad config 'truncation' for luxec.engine (\"luxec\", \"codex-tokens\" or "
      .. "\"codex-bytes\" expected, got %q)"):format(cfg.truncation), 0)
  end
  if cfg.text ~= "luxec" and cfg.text ~= "codex" then
    error(("bad config 'text' for luxec.engine (\"luxec\" or \"codex\" expected, got %q)")
      :format(cfg.text), 0)
  end
  if cfg.clean_pipe == nil then cfg.clean_pipe = cfg.text ~= "codex" end
  if cfg.pipe_stdin ~= "null" and cfg.pipe_stdin ~= "pipe" then
    error(("bad config 'pipe_stdin' for luxec.engine (\"null\" or \"pipe\" expected, got %q)")
      :format(cfg.pipe_stdin), 0)
  end
  local inherit = cfg.env and cfg.env.inherit
  if inherit ~= nil and inherit ~= "all" and inherit ~= "core" and inherit ~= "none" then
    error(("bad config 'env.inherit' for luxec.engine (\"all\", \"core\" or \"none\" expected, "
      .. "got %s)"):format(tostring(inherit)), 0)
  end
  return cfg
end

-- A case-insensitive glob (`*`, `?`) as an anchored Lua pattern.
local function glob_pattern(glob)
  local p = glob:lower():gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".")
  return "^" .. p .. "$"
end

--- Whether name matches one of the case-insensitive globs.
---@param name string
---@param globs string[]
---@return boolean
function M.matches_any(name, globs)
  local lname = name:lower()
  for _, g in ipairs(globs) do
    if lname:find(glob_pattern(g)) then return true end
  end
  return false
end

---@class luxec.EnvPolicy
---@field inherit "all"|"core"|"none"|nil  what starts the environment ("all")
---@field default_excludes boolean|nil  drop *KEY*, *SECRET*, *TOKEN* (false)
---@field exclude string[]|nil  globs of variables to drop
---@field set table<string, string>|nil  variables to set
---@field include_only string[]|nil  when not empty, only variables matching these stay

--- The children's environment under `policy` (Codex's order: inherit, default excludes,
--- exclude, set, include-only), then `forced`, then `extra`, from the host's `source`.
---@param policy luxec.EnvPolicy|nil
---@param source table<string, string>  the host's environment
---@param forced table<string, string>|nil
---@param extra table<string, string>|nil
---@return table<string, string>
function M.build_env(policy, source, forced, extra)
  policy = policy or {}
  local env = {}
  local inherit = policy.inherit or "all"
  if inherit == "all" then
    for k, v in pairs(source) do env[k] = v end
  elseif inherit == "core" then
    for _, k in ipairs(M.CORE_VARS) do env[k] = source[k] end
  end
  local drop = {}
  if policy.default_excludes then
    for _, g in ipairs(M.DEFAULT_EXCLUDES) do drop[#drop + 1] = g end
  end
  for _, g in ipairs(policy.exclude or {}) do drop[#drop + 1] = g end
  if #drop > 0 then
    for k in pairs(env) do
      if M.matches_any(k, drop) then env[k] = nil end
    end
  end
  for k, v in pairs(policy.set or {}) do env[k] = v end
  local only = policy.include_only or {}
  if #only > 0 then
    for k in pairs(env) do
      if not M.matches_any(k, only) then env[k] = nil end
    end
  end
  for k, v in pairs(forced or {}) do env[k] = v end
  for k, v in pairs(extra or {}) do env[k] = v end
  return env
end

--- The shell a command runs in when neither the call nor the config names one.
---@param access (fun(path: string, mode: string): boolean)|nil  uv.fs_access by default
---@return string
function M.default_shell(access)
  access = access or require("luv").fs_access
  return access("/bin/bash", "X") and "/bin/bash" or "/bin/sh"
end

--- `shell` as an absolute path (Codex runs the resolved path): a name without a slash is
--- looked up in `path` (a PATH value); unchanged when it is not found there.
---@param shell string
---@param path string|nil
---@param access (fun(path: string, mode: string): boolean)|nil
---@return string
function M.resolve_shell(shell, path, access)
  if shell:find("/", 1, true) then return shell end
  access = access or require("luv").fs_access
  for dir in (path or ""):gmatch("[^:]+") do
    local full = dir .. "/" .. shell
    if access(full, "X") then return full end
  end
  return shell
end

--- The argv that runs `cmd` through `shell`, as Codex derives it from the shell's kind (its
--- file name, without ".exe", any case): PowerShell (pwsh, powershell) gets "-Command"
--- (after "-NoProfile" unless a login shell is asked), cmd gets "/c", every other shell
--- "-lc" (login) or "-c".
---@param shell string
---@param login boolean
---@param cmd string
---@return string[]
function M.shell_argv(shell, login, cmd)
  local kind = shell:match("[^/\\]*$"):lower():gsub("%.exe$", "")
  if kind == "pwsh" or kind == "powershell" then
    if login then return { shell, "-Command", cmd } end
    return { shell, "-NoProfile", "-Command", cmd }
  elseif kind == "cmd" then
    return { shell, "/c", cmd }
  end
  return { shell, login and "-lc" or "-c", cmd }
end

--- The directory a command runs in: `workdir` (absolute, or relative to `base`), else `base`.
--- A workdir that is not a non-empty string is `base` (the argument check reports it).
---@param base string  the engine's directory
---@param workdir any
---@return string
function M.workdir(base, workdir)
  if type(workdir) ~= "string" or workdir == "" then return base end
  return workdir:sub(1, 1) == "/" and workdir or base .. "/" .. workdir
end

--- The output budget of a call: the asked tokens (or the default), at most the limit.
---@param tokens integer|nil
---@param cfg {max_output_tokens: integer, max_output_tokens_limit: integer}
---@return integer
function M.tokens(tokens, cfg)
  return math.min(tokens or cfg.max_output_tokens, cfg.max_output_tokens_limit)
end

--- The config keys one call may set for itself (a call context's `limits`).
M.CALL_LIMITS = {
  exec_yield_ms = true, write_yield_ms = true, min_yield_ms = true, max_yield_ms = true,
  poll_min_ms = true, poll_max_ms = true, max_output_tokens = true,
  max_output_tokens_limit = true, timeout_ms = true, early_return = true,
}

--- A call's limits over the engine's config (a table that reads through to `cfg`); nil and
--- an error naming the key for a bad one.
---@param limits table|nil
---@param cfg table
---@return table|nil, string|nil
function M.call_limits(limits, cfg)
  if limits == nil then return cfg end
  if type(limits) ~= "table" then
    return nil, ("bad call limits (a table expected, got %s)"):format(type(limits))
  end
  local lim = {}
  for k, v in pairs(limits) do
    if not M.CALL_LIMITS[k] then
      return nil, ("bad call limit '%s' (a call may set %s)"):format(tostring(k),
        "exec_yield_ms, write_yield_ms, min_yield_ms, max_yield_ms, poll_min_ms, poll_max_ms, "
        .. "max_output_tokens, max_output_tokens_limit, timeout_ms, early_return")
    end
    local want = CONFIG_TYPES[k]
    local ok = want == "count" and math.type(v) == "integer" and v >= 0 or type(v) == want
    if not ok then
      return nil, ("bad call limit '%s' (%s expected, got %s)"):format(k,
        want == "count" and "non-negative integer" or want, tostring(v))
    end
    lim[k] = v
  end
  return setmetatable(lim, { __index = cfg })
end

--- Codex's yield for exec_command: the default when absent, clamped to [min, max].
---@param y integer|nil
---@param cfg {exec_yield_ms: integer, min_yield_ms: integer, max_yield_ms: integer}
---@return integer
function M.exec_yield(y, cfg)
  y = y or cfg.exec_yield_ms
  return math.max(cfg.min_yield_ms, math.min(y, cfg.max_yield_ms))
end

--- Codex's yield for write_stdin: with chars min(max(y, min), max); an empty poll
--- clamp(max(y, min), poll_min, poll_max).
---@param y integer|nil
---@param has_chars boolean
---@param cfg {write_yield_ms: integer, min_yield_ms: integer, max_yield_ms: integer,
---  poll_min_ms: integer, poll_max_ms: integer}
---@return integer
function M.write_yield(y, has_chars, cfg)
  y = math.max(y or cfg.write_yield_ms, cfg.min_yield_ms)
  if has_chars then
    return math.min(y, cfg.max_yield_ms)
  end
  return math.max(cfg.poll_min_ms, math.min(y, cfg.poll_max_ms))
end

-- Argument errors carry Codex's prefix (what a model has seen before).
local PREFIX = "failed to parse function arguments: "

local function describe(v)
  if type(v) == "string" then
    return ("string %q"):format(#v > 40 and v:sub(1, 40) .. "…" or v)
  elseif math.type(v) == "integer" then
    return ("integer `%d`"):format(v)
  elseif type(v) == "number" then
    return ("floating point `%s`"):format(tostring(v))
  end
  return type(v)
end

--- Check a tool argument: `kind` is "string", "boolean" or "integer"; integers may be given
--- as integral floats and must lie in [min, max]. Returns the value (nil when absent and
--- not required), or nil and the error text.
---@param args table
---@param name string
---@param kind "string"|"boolean"|"integer"
---@param opts {required: boolean|nil, min: number|nil, max: number|nil}|nil
---@return any value, string|nil err
function M.arg(args, name, kind, opts)
  opts = opts or {}
  local v = args[name]
  if v == nil then
    if opts.required then return nil, PREFIX .. ("missing field `%s`"):format(name) end
    return nil
  end
  if kind == "integer" then
    local n = type(v) == "number" and math.tointeger(v)
    if not n then
      return nil, PREFIX .. ("invalid type: %s for `%s`, expected an integer")
        :format(describe(v), name)
    end
    if (opts.min and n < opts.min) or (opts.max and n > opts.max) then
      return nil, PREFIX .. ("invalid value: %s for `%s`, expected %d..%d"):format(describe(n),
        name, opts.min or math.mininteger, opts.max or math.maxinteger)
    end
    return n
  end
  if type(v) ~= kind then
    return nil, PREFIX .. ("invalid type: %s for `%s`, expected a %s")
      :format(describe(v), name, kind)
  end
  return v
end

-- Errno texts a denied operation prints; and the names of the mechanisms, which count only
-- next to a verdict on the same line (a path like ~/sandbox/x is not a denial, codex#18711).
local ERRNO_PHRASES = { "operation not permitted", "permission denied", "read-only file system" }
local MECHANISMS = { "sandbox", "seccomp", "landlock" }
local VERDICTS = { "denied", "blocked", "not permitted", "not allowed", "violation", "forbidden" }
local SIGSYS = 31

local function find_plain(hay, needles)
  for _, n in ipairs(needles) do
    if hay:find(n, 1, true) then return n end
  end
end

-- The first line where a mechanism's name stands as a word (not inside a path or an
-- identifier) next to a verdict.
local function mechanism_line(lower)
  for line in lower:gmatch("[^\n]+") do
    for _, m in ipairs(MECHANISMS) do
      for s, e in line:gmatch("()" .. m .. "()") do
        local before, after = line:sub(s - 1, s - 1), line:sub(e, e)
        if not before:find("[%w/_%.%-~]") and not after:find("[%w/_%.%-]")
          and find_plain(line, VERDICTS) then
          return line
        end
      end
    end
  end
end

---@class luxec.DenialGuess
---@field denied boolean
---@field guess boolean  always true: a reading of the output, not evidence
---@field reason string|nil  why it says denied

--- Codex's keyword heuristic (is_likely_sandbox_denied), with its false positives fixed:
--- a mechanism's name counts only as a word next to a verdict ("blocked by seccomp"), never
--- inside a path (codex#18711); a plain failure with no sign of a denial (`bash -c false`,
--- codex#4859) is not one. Order otherwise as Codex: no sandbox or exit 0 → not denied;
--- errno texts → denied; exit 2, 126, 127 → not denied; SIGSYS (seccomp kill) → denied.
---@param r {sandboxed: boolean, exit_code: integer|nil, signal_name: string|nil,
---  output: string|nil}
---@return luxec.DenialGuess
function M.denial_guess(r)
  if not r.sandboxed or r.exit_code == 0 then
    return { denied = false, guess = true }
  end
  local lower = (r.output or ""):lower()
  local phrase = find_plain(lower, ERRNO_PHRASES)
  if phrase then
    return { denied = true, guess = true, reason = ("the output says %q"):format(phrase) }
  end
  local line = mechanism_line(lower)
  if line then
    if #line > 120 then line = line:sub(1, 120) .. "…" end
    return { denied = true, guess = true, reason = ("the output says %q"):format(line) }
  end
  local code = r.exit_code
  if code == 2 or code == 126 or code == 127 then
    return { denied = false, guess = true }
  end
  if r.signal_name == "SYS" or code == 128 + SIGSYS then
    return { denied = true, guess = true, reason = "killed by SIGSYS (a seccomp filter)" }
  end
  return { denied = false, guess = true }
end

--- A word as Codex shows it in a command line (shlex's quoting): bare when every character
--- is safe, else in single quotes, or in double quotes when it holds a single quote.
function M.shell_word(w)
  if w == "" then return "''" end
  if not w:find("[^%w,._+:@%%/=-]") then return w end
  if not w:find("'", 1, true) then return "'" .. w .. "'" end
  return '"' .. w:gsub('[\\"$`]', "\\%0") .. '"'
end

return M
