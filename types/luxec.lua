---@meta luxec
-- luacheck: ignore
--- luxec's public Lua API for lua-language-server (LuaCATS). Never loaded: it describes what
--- `require("luxec")` returns, as the guides in docs/ document it (luxec.sandbox.lua and
--- luxec.engine.lua beside it: those modules). .luarc.json puts this folder on the language
--- server's library.

---@class luxec
---@field version string  luxec's version
---@field EOF luxec.Sentinel  an expect pattern: the end of the session's output
---@field TIMEOUT luxec.Sentinel  an expect pattern: the end of the wait
---@field defaults luxec.ProcessDefaults  the defaults spawn uses (change them with care)
---@field ssh luxec.ssh  log in with OpenSSH's client and run commands (pexpect's pxssh)
---@field replwrap luxec.replwrap  drive a REPL: repl:run(code) -> its output
---@field remote luxec.remote  sessions on a `luxec serve` elsewhere or on the local daemon
local luxec = {}

---@class luxec.StreamOptions
---@field timeout number|false|nil  seconds a TCP connect may take (30)
---@field read_only boolean|nil  open a path for reading only (the default for a FIFO)
---@field head integer|nil  bytes kept from the start of the stream (512 KiB)
---@field tail integer|nil  bytes kept from the end (512 KiB)
---@field log string|nil  append the whole stream to this file
---@field log_max integer|nil  stop appending after this many bytes
---@field log_to file*|fun(data: string, stream: integer)|nil  what arrives, as it arrives
---@field record string|nil  record the session into this file (asciicast v2)

---@class luxec.Stream: luxec.Process
---@field target string  the target as named in errors ("tcp:host:port", a path, "fd 3")
---@field kind "tcp"|"unix"|"tty"|"fifo"|"device"

--- A session over a descriptor no child of luxec's owns (pexpect's fdspawn, socket spawn):
--- a path (a serial device or terminal, a FIFO, a unix socket), "tcp:HOST:PORT" or
--- {host =, port =}, "unix:/path", or a descriptor number the host inherited. expect, send,
--- read, wait and close work as on a spawned session; it finishes at EOF (the peer closed).
--- signal, terminate, kill, resize and wait_input raise (there is no process). Returns the
--- session, or nil, "ECONNREFUSED: connection refused (tcp:127.0.0.1:1)", "ECONNREFUSED".
---@param target string|integer|{host: string, port: integer}
---@param opts luxec.StreamOptions|nil
---@return luxec.Stream|nil, string|nil, string|nil
function luxec.open_stream(target, opts) end

---@class luxec.Sentinel

---@class luxec.ProcessDefaults
---@field head integer  bytes kept from the start of each stream (512 KiB)
---@field tail integer  bytes kept from the end of each stream (512 KiB)
---@field grace_ms integer  after exit, how long to wait for EOF before naming holders (50)
---@field rows integer  a terminal's rows (24)
---@field cols integer  a terminal's columns (80)
---@field terminate_signal string  terminate's first signal ("TERM")
---@field terminate_grace_ms integer  terminate's grace before KILL (2000)
---@field terminate_rest_ms integer  after it, when the tree outside the program's group has it (50)

-- Tasks and waits -------------------------------------------------------------------------

---@class luxec.Task
---@field done boolean  true once the function returned or raised
---@field ok boolean|nil  whether it returned normally (nil while running)
---@field error any  what it raised, if it did
local Task = {}

--- Wait for the task to end: `true, results...`, or `false, err`.
---@return boolean ok
---@return any ...
function Task:wait() end

--- Start `fn(...)` as a task: it runs at once until its first wait; inside it every waiting
--- call yields, so other tasks, timers and I/O keep running. An error nobody waits on is
--- printed with a traceback and makes the host exit with status 1.
---@param fn fun(...): ...
---@param ... any
---@return luxec.Task
function luxec.go(fn, ...) end

--- Wait `seconds` (fractions allowed, like every unsuffixed time value of the API; options
--- named `*_ms` are milliseconds): yields inside a task, drives the loop from top-level code,
--- and raises inside a plain loop callback. `sleep(0)` returns after one turn of the loop,
--- its look for I/O included (a task that sleeps 0 between pieces of work starves no other).
---@param seconds number  non-negative, finite
function luxec.sleep(seconds) end

