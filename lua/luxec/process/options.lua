--- luxec.process.options: checking what luxec.spawn and luxec.run are given, with errors that name
--- the argument, and the environment a session starts with. Errors carry no position: the
--- public function re-raises them at its caller's line.
local uv = require("luv")

local M = {}

local SPAWN_OPTIONS = {
  env = "table", inherit_env = "boolean", cwd = "string", arg0 = "string",
  tty = { "boolean", "table" }, stdin = "string", stderr = "string", head = "number",
  tail = "number", log = "string", log_stderr = "string", log_max = "number",
  grace_ms = "number",
  cgroup = "boolean", sandbox = "table", record = "string", echo = "boolean",
  log_to = { "userdata", "function" }, timeout = { "number", "boolean" },
}

local function argerror(fname, n, msg)
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), 0)
end

function M.check_type(fname, key, value, want)
  local t = type(value)
  if type(want) == "table" then
    for _, w in ipairs(want) do
      if t == w then return end
    end
    want = table.concat(want, " or ")
  elseif t == want then
    return
  end
  error(("bad option '%s' to '%s' (%s expected, got %s)"):format(key, fname, want, t), 0)
end

local function check_size(fname, key, v)
  if v ~= nil and (math.type(v) ~= "integer" or v < 0) then
    error(("bad option '%s' to '%s' (non-negative integer expected, got %s)")
      :format(key, fname, tostring(v)), 0)
  end
end

function M.check_argv(fname, argv)
  if type(argv) ~= "table" then
    argerror(fname, 1, "argv must be a list of strings, got " .. type(argv) ..
      (type(argv) == "number" and " (a session over a descriptor is luxec.open_stream(fd))"
        or ""))
  end
  if #argv == 0 then
    argerror(fname, 1, "argv is empty")
  end
  for i = 1, #argv do
    if type(argv[i]) ~= "string" then
      argerror(fname, 1, ("argv[%d] must be a string, got %s"):format(i, type(argv[i])))
    end
    if argv[i]:find("\0", 1, true) then -- (a C string would end there: the rest lost)
      argerror(fname, 1, ("argv[%d] contains a NUL byte: %q"):format(i, argv[i]))
    end
  end
  -- spawn{"cmd", cwd = "/x"} would otherwise run "cmd" with the option silently ignored
  for k in pairs(argv) do
    if math.type(k) ~= "integer" or k < 1 or k > #argv then
      argerror(fname, 1, ("argv has the key %s; options go in the second argument")
        :format(type(k) == "string" and ("'" .. k .. "'") or tostring(k)))
    end
  end
end

