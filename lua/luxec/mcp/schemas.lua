--- luxec.mcp.schemas: the tools `luxec mcp` declares — names, descriptions, the JSON Schemas
--- of their arguments (inputSchema) and of their structured results (outputSchema), and their
--- annotations — made from the server's configuration (`M.tools(cfg)`: its defaults, clamps
--- and what it allows), written for a model: what saves a call is said where it reads first.
--- luxec.mcp.tools runs them.
local json = require("luxec.json")

local M = {}

local array = json.array
local MAX_MS = (1 << 31) - 1

-- Schemas ----------------------------------------------------------------------------------

-- (max false: no maximum, a value of any size is taken and clamped where used)
local function int(description, min, max)
  if max == nil then max = MAX_MS end
  return { type = "integer", minimum = min or 0, maximum = max or nil, description = description }
end

local function str(description)
  return { type = "string", description = description }
end

local function bool(description)
  return { type = "boolean", description = description }
end

local STATES = { "exited", "running", "matched", "waiting_for_input", "waiting_for_password",
  "timed_out" }

local function sandbox_schema(description)
  return {
    type = "object",
    description = description,
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
end

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
    match = str("the text `until` matched (state \"matched\")"),
    log_from = int("the output byte this result's output starts at (read_output's offset)"),
    log_offset = int("the output byte it reached: read_output offset=log_offset reads what "
      .. "came after"),
    total_lines = int("lines of the whole output, when it was cut"),
    truncated = bool("whether bytes were cut from the output"),
    removed = int("output bytes the cut removed (the marker's range)"),
    dropped = int("bytes the in-memory buffer dropped (they are in the log)"),
    cleaned = int("raw bytes cleaning removed (escape sequences, rewritten lines)"),
    log_range = {
      type = "object",
      description = "where the removed bytes are: read them with read_output",
      properties = { path = str("the session's log"), from = int("first byte"),
        to = int("the byte after the last (exclusive)") },
      required = array({ "path", "from", "to" }),
    },
    sandbox = sandbox_schema("The sandbox verdict: evidence of what it denied, or a labelled "
      .. "guess"),
    sandbox_retry = sandbox_schema("The verdict of the first, sandboxed run, when it was denied "
      .. "and the command was run again without the sandbox (the result is the second run's)"),
    warnings = { type = "array", items = { type = "string" } },
    grep = {
      type = "object",
      description = "With `grep`: the matching lines of this call's output (the cut part too)",
      properties = { pattern = str("the regex"), from = int("first output byte searched"),
        to = int("the byte after the last searched"),
        complete = bool("false: more matches than shown; read_output grep continues at "
          .. "next_offset"), next_offset = int("where a further search continues"),
        matches = { type = "array", items = { type = "object", properties = {
          offset = { type = "integer" }, line = { type = "string" } } } } },
    },
    terminated = { type = "array", items = { type = "integer" },
      description = "With `terminate`: the sessions ended after this command" },
  },
  required = array({ "chunk_id", "wall_time", "state", "original_token_count", "output",
    "truncated", "removed", "dropped", "cleaned", "warnings" }),
}

local SESSION_ID = int("Identifier of the running session (from exec_command)", 0)

local UNTIL = "Return as soon as the output (cleaned) matches this regex (PCRE2, ^ and $ at line "
  .. "ends), e.g. \"listening on|error\"; the result's state is then \"matched\". Searched in "
  .. "the output this call returns; a match may start at most 16384 bytes before the newest "
  .. "output."
local GREP = "Also list the lines of this call's whole output that match this regex (PCRE2, "
  .. "matched on cleaned lines), each as \"OFFSET: line\" — found even in the part a long "
  .. "output's cut removes (at most 20; e.g. \"FAILED|error\" in a test run)."
local CONTEXT = { type = "integer", minimum = 0, maximum = 20,
  description = "With grep: lines shown before and after each match (default 0)." }
local KEEP = { type = "string", enum = array({ "both", "head", "tail" }),
  description = "Which end of a long output to keep when it is cut: \"tail\" for a build or "
    .. "test log, \"head\" for the start, \"both\" (default) splits the budget." }

