--- luxec.cli.cmd: the subcommands of the luxec program (`luxec NAME args...`). Each is a
--- description (its options and arguments, parsed by luxec.cli.args with lua-argparse) and a
--- function of the parsed values that returns the exit status.
local args = require("luxec.cli.args")

local M = {}

--- The subcommands in the order `luxec --help` lists them (src/main.c keeps the same list).
M.names = { "mcp", "serve", "ps", "sandbox-check", "play" }

---@type table<string, luxec.cli.Command|{run: fun(values: table): integer}>
local commands = {}
M.commands = commands

local sandbox_check = {
  summary = "show which sandbox layers this machine offers, by doing one spawn",
  description = "Starts one sandboxed command with the default policy (workspace-write, "
    .. "network denied) in DIR, strictly (no best_effort), exactly as `luxec mcp` would run "
    .. "a command there, and prints each layer and why one is missing. Exits 0 when the "
    .. "sandboxed command ran, 1 when it was refused.",
  options = {},
  arguments = { { "DIR", help = "the workspace (default: the current directory)",
    optional = true } },
}

commands["sandbox-check"] = sandbox_check

--- luxec sandbox-check [DIR]: what a sandboxed spawn does on this machine, found by doing
--- one: the default policy (workspace-write, network denied) with DIR (default: the current
--- directory) as the workspace, strict (no best_effort), exactly as `luxec mcp` would run a
--- command there. Prints each layer and why one is missing; 0 when the spawn succeeded.
function sandbox_check.run(values)
  local dir = values.DIR
  local core = require("luxec.core")
  local luxec = require("luxec")
  local uv = require("luv")
  local layers = core.sandbox_layers()
  local function line(name, ok, detail)
    io.write(("%-10s %-4s %s\n"):format(name, ok and "yes" or "no", detail))
  end
  local abi = layers.landlock
  line("landlock", abi >= 3, abi == 0 and "not offered by this kernel"
    or ("ABI %d%s"):format(abi, abi >= 3 and " (read-only guarantee" ..
      (abi >= 4 and ", TCP rules" or "") .. (abi >= 6 and ", signal and socket scoping" or "")
      .. ")" or " (3 or later is needed for a read-only guarantee)"))
  if layers.can_unshare then
    line("userns", true, "not needed: luxec runs with CAP_SYS_ADMIN")
  else
    line("userns", layers.userns, layers.userns
      and "the namespaces below come through an unprivileged user namespace"
      or (layers.userns_reason or "no user namespace can be made"))
  end
  local cg, why = core.cgroups()
  line("cgroup", cg, cg and "a cgroup per session (whole-tree kill, watchdog, limits)"
    or (why or "unavailable"))
  local cwd = dir or uv.cwd()
  local p, err = luxec.spawn({ "true" },
    { cwd = cwd, sandbox = { mode = "workspace-write", network = "deny" } })
  local s
  if p then
    local st = p:wait({ timeout = 10 })
    p:close()
    s = st.sandbox
  end
  if not s then
    io.write("spawn      no   ", tostring(err), "\n")
    io.write(("workspace-write with network denied in %s: refused (the error above is what "
      .. "every sandboxed command gets; best_effort = true runs with what is there)\n")
      :format(cwd))
    return 1
  end
  local l = s.layers
  line("mountns", l.mountns, "/ read-only, the writable roots bound back; git, protected "
    .. "paths read-only, deny_read masked; private devpts and /dev/shm")
  line("pidns", l.pidns, "its own processes only (fresh /proc); ends with its init")
  line("ipcns", l.ipcns, "its own SysV IPC")
  line("netns", l.netns, "an empty network namespace")
  line("seccomp", l.seccomp, "sockets only AF_UNIX, io_uring, ptrace, mount, namespaces, "
    .. "TIOCSTI... refused")
  line("notify", l.notify, l.notify and "AF_UNIX connects judged by the host; denials recorded"
    or "the listener was refused (a nested filter?)")
  line("caps", l.caps_dropped, "every capability dropped")
  for _, d in ipairs(s.degraded or {}) do
    io.write("degraded   ", d, "\n")
  end
  io.write(("workspace-write with network denied in %s: available\n"):format(cwd))
  return 0
end

