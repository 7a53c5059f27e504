--- The agent benchmark: six agent tasks, each driven by a fixed policy, against a model of
--- Codex's unified exec (bench/agent/codex.lua) and against luxec's MCP tools (the same tool
--- code `luxec mcp` runs, on one engine) — once with Codex's arguments only, once with
--- luxec's (until, input, keep, grep, terminate, read_output's grep). For each: tool calls,
--- tokens read (the tool texts, ceil(bytes / 4)), seconds waited (inside tool calls), and
--- whether every fact the task needs was in what the agent read.
---   luxec bench/agent.lua [--runs N] [--only NAME]
local uv = require("luv")
local exec = require("luxec.engine")
local tools = require("luxec.mcp.tools")
local truncate = require("luxec.engine.truncate")
local codex = dofile("bench/agent/codex.lua")
local tasks = dofile("bench/agent/tasks.lua").list

local runs, only = 1, nil
local i = 1
while arg[i] do
  if arg[i] == "--runs" then
    runs = assert(math.tointeger(tonumber(arg[i + 1])), "--runs needs a count")
    i = i + 1
  elseif arg[i] == "--only" then
    only = arg[i + 1]
    i = i + 1
  else
    error("bench/agent.lua: unknown argument " .. arg[i])
  end
  i = i + 1
end

local function now_ms() return uv.hrtime() / 1e6 end

-- A client that records each tool call: its text, tokens and the time it took.
local function recorder(backend)
  local c = { calls = 0, tokens = 0, waited = 0, texts = {} }
  local function record(t0, text)
    c.calls = c.calls + 1
    c.tokens = c.tokens + truncate.approx_tokens(#text)
    c.waited = c.waited + (now_ms() - t0) / 1000
    c.texts[#c.texts + 1] = text
  end
  for _, op in ipairs({ "exec", "write", "read", "stop" }) do
    c[op] = function(_, a)
      local t0 = now_ms()
      local text, res = backend[op](backend, a)
      record(t0, text)
      return text, res
    end
  end
  return c
end

local function codex_backend(dir)
  local m = codex.new(dir)
  return {
    exec = function(_, a) return m:exec_command(a) end,
    write = function(_, a) return m:write_stdin(a) end,
    stop = function(_, id) return m:write_stdin({ session_id = id, chars = "\3" }) end,
    read = function() error("Codex has no read_output") end,
    close = function() m:shutdown() end,
  }
end

local function luxec_backend(dir)
  local e = exec.new({ cwd = dir, login = false })
  local srv = { engine = e, cfg = { sandbox = { mode = "full-access" },
    server = { read_output_max_bytes = 1 << 20 } }, log = function() end }
  local function call(name, a)
    local r = tools.call(srv, { tool = name, ctx = {} }, name, a)
    return r.content[1].text, r.structuredContent
  end
  return {
    exec = function(_, a) return call("exec_command", a) end,
    write = function(_, a) return call("write_stdin", a) end,
    read = function(_, a) return call("read_output", a) end,
    stop = function(_, id) return call("terminate_session", { session_id = id }) end,
    close = function() e:shutdown() end,
  }
end

local SIDES = {
  { name = "codex", backend = codex_backend, policy = "codex" },
  { name = "luxec, Codex's arguments", backend = luxec_backend, policy = "codex" },
  { name = "luxec", backend = luxec_backend, policy = "luxec" },
}

local function run_task(task, side)
  local dir = assert(uv.fs_mkdtemp("/tmp/luxec-agent-XXXXXX"))
  task.setup(dir)
  local b = side.backend(dir)
  local c = recorder(b)
  local ok, err = pcall(task[side.policy], c)
  b.close()
  os.execute("rm -rf '" .. dir .. "'")
  local all = table.concat(c.texts, "\n")
  local seen = ok
  for _, f in ipairs(task.facts) do
    if not all:find(f, 1, true) then seen = false end
  end
  return { calls = c.calls, tokens = c.tokens, waited = c.waited, seen = seen,
    err = not ok and err or nil }
end

local function median(xs)
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

local totals = {}
for _, s in ipairs(SIDES) do totals[s.name] = { calls = 0, tokens = 0, waited = 0, seen = 0 } end
print(("%-12s %-26s %6s %8s %9s %6s"):format("task", "side", "calls", "tokens", "waited s",
  "facts"))
local ntasks = 0
for _, task in ipairs(tasks) do
  if not only or task.name == only then
    ntasks = ntasks + 1
    for _, side in ipairs(SIDES) do
      local waits, r = {}, nil
      for _ = 1, runs do
        r = run_task(task, side)
        waits[#waits + 1] = r.waited
      end
      r.waited = median(waits)
      local t = totals[side.name]
      t.calls, t.tokens, t.waited = t.calls + r.calls, t.tokens + r.tokens, t.waited + r.waited
      t.seen = t.seen + (r.seen and 1 or 0)
      print(("%-12s %-26s %6d %8d %9.2f %6s%s"):format(task.name, side.name, r.calls, r.tokens,
        r.waited, r.seen and "all" or "MISSING", r.err and ("  error: " .. tostring(r.err))
        or ""))
    end
  end
end
print()
local base = totals.codex
for _, side in ipairs(SIDES) do
  local t = totals[side.name]
  print(("%-39s %6d %8d %9.2f %3d/%d   ×%.2f calls  ×%.2f tokens  ×%.2f waiting"):format(
    "total, " .. side.name, t.calls, t.tokens, t.waited, t.seen, ntasks, t.calls / base.calls,
    t.tokens / math.max(1, base.tokens), t.waited / math.max(1e-9, base.waited)))
end
