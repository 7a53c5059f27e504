--- fuzz_mcp_line: the MCP server's input path — the line reader (luxec.mcp.stdio, with its
--- oversize lines) and Server:handle_line (luxec.mcp) down through the tools and the exec
--- engine — on any bytes, then stdin's EOF and the shutdown it starts. The process layer is
--- lib/fake_process.lua and time a fake clock, so no input starts a process or touches the
--- filesystem (tripwires on luv's and Lua's file and process functions make sure); argument
--- checking, the engine, the output pipeline and JSON are the real ones.
---
--- Checked for each line the reader delivers, against this file's own reading of the line:
--- every message sent is one line of valid UTF-8 JSON, a JSON-RPC 2.0 response (an id, and
--- exactly one of result and error) or notification; a request gets exactly one response with
--- its id, a notification or a client's response none, a line that is not JSON a parse error
--- with id null, an oversize line an Invalid Request; no internal error (-32603, a tool's
--- "internal error", an error log, a task that raised); and after EOF the server has shut
--- down and closed every session.
---
--- Input: config variant, read size, then the bytes of stdin.
local traced = require("lib.traced")
local Input = require("lib.input")
local U = require("lib.utf8")
local fake = require("lib.fake_process")
local cjson = require("cjson")

-- The stand-ins, in place before any product module loads the real ones.
local task_errors = {}
package.loaded["luxec.process"] = fake
package.loaded["luxec.core"] = {
  version = "0.0.0-fuzz",
  -- sched reports a task that raised and that nobody waits on
  report_error = function(msg) task_errors[#task_errors + 1] = tostring(msg) end,
}
local uv = require("luv")
uv.hrtime = function() return math.floor(fake.now_ms * 1e6) end

-- Tripwires: while an input is served, nothing may start a process or touch a file.
local armed, tripped = false, {}
local function tripwire(name, fn)
  return function(...)
    if armed then
      tripped[#tripped + 1] = name
      error("fuzz: " .. name .. " called while serving an input", 2)
    end
    return fn(...)
  end
end
for _, name in ipairs({ "spawn", "kill", "fs_open", "fs_read", "fs_write", "fs_close",
  "fs_stat", "fs_fstat", "fs_lstat", "fs_access", "fs_realpath", "fs_mkdir", "fs_mkdtemp",
  "fs_unlink", "fs_rmdir", "fs_rename", "fs_scandir", "fs_chmod", "new_pipe", "new_tty",
  "new_tcp", "new_udp", "new_signal", "new_fs_event", "new_fs_poll" }) do
  if uv[name] then uv[name] = tripwire("uv." .. name, uv[name]) end
end
-- (this Lua state is the harness's own: replacing library functions is the point)
for _, name in ipairs({ "execute", "remove", "rename", "tmpname", "exit" }) do
  os[name] = tripwire("os." .. name, os[name]) -- luacheck: ignore 122
end
for _, name in ipairs({ "open", "popen", "lines", "input", "output" }) do
  io[name] = tripwire("io." .. name, io[name]) -- luacheck: ignore 122
end

local mcp = require("luxec.mcp")
local stdio = require("luxec.mcp.stdio")
local config = require("luxec.mcp.config")

-- The server reads lines with the reader it would use on a descriptor, minus the descriptor.
stdio.reader = function(_, opts) return stdio.lines(opts) end

-- Configurations: the truncation modes, pipe or null stdin, cancel keep or kill, a read-only
-- sandbox or none, hooks or none; a small output buffer, three sessions at most.
local function hook(what)
  return function(subject)
    if subject:find("deny", 1, true) then return false, "denied by the fuzz " .. what end
    if subject:find("rewrite", 1, true) then return "rewritten " .. subject:sub(1, 20) end
    if subject:find("ro", 1, true) then return { sandbox = "read-only" } end
    if subject:find("bad", 1, true) then return 42 end
    if subject:find("boom", 1, true) then error("the fuzz " .. what .. " hook failed") end
  end
end

local CONFIGS = {}
for v = 0, 15 do
  local cfg = assert(config.check({
    cwd = "/", shell = "/bin/sh", sandbox = v & 1 ~= 0 and "read-only" or false,
    output = { log = false, head = 256, tail = 256, max_output_tokens = 64,
      truncation = ({ "luxec", "codex-tokens", "codex-bytes", "luxec" })[v % 4 + 1] },
    exec = { deterministic = true, max_sessions = 3, protect_recent = 1, warn_at = 2,
      pipe_stdin = v & 2 ~= 0 and "pipe" or "null", max_chars = 512 },
    server = { max_message_bytes = 1024, log = "off", cancel = v & 4 ~= 0 and "kill" or "keep",
      read_output_max_bytes = 4096 },
    on_command = v & 8 ~= 0 and hook("on_command") or nil,
    on_input = v & 8 ~= 0 and hook("on_input") or nil,
  }))
  CONFIGS[#CONFIGS + 1] = cfg
end

-- Checks -------------------------------------------------------------------------------------

local q, check = require("lib.check").q, require("lib.check").check

local null = cjson.null

-- A JSON-RPC id as the server keys it: a string, or a number that is an integer.
local function valid_id(id)
  return type(id) == "string" or (type(id) == "number" and math.tointeger(id) ~= nil)
end

local function same_id(got, want)
  if type(want) == "number" then return math.tointeger(got) == math.tointeger(want) end
  -- bytes that are not UTF-8 cannot come back in a JSON text: only that it is a string
  if not U.valid(want) then return type(got) == "string" end
  return got == want
end

-- What the server must answer to a line: kind, and the id the answer carries (or nil).
local function classify(line)
  if line:find("^%s*$") then return "blank" end
  local ok, msg = pcall(cjson.decode, line)
  if not ok then return "parse" end
  if line:match("^%s*(.)") == "[" then return "batch" end
  if type(msg) ~= "table" then return "invalid" end
  local id = msg.id
  local rid = valid_id(id) and id or nil
  if msg.jsonrpc ~= "2.0" then return "invalid", rid end
  if msg.method == nil then
    if msg.result ~= nil or msg.error ~= nil then return "client response" end
    return "invalid", rid
  end
  if type(msg.method) ~= "string" then return "invalid", rid end
  if id == nil then return "notification" end
  if rid == nil then return "invalid" end
  return "request", id, msg
end

local KNOWN_ERRORS = { [-32700] = true, [-32600] = true, [-32601] = true, [-32602] = true,
  [-32022] = true }

-- One line the server wrote: a JSON-RPC message. Returns it decoded.
local function check_message(text)
  check(U.valid(text), "sent a line that is not UTF-8: %s", q(text))
  check(not text:find("[%z\1-\31]"), "sent a raw control character: %s", q(text))
  local ok, msg = pcall(cjson.decode, text)
  check(ok and type(msg) == "table", "sent a line that is not a JSON object: %s", q(text))
  check(msg.jsonrpc == "2.0", "sent a message without jsonrpc 2.0: %s", q(text))
  if msg.method ~= nil then
    check(type(msg.method) == "string" and msg.id == nil, "a bad notification: %s", q(text))
    return msg
  end
  check(msg.id ~= nil, "a response without an id: %s", q(text))
  check((msg.result ~= nil) ~= (msg.error ~= nil), "not exactly one of result and error: %s",
    q(text))
  if msg.error ~= nil then
    local e = msg.error
    check(type(e) == "table" and math.tointeger(e.code) and type(e.message) == "string"
      and e.message ~= "", "a malformed error: %s", q(text))
    check(KNOWN_ERRORS[e.code], "error %d (an internal error?): %s", e.code, q(text))
  else
    check(type(msg.result) == "table", "a result that is not an object: %s", q(text))
  end
  return msg
end

-- A tools/call result: text content, and no engine failure dressed as a tool error.
local function check_tool_result(res, text)
  check(type(res.content) == "table" and #res.content >= 1, "tools/call without content: %s",
    q(text))
  for _, c in ipairs(res.content) do
    check(c.type == "text" and type(c.text) == "string", "tools/call content: %s", q(text))
    check(not c.text:find("^internal error"), "an internal error: %s", q(text))
  end
  check(res.isError == nil or type(res.isError) == "boolean", "isError: %s", q(text))
end

-- What one line (or an oversize one) made the server send.
local function check_answer(line, msgs)
  local kind, id, req = classify(line)
  local responses = {}
  for _, text in ipairs(msgs) do
    local msg = check_message(text)
    if msg.method == nil then responses[#responses + 1] = { msg = msg, text = text } end
  end
  if kind == "blank" or kind == "notification" or kind == "client response" then
    check(#responses == 0, "answered a %s %s with %s", kind, q(line), q(msgs[1] or ""))
    return
  end
  check(#responses == 1, "%d responses to the %s %s", #responses, kind, q(line))
  if os.getenv("FUZZ_VERBOSE") then io.stderr:write(line, "\n  -> ", responses[1].text, "\n") end
  local r = responses[1]
  if kind == "request" then
    check(same_id(r.msg.id, id), "response id %s for the request id %s: %s", tostring(r.msg.id),
      tostring(id), q(r.text))
    if req.method == "tools/call" and r.msg.result then check_tool_result(r.msg.result, r.text) end
    return
  end
  local want = kind == "parse" and -32700 or -32600
  check(r.msg.error and r.msg.error.code == want, "a %s line %s: expected error %d, got %s", kind,
    q(line), want, q(r.text))
  if id ~= nil then
    check(same_id(r.msg.id, id), "error id %s for id %s", tostring(r.msg.id), tostring(id))
  else
    check(r.msg.id == null, "error for %s with id %s, not null", q(line), tostring(r.msg.id))
  end
end

-- One input ----------------------------------------------------------------------------------

return function(data)
  traced.off()
  local inp = Input.new(data)
  local cfg = CONFIGS[inp:byte() % #CONFIGS + 1]
  local sizes = { 1 + inp:byte(), 1 + inp:byte() % 16 }
  local stdin = inp:rest()
  fake.reset()
  fake.now_ms = 1e6
  math.randomseed(1)
  task_errors, tripped = {}, {}
  local sent, logged = {}, {}

  armed = true
  local srv = traced.call(mcp.new, cfg)
  srv.out = {
    write = function(_, text)
      check(text:find("\n", 1, true) == #text, "a message that is not one line: %s", q(text))
      sent[#sent + 1] = text:sub(1, -2)
    end,
    drained = function() return true end,
    close = function() end,
  }
  srv.log = function(_, level, msg)
    if level == "error" then logged[#logged + 1] = msg end
  end
  traced.call(srv._open_input, srv, 0)
  local opts = srv.input.opts
  local on_line, on_oversize = opts.on_line, opts.on_oversize
  local lines = 0
  opts.on_line = function(line)
    lines = lines + 1
    local from = #sent
    on_line(line)
    check_answer(line, table.move(sent, from + 1, #sent, 1, {}))
  end
  opts.on_oversize = function(size)
    check(size > cfg.server.max_message_bytes, "oversize %d <= the limit", size)
    local from = #sent
    on_oversize(size)
    check(#sent == from + 1, "an oversize line got %d answers", #sent - from)
    local msg = check_message(sent[#sent])
    check(msg.error and msg.error.code == -32600 and msg.id == null,
      "an oversize line got %s", q(sent[#sent]))
  end

  local pos, k = 1, 0
  while pos <= #stdin do
    k = k + 1
    local n = sizes[k % 2 + 1]
    traced.call(srv.input.feed, srv.input, stdin:sub(pos, pos + n - 1))
    pos = pos + n
  end
  traced.call(srv.input.finish, srv.input) -- stdin's EOF: the server shuts down
  armed = false
  uv.run("nowait") -- the handles the sessions closed

  check(#tripped == 0, "touched the system: %s", table.concat(tripped, ", "))
  check(#task_errors == 0, "a task raised: %s", task_errors[1])
  check(#logged == 0, "logged an error: %s", logged[1])
  check(srv.closed, "stdin's EOF did not shut the server down (%d lines)", lines)
  check(next(srv.calls) == nil, "calls left after the shutdown")
  for _, p in ipairs(fake.spawned) do
    check(p._closed, "session of %s left open after the shutdown", q(p._cmd))
  end
end