--- Whether the caller runs inside a task started by luxec.go (where waits yield).
---@return boolean
function luxec.in_task() end

-- Processes -------------------------------------------------------------------------------

---@class luxec.SpawnOptions
---@field env table<string, string|false>|nil  the exact environment; with inherit_env, overrides of the host's (false removes a variable)
---@field inherit_env boolean|nil  start from the host's environment
---@field cwd string|nil  the working directory
---@field arg0 string|nil  argv[0] as the program sees it
---@field tty boolean|{rows: integer|nil, cols: integer|nil, raw: boolean|nil}|nil  a new PTY (24x80 by default), the child its session leader; raw: in raw mode before the program runs
---@field stdin "pipe"|"null"|nil  pipe sessions ("pipe"; "null" with tty is an error)
---@field stderr "merge"|"pipe"|nil  pipe sessions only: merged in arrival order ("merge") or a second stream
---@field head integer|nil  bytes kept from the start of each stream (512 KiB)
---@field tail integer|nil  bytes kept from the end of each stream (512 KiB)
---@field log string|nil  append the whole output stream to this file
---@field log_stderr string|nil  the same for stderr when it is a stream of its own (stderr = "pipe", else an error)
---@field log_max integer|nil  stop appending to each log after this many bytes (needs log or log_stderr)
---@field grace_ms integer|nil  after exit, how long to wait for EOF (50)
---@field cgroup boolean|nil  false: do without a cgroup (a cgroup is used where one can be made)
---@field sandbox luxec.SandboxPolicy|nil  confine the session (see luxec.sandbox)
---@field record string|nil  write an asciicast v2 recording of the session to this file
---@field echo boolean|nil  false: the terminal starts without echo (set before the program runs; with tty only)
---@field log_to file*|fun(data: string, stream: integer)|nil  the output as it arrives (pexpect's logfile_read); it does not keep the host running
---@field timeout number|false|nil  p.timeout from the start: expect's default in seconds (pexpect's spawn(timeout=)); false: none

---@class luxec.Holder
---@field pid integer
---@field cmd string

---@class luxec.Status
---@field pid integer
---@field running boolean
---@field exited boolean
---@field code integer|nil  the exit code, when it exited
---@field signal integer|nil  the signal that ended it
---@field signal_name string|nil  "TERM", "KILL", ...
---@field core_dumped boolean
---@field killed_by string|nil  who ended it: "terminate", "close", "timeout", ...
---@field eof boolean  every output stream reached EOF
---@field finished boolean  exited and every output stream at EOF
---@field holders luxec.Holder[]|nil  descendants still holding the output after the grace
---@field waiting_for_input boolean  the foreground program is blocked reading its terminal (or stdin pipe), nothing sent left unread, no signal due
---@field echo_off boolean|nil  the terminal does not echo (a password prompt)
---@field canonical boolean|nil  the terminal is in line mode
---@field tty boolean
---@field cgroup boolean  the session has a cgroup of its own
---@field write_queued integer  bytes written but not yet taken by the program
---@field input_dropped integer  bytes written that the program never took: still queued (or unread in its pipe) when its input ended (it exited, closed its stdin, its terminal hung up) or the session was closed
---@field stdin_error string|nil  why the input ended, as an errno name ("EPIPE": nothing reads it)
---@field sandbox luxec.SandboxReport|nil  a sandboxed session's layers and evidence

---@class luxec.Snapshot
---@field head string  the first bytes kept
---@field tail string  the last bytes kept
---@field dropped integer  bytes dropped between them
---@field total integer  every byte the stream carried

---@class luxec.Reader
local Reader = {}

--- What arrived since this reader's last read.
---@return string data
---@return integer dropped  bytes no longer held
---@return integer gap_at  where in data they were (the bytes of data before the gap; only
---  meaningful when dropped > 0)
function Reader:read() end

---@class luxec.TerminateResult
---@field signal string  the first signal sent
---@field graceful boolean  everything ended within the grace
---@field killed integer  processes killed after the grace
---@field method "cgroup"|"process group and sweep"|"already gone"

---@class luxec.TerminateOptions
---@field signal string|integer|nil  "TERM" by default
---@field grace_ms integer|nil  2000 by default

