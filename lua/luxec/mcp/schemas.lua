--- luxec.mcp.schemas: the tools `luxec mcp` declares — names, descriptions, the JSON Schemas
--- of their arguments (inputSchema) and of their structured results (outputSchema), and their
--- annotations. Plain data: luxec.mcp.tools runs them.
local json = require("luxec.json")

local M = {}

local array = json.array
local MAX_MS = (1 << 31) - 1

-- Schemas ----------------------------------------------------------------------------------

local function int(description, min)
  return { type = "integer", minimum = min or 0, maximum = MAX_MS, description = description }
end

local function str(description)
  return { type = "string", description = description }
end

local function bool(description)
  return { type = "boolean", description = description }
end

local STATES = { "exited", "running", "waiting_for_input", "waiting_for_password", "timed_out" }

local SANDBOX_SCHEMA = {
  type = "object",
  description = "The sandbox verdict: evidence of what it denied, or a labelled guess",
  properties = {
    denied = bool("whether the sandbox denied something"),
    guess = bool("true: a reading of the output, not evidence"),
    reason = str("what was denied (or why it looks so)"),
    mode = str("the sandbox mode the command ran under"),
    network = str("\"deny\", \"allow\" or \"by name: \" and the hosts allowed"),
    denials_total = int("denials recorded in all"),
    denials = { type = "array", items = { type = "object" },
      description = "the first denials: op, path or addr:port, pid, comm, description" },
  },
  required = array({ "denied", "guess" }),
}

local EXEC_OUTPUT = {
  type = "object",
  properties = {
    chunk_id = str("6 hex digits, new for each call"),
    wall_time = { type = "number", description = "seconds this call waited" },
    exit_code = { type = "integer", description = "when the process exited (124: timed out)" },
    session_id = { type = "integer", description = "when it still runs: pass to write_stdin" },
    state = { type = "string", enum = array(STATES) },
    command = str("the command that ran (after a policy rewrite)"),
    signal_name = str("the signal that killed it, without SIG"),
    original_token_count = int("ceil(bytes / 4) of the output before truncation"),
    output = str("output since the previous call, cleaned and truncated"),
    truncated = bool("whether bytes were cut from the middle of the output"),
    removed = int("bytes of the output not in `output`"),
    dropped = int("bytes the in-memory buffer dropped (they are in the log)"),
    cleaned = int("raw bytes cleaning removed (escape sequences, rewritten lines)"),
    log_range = {
      type = "object",
      description = "where the removed bytes are: read them with read_output",
      properties = { path = str("the session's log"), from = int("first byte"), to = int("end") },
      required = array({ "path", "from", "to" }),
    },
    sandbox = SANDBOX_SCHEMA,
    sandbox_retry = SANDBOX_SCHEMA,
    warnings = { type = "array", items = { type = "string" } },
  },
  required = array({ "chunk_id", "wall_time", "state", "original_token_count", "output",
    "truncated", "removed", "dropped", "cleaned", "warnings" }),
}

local SESSION_ID = int("Identifier of the running session (from exec_command)", 0)