commands.mcp = {
  summary = "serve MCP on stdio: exec_command, write_stdin, ... for AI agents",
  description = "Serves the Model Context Protocol on stdin and stdout (or over HTTP with "
    .. "--listen): the tools "
    .. "exec_command, write_stdin, list_sessions, ... run commands in sandboxed sessions. "
    .. "Without --config the defaults apply: workspace-write sandbox in the current "
    .. "directory, network denied.",
  epilog = "Claude Code: claude mcp add luxec -- luxec mcp\n"
    .. "Exit status: 0 when the client closed stdin, 1 for a bad configuration, 2 for bad "
    .. "arguments.",
  options = {
    { "--config", arg = "FILE", help = "the configuration (a Lua file returning a table)" },
    { "--check-config", arg = "FILE", optional = true,
      help = "check FILE (or --config's, or the defaults), print the effective "
        .. "configuration and exit" },
    { "--daemon", help = "run the sessions on the local daemon (luxec serve --daemon, "
      .. "started when none runs): they outlive this server, which takes them back when it "
      .. "starts again (the config key daemon = true does the same)" },
    { "--listen", arg = "URL", help = "serve MCP over Streamable HTTP at URL "
      .. "(http://127.0.0.1:PORT, http://[::1]:PORT, http://0.0.0.0:PORT; PORT 0 picks one, "
      .. "printed on stderr) instead of stdio; the endpoint is /mcp" },
    { "--token-file", arg = "PATH", help = "with --listen: clients must send this file's "
      .. "token (Authorization: Bearer TOKEN); required unless the address is loopback "
      .. "(the environment variable LUXEC_MCP_TOKEN does the same)" },
  },
  arguments = {},
}

--- luxec mcp [--config FILE] | --check-config [FILE]: the MCP server on stdio (luxec.mcp),
--- configured by a Lua file (luxec.mcp.config).
---@return integer status
function commands.mcp.run(values)
  local check = values.check_config ~= nil
  local file = values.check_config and values.check_config[1] or values.config
  local config = require("luxec.mcp.config")
  local cfg, err
  if file then
    cfg, err = config.load(file)
  else
    cfg, err = config.check({})
  end
  if not cfg then
    io.stderr:write("luxec mcp: ", (err:gsub("\n", "\nluxec mcp: ")), "\n") -- every problem
    return 1
  end
  if values.daemon and not cfg.daemon then cfg.daemon = true end
  if check then
    io.write(config.describe(cfg))
    return 0
  end
  if values.listen then
    if cfg.daemon then
      io.stderr:write("luxec mcp: --listen does not run sessions on the daemon (--daemon or "
        .. "the config key daemon): each HTTP session has its own\n")
      return 2
    end
    local token, terr = M.mcp_token(values.token_file)
    if terr then
      io.stderr:write("luxec mcp: ", terr, "\n")
      return 2
    end
    return require("luxec.mcp.http").serve(cfg, values.listen, token)
  elseif values.token_file then
    io.stderr:write("luxec mcp: --token-file goes with --listen (stdio needs no token)\n")
    return 2
  end
  return require("luxec.mcp").serve(cfg)
end

