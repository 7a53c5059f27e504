---@meta luxec.sandbox
-- luacheck: ignore
--- require("luxec.sandbox"): the policy table luxec.spawn, luxec.run and the agent engine take
--- as `sandbox`, what a sandboxed session reports, and the two public helpers.

---@class luxec.Limits
---@field memory integer|string|nil  bytes, or "512M" (K, M, G: powers of 1024); at least 1M
---@field pids integer|nil  processes and threads alive at once
---@field cpu number|nil  CPUs' worth of time per 100 ms period, e.g. 1.5

---@class luxec.SandboxPolicy
---@field mode "full-access"|"read-only"|"workspace-write"
---@field network "deny"|"allow"|{allow: string[], deny: string[]|nil, resolve: table<string, string>|nil, allow_private: boolean|nil, connect_timeout_ms: integer|nil, response_timeout_ms: integer|nil}|nil  denied by default in the two restricted modes; a table: by name
---@field roots string[]|nil  more writable roots (workspace-write)
---@field tmp boolean|nil  false: /tmp, $TMPDIR and /dev/shm are not writable roots
---@field workspace string|nil  the writable workspace (default: the session's cwd)
---@field best_effort boolean|nil  run with what the kernel offers instead of failing
---@field evidence boolean|{network: boolean|nil, files: boolean|nil}|nil  record refusals (true)
---@field limits luxec.Limits|nil  bounds of the whole session tree
---@field unix_sockets string[]|nil  socket files outside it may connect to
---@field protect false|string[]|{defaults: boolean|nil, [integer]: string}|nil  read-only in each writable root besides git (relative to a root, absolute, or ~/ in HOME)
---@field deny_read false|string[]|{defaults: boolean|nil, [integer]: string}|nil  masked paths (absolute or ~/, globs)
---@field git_scan {depth: integer|nil, dirs: integer|nil, repos: integer|nil}|nil  bounds of the repository search

---@class luxec.Denial
---@field op string  "open", "connect", "mkdir", ...
---@field source "supervisor"|"kernel"
---@field error string  "EROFS", "EACCES", "EPERM", ...
---@field count integer  calls refused with this same (op, target); of a latest record: in a row
---@field latest true|nil  the latest refusal of an op past the records kept (one of those counted in denials_overflow), after them
---@field path string|nil
---@field to string|nil
---@field family string|nil
---@field addr string|nil
---@field port integer|nil
---@field type integer|nil  the socket's type (1 stream, 2 datagram, ...): socket, and a network call whose socket is known
---@field protocol integer|nil  its protocol (6 TCP, 17 UDP, ...): shown as "/tcp", "/udp"
---@field reason string|nil  network by name: why a connect or datagram past the proxy was refused
---@field pid integer|nil
---@field comm string|nil

---@class luxec.NetworkRecord  a request the proxy refused, or could not forward (failed)
---@field op "connect"|"http"
---@field host string
---@field port integer
---@field reason string
---@field pid integer|nil
---@field comm string|nil
---@field count integer
---@field failed true|nil

---@class luxec.NetworkReport  network by name
---@field allow string[]
---@field deny string[]
---@field proxy string  "http://127.0.0.1:3128" (also reachable at [::1]:3128)
---@field allowed table<string, integer>  requests per host
---@field traffic table<string, {sent: integer, received: integer}>  bytes per host, each way
---@field refused luxec.NetworkRecord[]
---@field failed luxec.NetworkRecord[]

---@class luxec.SandboxReport
---@field mode string
---@field network string|luxec.NetworkReport
---@field layers {landlock: integer, seccomp: boolean, notify: boolean, userns: boolean, mountns: boolean, pidns: boolean, ipcns: boolean, netns: boolean, caps_dropped: boolean}
---@field mount_copied boolean|nil  with a mount namespace: its tree was copied whole from the one prepared at an earlier spawn of the same resolved policy (false: built mount by mount)
---@field degraded string[]|nil  what is weaker than the policy asked (best_effort)
---@field denials luxec.Denial[]
---@field denials_total integer
---@field denials_overflow table<string, integer>|nil
---@field notified integer|nil
---@field setup_us table<string, integer>  what starting it cost, microseconds per layer: resolve (the policy and the search of the writable roots, in Lua), prepare, launch, userns, netns, namespaces (mount, pid, IPC), mounts, dev, pid_init, clone, proc, caps, landlock, seccomp, fds (descriptors, directory and limits before execve), exec, monitor (the supervisor); a layer not made is absent
---@field protected string[]|nil
---@field masked string[]|nil
---@field reserved string[]|nil  names (".git", ".mcp.json"...) and missing protected paths the supervisor refuses to make in a writable root
---@field unprotected {path: string, reason: string}[]|nil
---@field limits table|nil  per limit: max, via ("cgroup2", "cgroup1", "rlimit", "none") and counters
---@field limits_hit string|nil  which limit ended or throttled the session, in one line

---@class luxec.sandbox
local sandbox = {}

--- One line for a denial record: "open /etc/x: EROFS (pid 4241 sh)" (control bytes escaped).
---@param d luxec.Denial
---@return string
function sandbox.describe(d) end

--- The caller's bytes made printable: control characters, escapes, bidirectional overrides
--- and bytes that are no UTF-8 escaped.
---@param s string
---@return string
function sandbox.escape(s) end

return sandbox