---@class luxec.Process
---@field pid integer
---@field timeout number|false|nil  expect's timeout in seconds (30; false: none)
---@field before string|nil  expect: the output before the last match
---@field after string|luxec.Sentinel|nil  expect: the last match (luxec.EOF or luxec.TIMEOUT when the output ended or the time ran out)
---@field match string|luxec.Sentinel|nil  expect: the last match (pexpect's name)
---@field captures string[]|nil  expect: the last match's captures
---@field index integer|nil  expect: the index of the pattern that matched last
local Process = {}

--- Wait until finished (exited and every stream at EOF, or the grace after the exit ran out
--- while something else holds the output open); timeout in seconds. After close() — also a
--- close while it waits, from a task or a callback — the status the session had then, at
--- once.
---@param opts {timeout: number|nil}|nil
---@return luxec.Status|nil status
---@return "timeout"|nil err
function Process:wait(opts) end

--- Whether the session finished.
---@return boolean
function Process:finished() end

--- Output since this process's last read.
---@param stream 1|2|nil  1: stdout (everything when merged), 2: stderr apart
---@return string data
---@return integer dropped
---@return integer gap_at  where in data the dropped bytes were (only meaningful when dropped > 0)
function Process:read(stream) end

--- An independent reader with its own cursor.
---@param stream 1|2|nil
---@return luxec.Reader
function Process:reader(stream) end

--- Wait until new output arrives, the stream reaches EOF or the process finishes; true
--- unless the timeout (seconds) passed. Past EOF it waits for the exit.
---@param opts {timeout: number|nil, stream: 1|2|nil}|nil
---@return boolean
function Process:wait_output(opts) end

--- Whether the stream reached EOF.
---@param stream 1|2|nil
---@return boolean
function Process:eof(stream) end

--- Page through the log (or what is held): bytes from offset.
---@param offset integer
---@param length integer
---@param stream 1|2|nil
---@return string|nil data
---@return string|nil err
function Process:read_range(offset, length, stream) end

--- What is held, without consuming it.
---@param stream 1|2|nil
---@return luxec.Snapshot
function Process:snapshot(stream) end

--- Write without blocking the loop (what the pipe does not take is queued): the bytes
--- accepted, or nil, "EPIPE: broken pipe", "EPIPE" after the child closed its end (on a
--- terminal: once its output ended). send, sendline, sendcontrol and a terminal's sendeof
--- return the same then.
---@param data string
---@return integer|nil accepted
---@return string|nil err
---@return string|nil code
function Process:write(data) end

--- EOF on stdin (the EOF character on a PTY); true also when the input is already gone (no
--- more input reaches the program either way). A terminal made raw (tty = {raw = true},
--- p:set_raw()) has no end of input: nil, "EINVAL: ...", "EINVAL", and nothing is sent.
---@return boolean|nil ok
---@return string|nil err
---@return string|nil code
function Process:close_stdin() end

--- Send a signal to the program, or to its process group.
---@param sig string|integer  "INT", "TERM", 9, ...
---@param target "group"|nil
---@return boolean|nil ok
---@return string|nil err
function Process:signal(sig, target) end

--- pexpect's kill(sig): p:signal(sig), to the program only (not its group, not its tree: that
--- is p:terminate()).
---@param sig string|integer|nil  "KILL" when nil
---@return boolean|nil ok
---@return string|nil err
function Process:kill(sig) end

--- Resize the terminal (SIGWINCH).
---@param rows integer
---@param cols integer
---@return boolean|nil ok
---@return string|nil err
function Process:resize(rows, cols) end

--- Register a listener: "output" gets fn(data, stream) as output arrives, "exit" gets
--- fn(status) once finished. The session then keeps the host running until it finishes,
--- unless opts.hold is false.
---@param event "output"|"exit"
---@param fn function
---@param opts {hold: boolean|nil}|nil
---@return luxec.Process self
function Process:on(event, fn, opts) end

--- The session's status; after close(), the status it had then (a program still running
--- then as killed by SIGKILL, killed_by "close").
---@return luxec.Status
function Process:status() end

--- TERM (or opts.signal) to every process of the session, the grace, then KILL to what is
--- left, escapees included: when it returns nothing of the session is alive.
---@param opts luxec.TerminateOptions|nil
---@return luxec.TerminateResult
function Process:terminate(opts) end