-- The configuration values the schemas state: the MCP config's (cfg) or the engine's defaults.
local function facts(cfg)
  local d = require("luxec.engine.policy").defaults
  local out, ex = cfg and cfg.output or d, cfg and cfg.exec or d
  local login = d.login
  if cfg then login = cfg.login end
  return {
    login = login, allow_login = not cfg or cfg.allow_login_shell ~= false,
    tokens = out.max_output_tokens, tokens_max = out.max_output_tokens_limit,
    yield = ex.exec_yield_ms, min_yield = ex.min_yield_ms, max_yield = ex.max_yield_ms,
    write_yield = ex.write_yield_ms, poll_min = ex.poll_min_ms,
    early = ex.early_return ~= false, codex = out.text == "codex",
    hosts = cfg and cfg.hosts,
  }
end

local function exec_tool(f)
  local props = {
    cmd = str("Shell command to execute."),
    workdir = str("Working directory for the command (relative to the server's); "
      .. "defaults to the server's working directory."),
    shell = str("Shell binary to launch; defaults to the configured shell."),
    login = f.allow_login and bool("Whether to run the shell with -l (login) semantics. "
      .. "Defaults to " .. tostring(f.login) .. ".") or nil,
    tty = bool("Whether to allocate a TTY for the command. Defaults to false (plain pipes, "
      .. "stdin /dev/null); set to true for interactive programs (REPLs, prompts)."),
    yield_time_ms = int(("How long to wait (in milliseconds) for the command to finish "
      .. "before returning (default %d, clamped to %d..%d)."):format(f.yield, f.min_yield,
        f.max_yield), 0, false),
    max_output_tokens = { type = "integer", minimum = 0,
      description = ("Maximum number of tokens to return (about 4 bytes each; default %d; "
        .. "more is lowered to %d). Excess output is cut."):format(f.tokens, f.tokens_max) },
    ["until"] = str(UNTIL),
    input = { anyOf = array({ { type = "string" }, { type = "array",
      items = { type = "string" } } }),
      description = f.early and ("Text to write to the program when it first waits for "
        .. "input (a prompt, a password, a REPL): the command and its answer in one call. An "
        .. "array of strings answers several prompts in order, each written when the program "
        .. "next waits for input (e.g. REPL lines, then \"exit()\\n\"); the call returns "
        .. "when the last answer is taken and the program exits or waits again. Needs "
        .. "tty=true.") or ("Text written to the program as it starts (an array of strings: "
        .. "all of them, in order), so the command and its answers go in one call. Needs "
        .. "tty=true.") },
    grep = str(GREP),
    context = CONTEXT,
    terminate = { type = "array", items = { type = "integer" },
      description = "Session ids to end (their whole process trees) once this command's "
        .. "call is over — e.g. the server this command was a client of: no separate "
        .. "terminate_session call." },
    keep = KEEP,
    timeout_ms = int("Hard time limit: the command's process tree is ended after this many "
      .. "milliseconds (exit code 124).", 1),
    clean = bool("Strip escape sequences and keep only the final state of rewritten lines "
      .. "(default: true on pipes, false on a TTY)."),
  }
  if f.hosts and next(f.hosts) then
    local names = {}
    for n in pairs(f.hosts) do names[#names + 1] = n end
    table.sort(names)
    props.host = { type = "string", enum = array(names), description = "Run the command on "
      .. "this configured host (in its environment and its server's directory unless "
      .. "workdir is given); omitted: here." }
  end
  local early = f.early and ", when the program waits for input (a prompt, a password, a "
    .. "REPL: the result says so)" or ""
  return {
    name = "exec_command",
    title = "Run a command",
    description = "Runs a shell command and returns its output when it exits — or earlier: "
      .. "when the output matches `until` (e.g. a server's \"listening on\")" .. early
      .. ", or after yield_time_ms. A command still running returns a session_id: answer "
      .. "or poll it with write_stdin. `input` answers prompts in the same call (one, or "
      .. "a list in order); `terminate` ends other sessions (a server) when this call is "
      .. "over. Long output is cut in the middle (keep=\"tail\" keeps the end); `grep` lists "
      .. "the matching lines of the whole output, the cut part too, and the marker names the "
      .. "byte range, which read_output returns or searches.",
    inputSchema = { type = "object", properties = props, required = array({ "cmd" }) },
    outputSchema = EXEC_OUTPUT,
    annotations = { title = "Run a command", readOnlyHint = false, destructiveHint = true,
      idempotentHint = false, openWorldHint = true },
  }
end

local function write_tool(f)
  return {
    name = "write_stdin",
    title = "Write to a session",
    description = "Writes characters to a running exec_command session (raw: add \\n for "
      .. "Enter, \\u0003 for Ctrl-C) and returns the output since the last call, when the "
      .. "process exits, the output matches `until`"
      .. (f.early and ", the program waits for input again" or "")
      .. " or yield_time_ms passes. Empty chars polls for more output.",
    inputSchema = {
      type = "object",
      properties = {
        session_id = SESSION_ID,
        chars = str("Bytes to write to stdin (may be empty to poll)."),
        yield_time_ms = int(("How long to wait (in milliseconds) for output before "
          .. "returning (default %d; a poll waits at least %d unless it can return "
          .. "earlier)."):format(f.write_yield, f.poll_min), 0, false),
        max_output_tokens = { type = "integer", minimum = 0,
          description = ("Maximum number of tokens to return (default %d; more is lowered to "
            .. "%d). Excess output is cut."):format(f.tokens, f.tokens_max) },
        ["until"] = str(UNTIL),
        keep = KEEP,
        grep = str(GREP),
        context = CONTEXT,
      },
      required = array({ "session_id" }),
    },
    outputSchema = EXEC_OUTPUT,
    annotations = { title = "Write to a session", readOnlyHint = false, destructiveHint = true,
      idempotentHint = false, openWorldHint = true },
  }
end

local LIST_TOOL = {
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
            host = { type = "string" },
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
}

local TERMINATE_TOOL = {
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
}

local READ_TOOL = {
  name = "read_output",
  title = "Read or search a session's output",
  description = "Reads or searches a session's whole output (its log) by byte offset — the "
    .. "unit of every result's log_offset and truncation marker. grep returns the matching "
    .. "lines with their offsets (e.g. the failing test in a cut log) instead of reading it "
    .. "all; offset = a result's log_offset reads only what came after it.",
  inputSchema = {
    type = "object",
    properties = {
      session_id = int("The session whose output to read"),
      log = str("Or the log path a truncated result named (log_range.path)"),
      offset = int("First byte to read or search (default 0)"),
      length = int("How many bytes to read (default 65536; at most the configured maximum) "
        .. "or to search (default: to the end)"),
      grep = str("A regex (PCRE2): return the lines that match (at most max_matches), each "
        .. "as \"OFFSET: line\", instead of the bytes"),
      context = int("With grep: lines shown before and after each match (default 0, at most "
        .. "20)"),
      max_matches = { type = "integer", minimum = 1, maximum = 200,
        description = "With grep: the most matches returned (default 20)" },
      clean = bool("Strip escape sequences and rewritten lines from what is read (grep "
        .. "matches cleaned lines unless clean is false)"),
    },
  },
  outputSchema = {
    type = "object",
    properties = {
      session_id = { type = "integer" }, log = { type = "string" },
      offset = { type = "integer" }, length = { type = "integer" },
      total = { type = "integer" },
      next_offset = { type = "integer", description = "where the next read or search "
        .. "continues" },
      eof = { type = "boolean" },
      matches = { type = "array", items = { type = "object", properties = {
        offset = { type = "integer" }, line = { type = "string" } } } },
      complete = { type = "boolean", description = "with grep: the whole range was searched" },
    },
    required = array({ "offset", "total", "next_offset", "eof" }),
  },
  annotations = { title = "Read or search a session's output", readOnlyHint = true,
    destructiveHint = false, idempotentHint = true, openWorldHint = false },
}

--- The tools as tools/list returns them for the server's configuration `cfg` (the MCP
--- config; nil: the engine's defaults).
---@param cfg table|nil
---@return table
function M.tools(cfg)
  local f = facts(cfg)
  return array({ exec_tool(f), write_tool(f), LIST_TOOL, TERMINATE_TOOL, READ_TOOL })
end

--- The tools for the engine's defaults.
M.TOOLS = M.tools(nil)

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
