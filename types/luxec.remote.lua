---@meta luxec.remote
-- luacheck: ignore
--- require("luxec.remote") (also luxec.remote): sessions on a `luxec serve` reached over a
--- command's stdio (ssh, kubectl exec -i) or a unix socket, with the same Process API as
--- local ones (docs/remote.md).

---@class luxec.RemoteTarget
---@field command string[]|nil  an argv that runs `luxec serve` (e.g. over ssh)
---@field socket string|nil  the path of a `luxec serve --listen unix:PATH`
---@field name string|nil  how the host is called in errors ("connection to NAME lost")
---@field framing "binary"|"lines"|nil  "lines" keeps Codex's framing; by default luxec's binary framing is asked for

---@class luxec.RemoteCursor
---@field seq integer  the last output chunk received
---@field offsets integer[]  the bytes received of stdout (or the terminal) and of stderr

---@class luxec.RemoteProcess: luxec.Process
---@field id string  the session's process id on the server
local RemoteProcess = {}

--- Where this client is in the session's output (what it has received): a plain table to keep
--- and give to host:attach(id, cursor) later, from another process as well.
---@return luxec.RemoteCursor
function RemoteProcess:cursor() end

---@class luxec.RemoteHost
---@field name string
local Host = {}

--- Start argv on the host with the spawn options the protocol carries (env is the exact
--- environment; without it the server's own). `extra.meta` is kept with the session. Returns
--- the session, or nil and a message naming the host.
---@param argv string[]
---@param opts luxec.SpawnOptions|nil
---@param extra {meta: table|nil}|nil
---@return luxec.RemoteProcess|nil, string|nil
function Host:spawn(argv, opts, extra) end

--- Run argv to completion as luxec.run does: {code, signal_name, output, dropped, stderr,
--- timed_out, pid, connection_lost}, or nil and a message.
---@param argv string[]
---@param opts luxec.RunOptions|nil
---@return table|nil, string|nil
function Host:run(argv, opts) end

--- Take up a session the server holds: its output from the start (what the server holds,
--- here when attach returns), then live; with `cursor` (p:cursor() of an earlier client) the
--- output after it, what the server no longer holds counted by p:read() as dropped. Returns
--- the session, or nil and a message.
---@param id string
---@param cursor luxec.RemoteCursor|nil
---@return luxec.RemoteProcess|nil, string|nil
function Host:attach(id, cursor) end

--- The sessions the server holds: {processId, argv, pid, tty, exited, exitCode, closed, ...}.
---@return table[]|nil, string|nil
function Host:list() end

--- The server's own state: {pid, uid, sessions, running, clients, ageMs, host}.
---@return table|nil, string|nil
function Host:status() end

--- Close the connection: over a command the server ends every session; a server on a socket
--- keeps them for the next client.
function Host:close() end

---@class luxec.remote
local remote = {}

--- Connect to a server. Returns the host, or nil and a message naming it and quoting the
--- transport's stderr.
---@param target luxec.RemoteTarget
---@return luxec.RemoteHost|nil, string|nil
function remote.connect(target) end

--- A host on the local daemon, started when none answers.
---@param opts {socket: string|nil, idle: number|nil, start_timeout: number|nil}|nil
---@return luxec.RemoteHost|nil, string|nil
function remote.daemon(opts) end

return remote