-- The environment as a list of "K=V": exact when env is given (unless inherit_env), else
-- the host's; env entries override, false removes.
function M.build_env(opts)
  local env, list = {}, {}
  if opts.env == nil or opts.inherit_env then
    for k, v in pairs(uv.os_environ()) do
      env[k] = v
    end
  end
  for k, v in pairs(opts.env or {}) do
    if type(k) ~= "string" or k == "" or k:find("=", 1, true) or k:find("\0", 1, true) then
      error(("bad option 'env' to 'spawn' (invalid variable name %q)"):format(tostring(k)), 0)
    end
    if v == false then
      env[k] = nil
    elseif type(v) == "string" or type(v) == "number" then
      env[k] = tostring(v)
      if env[k]:find("\0", 1, true) then
        error(("bad option 'env' to 'spawn' (value of %s contains a NUL byte: %q)")
          :format(k, env[k]), 0)
      end
    else
      error(("bad option 'env' to 'spawn' (value of %s must be a string, got %s)")
        :format(k, type(v)), 0)
    end
  end
  for k, v in pairs(env) do
    list[#list + 1] = k .. "=" .. v
  end
  table.sort(list)
  return list
end

--- Raise "bad argument #n to 'fname' (unknown option 'k')" for the first key of the table
--- `opts` that `allowed` does not name (a misspelt option is never silently ignored).
---@param fname string
---@param n integer
---@param opts table
---@param allowed table<string, any>
---@param level integer|nil  error level (0, no position, by default)
function M.check_keys(fname, n, opts, allowed, level)
  for k in pairs(opts) do
    if allowed[k] == nil then
      error(("bad argument #%d to '%s' (unknown option '%s')"):format(n, fname, tostring(k)),
        level and level + 1 or 0)
    end
  end
end

function M.check_spawn_opts(opts, fname)
  if opts == nil then return {} end
  fname = fname or "spawn"
  if type(opts) ~= "table" then
    argerror(fname, 2, "options must be a table, got " .. type(opts))
  end
  for k, v in pairs(opts) do
    local want = SPAWN_OPTIONS[k]
    if want == nil then
      error(("bad argument #2 to '%s' (unknown option '%s')"):format(fname, tostring(k)), 0)
    end
    M.check_type(fname, k, v, want)
    if type(v) == "string" and v:find("\0", 1, true) then
      error(("bad option '%s' to '%s' (contains a NUL byte: %q)"):format(k, fname, v), 0)
    end
  end
  if opts.stdin ~= nil and opts.stdin ~= "pipe" and opts.stdin ~= "null" then
    error(("bad option 'stdin' to '%s' (\"pipe\" or \"null\" expected, got %q)")
      :format(fname, opts.stdin), 0)
  end
  if opts.stderr ~= nil and opts.stderr ~= "merge" and opts.stderr ~= "pipe" then
    error(("bad option 'stderr' to '%s' (\"merge\" or \"pipe\" expected, got %q)")
      :format(fname, opts.stderr), 0)
  end
  local t = opts.timeout
  if t ~= nil and t ~= false and (type(t) ~= "number" or t ~= t or t < 0) then
    error(("bad option 'timeout' to '%s' (non-negative number of seconds or false expected, "
      .. "got %s)"):format(fname, tostring(t)), 0)
  end
  check_size(fname, "head", opts.head)
  check_size(fname, "tail", opts.tail)
  check_size(fname, "grace_ms", opts.grace_ms)
  check_size(fname, "log_max", opts.log_max)
  if type(opts.log_to) == "userdata" and io.type(opts.log_to) ~= "file" then
    error(("bad option 'log_to' to '%s' (an open file such as io.stdout, or a function, " ..
      "expected, got %s)"):format(fname, io.type(opts.log_to) or "userdata"), 0)
  end
  if type(opts.tty) == "table" then
    for k, v in pairs(opts.tty) do
      if k ~= "rows" and k ~= "cols" and k ~= "raw" then
        error(("bad option 'tty' to '%s' (unknown field '%s')"):format(fname, tostring(k)), 0)
      end
      if k == "raw" then
        if type(v) ~= "boolean" then
          error(("bad option 'tty.raw' to '%s' (boolean expected, got %s)")
            :format(fname, type(v)), 0)
        end
      elseif math.type(v) ~= "integer" or v < 1 or v > 65535 then
        error(("bad option 'tty.%s' to '%s' (integer 1..65535 expected, got %s)")
          :format(k, fname, tostring(v)), 0)
      end
    end
  end
  -- (an option the other options make meaningless is an error, never silently ignored)
  if opts.tty and opts.stdin == "null" then
    error(("bad option 'stdin' to '%s' (a terminal session's input is its terminal: it cannot "
      .. "be /dev/null)"):format(fname), 0)
  end
  if opts.log_stderr ~= nil and opts.stderr ~= "pipe" then
    error(("bad option 'log_stderr' to '%s' (needs stderr = \"pipe\": else stderr is in the "
      .. "output, and in log)"):format(fname), 0)
  end
  if opts.log_max ~= nil and opts.log == nil and opts.log_stderr == nil then
    error(("bad option 'log_max' to '%s' (bounds each log: needs log or log_stderr)")
      :format(fname), 0)
  end
  if opts.echo ~= nil and not opts.tty then
    error(("bad option 'echo' to '%s' (a terminal's echo: needs tty; a pipe has no echo)")
      :format(fname), 0)
  end
  if opts.tty and opts.stderr == "pipe" then
    error(("bad option 'stderr' to '%s' (a terminal session has one output stream)")
      :format(fname), 0)
  end
  return opts
end

M.argerror = argerror

--- Check spawn's arguments (raises with no position; see the module comment). The
--- environment and the sandbox are checked where spawn builds and resolves them, once.
function M.check(fname, argv, opts)
  M.check_argv(fname, argv)
  M.check_spawn_opts(opts, fname)
end

return M