--- Kill whatever still runs (SIGKILL to the whole tree) and free the session. Idempotent;
--- a to-be-closed variable and garbage collection do the same. Every wait on the session
--- (in other tasks, or the top-level wait a callback closed it in) ends at once: wait with
--- the status it was closed with, wait_output with true, expect as at EOF ("eof: the session
--- ended (closed, killed by SIGKILL) ...", or the EOF pattern's index).
function Process:close() end

-- Automation (Expect, pexpect) ------------------------------------------------------------

--- A plain string, a Lua pattern, a PCRE2 regex (flags: letters of i caseless, m multiline,
--- s dotall, x extended, U ungreedy, u UTF-8 characters; another letter raises), EOF or
--- TIMEOUT.
---@alias luxec.Pattern string|{lua: string}|{re: string, flags: string|nil}|luxec.Sentinel

--- Wait until the output matches one of `patterns` and consume it through the match. The
--- earliest match wins, ties going to the first listed. Returns the pattern's index, the
--- matched text and the captures; sets before, after, match and captures. Without an EOF or
--- TIMEOUT pattern the end returns nil, "eof: ...", "eof" or nil, "timeout: ...", "timeout".
--- opts.searchwindowsize (pexpect's; window is the same option): each look searches only
--- the last N bytes of the unmatched output.
---@param patterns luxec.Pattern|luxec.Pattern[]
---@param opts {timeout: number|false|nil, window: integer|nil, searchwindowsize: integer|nil}|nil
---@return integer|nil index
---@return string|luxec.Sentinel|nil match_or_message
---@return string|nil ...
function Process:expect(patterns, opts) end

--- expect with plain strings (and EOF / TIMEOUT) only.
---@param patterns string|luxec.Sentinel|(string|luxec.Sentinel)[]
---@param opts {timeout: number|false|nil, window: integer|nil, searchwindowsize: integer|nil}|nil
---@return integer|nil index
---@return string|luxec.Sentinel|nil match_or_message
function Process:expect_exact(patterns, opts) end

--- The output expect has not consumed yet, what arrived since included (pexpect's
--- p.buffer); with `new`, the unmatched output becomes `new` (p:buffer("") drops it).
---@param new string|nil
---@return string
function Process:buffer(new) end

--- Write s as it is; the bytes accepted.
---@param s string
---@return integer|nil
---@return string|nil err
function Process:send(s) end

--- Write s and a line end ("\n").
---@param s string
---@return integer|nil
---@return string|nil err
function Process:sendline(s) end

--- A control key: "c" (or "^C") writes byte 3 on a terminal; on a pipe session "c", "\\"
--- and "z" signal the process group and "d" closes stdin.
---@param key string
---@return integer|boolean|nil
---@return string|nil err
function Process:sendcontrol(key) end

--- The end of input, as pexpect's sendeof.
---@return boolean|nil ok
---@return string|nil err
function Process:sendeof() end

--- Wait until the program is blocked reading its terminal (with echo_off: at a prompt that
--- does not echo). true, or nil, "timeout: ...", "timeout" / nil, "eof: ...", "eof".
---@param opts {echo_off: boolean|nil, timeout: number|false|nil}|nil
---@return boolean|nil ok
---@return string|nil err
---@return "timeout"|"eof"|nil kind
function Process:wait_input(opts) end

--- Wait until the terminal's echo is off (pexpect's waitnoecho), whether or not the program
--- reads yet: true, or nil, "timeout: ...", "timeout" / nil, "eof: ...", "eof" / nil,
--- "ENOTTY: ...", "ENOTTY" for a pipe session.
---@param opts {timeout: number|false|nil}|nil
---@return boolean|nil ok
---@return string|nil err
---@return "timeout"|"eof"|"ENOTTY"|nil kind
function Process:wait_echo_off(opts) end

--- Turn the terminal's echo on or off: true, or nil, "ENOTTY: ...", "ENOTTY" for a pipe
--- session.
---@param on boolean
---@return boolean|nil ok
---@return string|nil err
---@return string|nil code
function Process:setecho(on) end

--- The terminal in raw mode (on true or nil: no echo, no line editing, no signal characters,
--- no output processing) or back to cooked mode with echo (false): true, or nil,
--- "ENOTTY: ...", "ENOTTY" for a pipe session.
---@param on boolean|nil
---@return boolean|nil ok
---@return string|nil err
---@return string|nil code
function Process:set_raw(on) end

--- Whether the terminal echoes now (false for a pipe session).
---@return boolean
function Process:getecho() end

---@class luxec.InteractOptions
---@field escape string|false|nil  the key that ends it ("^]"), false for none
---@field replay boolean|nil  false: do not show what the session printed before
---@field start fun(term: any)|nil  called once the terminal is raw, before any key is forwarded
---@field output fun(data: string)|nil  shows output instead of writing it to the terminal
---@field input fun(data: string): string|nil  filters each read of keys (nil drops it)

--- The person at the terminal takes over until the escape key, the session's end or the
--- end of input.
---@param opts luxec.InteractOptions|nil
---@return "escape"|"exit"|"eof"
function Process:interact(opts) end

---@class luxec.Screen
---@field lines string[]  the text of each row, trailing blanks removed
---@field rows integer
---@field cols integer
---@field cursor {row: integer, col: integer, visible: boolean}  1-based
---@field title string|nil  the window title the program set
---@field altscreen boolean  the program is on the alternate screen
local Screen = {}

--- The screen as text, one line a row.
---@return string
function Screen:text() end

--- Row and column where text first shows, or nil.
---@param text string
---@return integer|nil row
---@return integer|nil col
function Screen:find(text) end

--- A terminal session's screen as libvterm renders it.
---@return luxec.Screen
function Process:screen() end

--- Wait until the screen shows text (or fn(screen) returns true): the screen, or nil,
--- "timeout: ...", "timeout" / nil, "eof: ...", "eof".
---@param what string|fun(screen: luxec.Screen): boolean
---@param opts {timeout: number|false|nil}|nil
---@return luxec.Screen|nil screen
---@return string|nil err
---@return "timeout"|"eof"|nil kind
function Process:expect_screen(what, opts) end

--- Start argv without a shell. A start that fails returns nil, "ENOENT: no such file or
--- directory (exec: prog)", "ENOENT"; a bad option raises an error naming it.
---@param argv string[]
---@param opts luxec.SpawnOptions|nil
---@return luxec.Process|nil process
---@return string|nil err
---@return string|nil code  "ENOENT", "EACCES", "EMFILE", ...
function luxec.spawn(argv, opts) end

---@class luxec.RunOptions: luxec.SpawnOptions
---@field timeout number|false|nil  seconds; then the tree is terminated and timed_out is true (false, nil or -1, pexpect's "the default": no limit)
---@field input string|nil  written to stdin, then EOF
---@field events table|nil  {[pattern] = answer} or {{pattern, answer}, ...}: each match of a pattern (as expect takes them) is answered with the string, or with fn(p, match, count)'s string (count: the events answered before, 0 at the first, as pexpect's event_count); nil or false from fn sends nothing, any other value (true) ends the run. A terminal unless tty = false

---@class luxec.RunResult
---@field code integer|nil
---@field signal integer|nil
---@field signal_name string|nil
---@field core_dumped boolean
---@field output string  stdout (everything when stderr is merged)
---@field dropped integer  bytes of output dropped between head and tail
---@field stderr string|nil  with stderr = "pipe"
---@field stderr_dropped integer|nil
---@field timed_out boolean
---@field holders luxec.Holder[]|nil
---@field pid integer
---@field sandbox luxec.SandboxReport|nil
---@field events integer|nil  with events: how many were answered
---@field stopped boolean|nil  with events: an answer function returned true and the run ended the program

--- Run argv to completion.
---@param argv string[]
---@param opts luxec.RunOptions|nil
---@return luxec.RunResult|nil result
---@return string|nil err
---@return string|nil code
function luxec.run(argv, opts) end

--- Terminate many sessions at once: one grace for all, one kill for what is left. A closed
--- session in procs is over already ("already gone").
---@param procs luxec.Process[]
---@param opts luxec.TerminateOptions|nil
---@return luxec.TerminateResult
function luxec.terminate_all(procs, opts) end

-- ssh logins ------------------------------------------------------------------------------

---@class luxec.ssh
---@field defaults {ssh: string, timeout: number, poll_ms: integer}

---@class luxec.SshLoginOptions
---@field host string
---@field user string|nil
---@field port integer|nil
---@field password string|nil
---@field key string|nil  an identity file (only it is offered)
---@field passphrase string|nil  the key's passphrase
---@field options table<string, string|number>|nil  ssh -o settings
---@field config string|nil  ssh -F
---@field accept_new_host_key boolean|nil  answer "yes" for a host not known yet (false: fail naming its fingerprint)
---@field timeout number|nil  seconds for the whole login (30)
---@field ssh string|nil  the client program ("ssh")
---@field env table<string, string|false>|nil  overrides of the client's environment (TERM is "dumb" unless given)

---@class luxec.SshSession
---@field process luxec.Process  the ssh client's session
---@field prompt_re string  the unique prompt (a PCRE2 regex; its capture is $?)
---@field timeout number|false  the default timeout of run and prompt (seconds)
local SshSession = {}

--- Run one command line: its output ("\r\n" as "\n") and exit status, or nil, message,
--- "timeout"|"eof".
---@param cmd string
---@param opts {timeout: number|false|nil}|nil
---@return string|nil output
---@return integer|string|nil status_or_err
---@return string|nil code
function SshSession:run(cmd, opts) end

--- Wait for the unique prompt: the output before it and the status it shows.
---@param opts {timeout: number|false|nil}|nil
---@return string|nil output
---@return integer|string|nil status_or_err
---@return string|nil code
function SshSession:prompt(opts) end

--- "exit", then ssh's status (the session is closed).
---@param opts {timeout: number|false|nil}|nil
---@return luxec.Status|nil status
---@return string|nil err
---@return string|nil code
function SshSession:logout(opts) end

--- End the session at once.
function SshSession:close() end

--- Log in: the session, or nil, message, code ("auth", "host_key", "timeout", "eof").
---@param opts luxec.SshLoginOptions
---@return luxec.SshSession|nil session
---@return string|nil err
---@return string|nil code
function luxec.ssh.login(opts) end

-- REPLs ------------------------------------------------------------------------------------

---@class luxec.ReplOptions
---@field prompt string  the prompt the REPL shows (or the one init sets)
---@field continuation string|nil  its continuation prompt
---@field init string|nil  a line sent at orig_prompt that sets the prompt
---@field orig_prompt string|table|nil  the first prompt, or a pattern of it ({re = "[$#] "}; needed with init)
---@field finish string|nil  a line sent once when the code ends inside a statement
---@field cancel string|false|nil  the line that abandons an open statement (^C by default; false: the repl is closed)
---@field timeout number|nil  seconds for the start and each run (30)
---@field env table<string, string|false>|nil
---@field cwd string|nil

---@class luxec.ReplStartOptions
---@field command string|nil  the program (python3, bash, sqlite3, node)
---@field args string[]|nil  more arguments (sqlite3: the database file)
---@field timeout number|nil
---@field env table<string, string|false>|nil
---@field cwd string|nil

---@class luxec.Repl
---@field process luxec.Process
---@field prompt string
---@field continuation string|nil
---@field timeout number|false
local Repl = {}

--- Run code (one line or several): its output, or nil, message, "timeout"|"eof"|"incomplete".
---@param code string
---@param opts {timeout: number|false|nil}|nil
---@return string|nil output
---@return string|nil err
---@return string|nil code
function Repl:run(code, opts) end

--- ^C, then the output before the prompt.
---@param opts {timeout: number|false|nil}|nil
---@return string|nil output
---@return string|nil err
---@return string|nil code
function Repl:interrupt(opts) end

function Repl:close() end

---@class luxec.replwrap
---@overload fun(argv: string[], opts: luxec.ReplOptions): luxec.Repl|nil, string|nil, string|nil
local replwrap = {}

---@param opts luxec.ReplStartOptions|nil
---@return luxec.Repl|nil repl
---@return string|nil err
---@return string|nil code
function replwrap.python(opts) end

---@param opts luxec.ReplStartOptions|nil
---@return luxec.Repl|nil repl
---@return string|nil err
---@return string|nil code
function replwrap.bash(opts) end

---@param opts luxec.ReplStartOptions|nil
---@return luxec.Repl|nil repl
---@return string|nil err
---@return string|nil code
function replwrap.sqlite3(opts) end

---@param opts luxec.ReplStartOptions|nil
---@return luxec.Repl|nil repl
---@return string|nil err
---@return string|nil code
function replwrap.node(opts) end

return luxec
