---@meta luxec.engine
-- luacheck: ignore
--- require("luxec.engine"): Codex's exec_command / write_stdin on luxec's sessions.

---@class luxec.ExecConfig
---@field cwd string|nil  where workdir is relative to
---@field shell string|nil  the shell cmd runs in
---@field login boolean|nil  [shell, "-lc", cmd] (false: "-c")
---@field deterministic boolean|nil  session ids 1000, 1001, ...
---@field max_sessions integer|nil  64
---@field timeout_ms integer|nil  a default hard timeout
---@field sandbox luxec.SandboxPolicy|nil  passed to luxec.spawn
---@field env table|nil  {inherit = "all"|"core"|"none", default_excludes, exclude, set, include_only}
---@field on_denial fun(verdict: table, args: table): boolean|nil  true reruns without the sandbox
---@field [string] any  every other key of luxec.engine.defaults

---@class luxec.ExecArgs
---@field cmd string
---@field workdir string|nil
---@field shell string|nil
---@field login boolean|nil
---@field tty boolean|nil
---@field yield_time_ms integer|nil  10000, clamped 250..30000
---@field max_output_tokens integer|nil  10000
---@field timeout_ms integer|nil  a hard limit: the tree is terminated, exit code 124
---@field clean boolean|nil
---@field until string|nil  return when the cleaned output matches this regex (state "matched")
---@field input string|string[]|nil  answers, each written when the program next waits for input
---@field keep "head"|"tail"|"both"|nil  which end of a long output is kept
---@field grep string|nil  also list the lines of the call's whole output matching this regex
---@field context integer|nil  with grep: lines around each match (0..20)
---@field terminate integer[]|nil  sessions to end once this call is over

---@class luxec.WriteArgs
---@field session_id integer
---@field chars string|nil  raw; "" polls
---@field yield_time_ms integer|nil  250
---@field max_output_tokens integer|nil
---@field until string|nil
---@field keep "head"|"tail"|"both"|nil
---@field grep string|nil
---@field context integer|nil

---@class luxec.ExecResult
---@field chunk_id string
---@field wall_time number  seconds
---@field exit_code integer|nil  when the process exited
---@field session_id integer|nil  when it still runs
---@field state "exited"|"running"|"matched"|"waiting_for_input"|"waiting_for_password"|"timed_out"
---@field original_token_count integer
---@field output string
---@field truncated boolean
---@field removed integer
---@field dropped integer
---@field cleaned integer
---@field log_range {path: string, from: integer, to: integer}|nil
---@field sandbox table|nil
---@field warnings string[]
---@field match string|nil  what `until` matched
---@field log_from integer|nil  the output byte this result starts at
---@field log_offset integer|nil  the output byte it reached
---@field grep {pattern: string, from: integer, to: integer, complete: boolean, next_offset: integer, matches: {offset: integer, line: string}[]}|nil
---@field terminated integer[]|nil  sessions `terminate` ended

---@class luxec.ExecEngine
local Engine = {}

--- Codex's exec_command; never raises: nil and a message on bad input.
---@param args luxec.ExecArgs
---@return luxec.ExecResult|nil
---@return string|nil err
function Engine:exec_command(args) end

--- Codex's write_stdin; never raises.
---@param args luxec.WriteArgs
---@return luxec.ExecResult|nil
---@return string|nil err
function Engine:write_stdin(args) end

--- End the wait of the call waiting on a session now; whether one was waiting.
---@param target integer|luxec.Process
---@return boolean
function Engine:interrupt(target) end

--- The open sessions, most recently used first.
---@return {session_id: integer, pid: integer, command: string, tty: boolean, cwd: string, running: boolean, age_ms: number, log: string|nil}[]
function Engine:list() end

--- End a session's whole process tree and forget it.
---@param id integer
---@return boolean|nil ok
---@return string|nil err
function Engine:terminate(id) end

--- End every session.
function Engine:shutdown() end

---@class luxec.engine
---@field defaults table  every limit and switch with its default
local engine = {}

--- A new engine; raises on a bad config.
---@param config luxec.ExecConfig|nil
---@return luxec.ExecEngine
function engine.new(config) end

--- The text a model reads for a result.
---@param r luxec.ExecResult
---@return string
function engine.format(r) end

return engine