--- The bearer token of `luxec mcp --listen`: the file's first line, else LUXEC_MCP_TOKEN;
--- nil when neither is given; nil and an error for an unreadable or empty one.
---@param file string|nil
---@return string|nil token, string|nil err
function M.mcp_token(file)
  local token, from
  if file then
    local f, err = io.open(file, "r")
    if not f then return nil, "--token-file: " .. tostring(err) end
    token, from = (f:read("l") or ""), "--token-file " .. file
    f:close()
  else
    token, from = os.getenv("LUXEC_MCP_TOKEN"), "LUXEC_MCP_TOKEN"
    if token == nil then return nil end
  end
  token = token:match("^%s*(.-)%s*$")
  if #token < 16 then
    return nil, ("%s: the token must be at least 16 characters (got %d)"):format(from, #token)
  end
  return token
end

commands.serve = {
  summary = "serve the exec-server protocol: sessions for remote and lasting clients",
  description = "Serves JSON-RPC (Codex's exec-server protocol, with luxec's additions) "
    .. "on stdin and stdout, one message per line, or on a unix socket with --listen. "
    .. "On stdio the sessions end when stdin ends; on a socket they outlive the clients "
    .. "until the server gets SIGTERM. Only clients of the server's own uid are served.",
  epilog = "From Lua: luxec.remote.connect{command = {\"ssh\", \"-T\", \"host\", "
    .. "\"luxec\", \"serve\"}}\nExit status: 0 when stdin closed or after SIGTERM, 1 when "
    .. "it cannot serve, 2 for bad arguments.",
  options = {
    { "--listen", arg = "unix:PATH", help = "serve clients on this unix socket (mode 0600)" },
    { "--daemon", help = "the lasting local server: listen on $XDG_RUNTIME_DIR/luxec/"
      .. "serve.sock (else /tmp/luxec-UID/serve.sock; or --listen's) and exit when idle" },
    { "--idle", arg = "SECONDS", positive = true, help = "with --daemon: exit after SECONDS "
      .. "with no client and no running session (default 60)" },
    { "--sandbox", arg = "MODE", help = "run every process under this policy: read-only or "
      .. "workspace-write (the current directory; network denied); default full-access" },
    { "--max-queued", arg = "BYTES", positive = true, help = "a client with more than BYTES "
      .. "not yet written to it gets no output notifications until it catches up (it reads "
      .. "the gap by sequence number); default 4194304" },
  },
  arguments = {},
}

--- luxec serve [--listen unix:PATH] [--sandbox MODE]: the exec-server (luxec.serve).
function commands.serve.run(values)
  if values.idle and not values.daemon then
    io.stderr:write("luxec serve: --idle needs --daemon\n")
    return 2
  end
  return require("luxec.serve").main({ listen = values.listen, sandbox = values.sandbox,
    daemon = values.daemon, idle = values.idle,
    max_queued = values.max_queued and math.floor(values.max_queued) })
end

commands.ps = {
  summary = "list the sessions of the local daemon (luxec serve --daemon)",
  description = "Lists the sessions the local daemon holds: id, pid, state, age, clients "
    .. "attached, host, owner (an MCP server and its session number) and command. The "
    .. "daemon is asked over its socket ($XDG_RUNTIME_DIR/luxec/serve.sock, else "
    .. "/tmp/luxec-UID/serve.sock) and never started to answer.",
  epilog = "From Lua: luxec.remote.daemon():attach(ID) takes a session up again.\n"
    .. "Exit status: 0 (also when no daemon runs), 1 when the daemon cannot be asked, 2 for "
    .. "bad arguments.",
  options = {
    { "--socket", arg = "PATH", help = "ask the server on this socket instead" },
    { "--json", help = "print one JSON object: {daemon, sessions}" },
  },
  arguments = {},
}

--- luxec ps [--socket PATH] [--json]: the daemon's sessions (luxec.serve.ps).
function commands.ps.run(values)
  return require("luxec.serve.ps").main({ socket = values.socket, json = values.json })
end

commands.play = {
  summary = "replay a recorded session (asciicast v2) with its timing",
  description = "Writes the output of a recording (a session started with record = FILE, "
    .. "or any asciicast v2 file) to the terminal with its timing. FILE - reads stdin.",
  options = {
    { "-s --speed", arg = "N", positive = true, help = "play N times faster (default 1)" },
    { "-i --idle-limit", arg = "SECONDS", positive = true,
      help = "cut every pause to at most SECONDS" },
  },
  arguments = { { "FILE", help = "the recording (.cast)" } },
}

--- luxec play [--speed N] [--idle-limit SECONDS] FILE.cast: replay a recording.
function commands.play.run(values)
  local argv = {}
  if values.speed then argv[#argv + 1], argv[#argv + 2] = "--speed", tostring(values.speed) end
  if values.idle_limit then
    argv[#argv + 1], argv[#argv + 2] = "--idle-limit", tostring(values.idle_limit)
  end
  local file = values.FILE
  if file:sub(1, 1) == "-" and file ~= "-" then file = "./" .. file end
  argv[#argv + 1] = file
  return require("luxec.auto.record").play(argv)
end

--- Run subcommand `name` with its arguments; returns the exit status (2 for bad arguments).
---@param name string
---@return integer status
function M.main(name, ...)
  local cmd = commands[name]
  if not cmd then
    io.stderr:write(("luxec: unknown command '%s' (the commands: %s)\n")
      :format(tostring(name), table.concat(M.names, ", ")))
    return 2
  end
  cmd.name = name
  local values, status = args.parse(cmd, { ... })
  if not values then return status end
  return cmd.run(values)
end

return M