--- The tools as tools/list returns them.
M.TOOLS = array({
  {
    name = "exec_command",
    title = "Run a command",
    description = "Runs a command in a shell (in a PTY with tty=true) and returns its output "
      .. "when it exits or when yield_time_ms passes. A command still running returns a "
      .. "session_id: send it input or poll it with write_stdin.",
    inputSchema = {
      type = "object",
      properties = {
        cmd = str("Shell command to execute."),
        workdir = str("Working directory for the command (relative to the server's); "
          .. "defaults to the server's working directory."),
        shell = str("Shell binary to launch; defaults to the configured shell."),
        login = bool("Whether to run the shell with -l (login) semantics. Defaults to true."),
        tty = bool("Whether to allocate a TTY for the command. Defaults to false (plain "
          .. "pipes, stdin /dev/null); set to true for interactive programs."),
        yield_time_ms = int("How long to wait (in milliseconds) for the command to finish "
          .. "before returning (default 10000, clamped to 250..30000)."),
        max_output_tokens = int("Maximum number of tokens to return (about 4 bytes each). "
          .. "Excess output is cut from the middle."),
        timeout_ms = int("Hard time limit: the command's process tree is ended after this "
          .. "many milliseconds (exit code 124).", 1),
        clean = bool("Strip escape sequences and keep only the final state of rewritten "
          .. "lines (default: true on pipes, false on a TTY)."),
      },
      required = array({ "cmd" }),
    },
    outputSchema = EXEC_OUTPUT,
    annotations = { title = "Run a command", readOnlyHint = false, destructiveHint = true,
      idempotentHint = false, openWorldHint = true },
  },
  {
    name = "write_stdin",
    title = "Write to a session",
    description = "Writes characters to a running exec_command session's stdin (raw: add "
      .. "\\n for Enter, \\u0003 for Ctrl-C) and returns the output since the last call. "
      .. "Empty chars polls for more output.",
    inputSchema = {
      type = "object",
      properties = {
        session_id = SESSION_ID,
        chars = str("Bytes to write to stdin (may be empty to poll)."),
        yield_time_ms = int("How long to wait (in milliseconds) for output before "
          .. "returning (default 250; a poll waits at least 5000 unless the program waits "
          .. "for input)."),
        max_output_tokens = int("Maximum number of tokens to return. Excess output is cut "
          .. "from the middle."),
      },
      required = array({ "session_id" }),
    },
    outputSchema = EXEC_OUTPUT,
    annotations = { title = "Write to a session", readOnlyHint = false, destructiveHint = true,
      idempotentHint = false, openWorldHint = true },
  },
  {
    name = "list_sessions",
    title = "List sessions",
    description = "Lists the sessions that are still open, most recently used first.",
    inputSchema = { type = "object", properties = {} },
    outputSchema = {
      type = "object",
      properties = {
        sessions = {
          type = "array",
          items = {
            type = "object",
            properties = {
              session_id = { type = "integer" }, pid = { type = "integer" },
              command = { type = "string" }, tty = { type = "boolean" },
              cwd = { type = "string" }, running = { type = "boolean" },
              age_ms = { type = "number" }, log = { type = "string" },
            },
            required = array({ "session_id", "pid", "command", "tty", "cwd", "running",
              "age_ms" }),
          },
        },
      },
      required = array({ "sessions" }),
    },
    annotations = { title = "List sessions", readOnlyHint = true, destructiveHint = false,
      idempotentHint = true, openWorldHint = false },
  },
  {
    name = "terminate_session",
    title = "Terminate a session",
    description = "Ends a session's whole process tree (TERM, then KILL after a grace) and "
      .. "forgets the session.",
    inputSchema = {
      type = "object",
      properties = { session_id = SESSION_ID },
      required = array({ "session_id" }),
    },
    outputSchema = {
      type = "object",
      properties = { session_id = { type = "integer" }, terminated = { type = "boolean" } },
      required = array({ "session_id", "terminated" }),
    },
    annotations = { title = "Terminate a session", readOnlyHint = false,
      destructiveHint = true, idempotentHint = true, openWorldHint = false },
  },
  {
    name = "read_output",
    title = "Read a session's log",
    description = "Reads any byte range of a session's whole output (its log), e.g. what "
      .. "truncation left out: a result's truncation marker names the range.",
    inputSchema = {
      type = "object",
      properties = {
        session_id = int("The session whose output to read"),
        log = str("Or the log path a truncated result named (log_range.path)"),
        offset = int("First byte to read (default 0)"),
        length = int("How many bytes (default 65536; at most the configured maximum)"),
      },
    },
    outputSchema = {
      type = "object",
      properties = {
        session_id = { type = "integer" }, log = { type = "string" },
        offset = { type = "integer" }, length = { type = "integer" },
        total = { type = "integer" }, next_offset = { type = "integer" },
        eof = { type = "boolean" },
      },
      required = array({ "offset", "length", "total", "next_offset", "eof" }),
    },
    annotations = { title = "Read a session's log", readOnlyHint = true,
      destructiveHint = false, idempotentHint = true, openWorldHint = false },
  },
})

local BY_NAME = {}
for _, t in ipairs(M.TOOLS) do BY_NAME[t.name] = t end

--- Whether `name` is one of the tools.
---@param name string
---@return boolean
function M.known(name)
  return BY_NAME[name] ~= nil
end

--- The tools' names, comma-separated (for error messages).
---@return string
function M.names()
  local names = {}
  for _, t in ipairs(M.TOOLS) do names[#names + 1] = t.name end
  return table.concat(names, ", ")
end

return M
