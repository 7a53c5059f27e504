--- A model of Codex's unified exec (exec_command / write_stdin), written from its documented
--- behaviour (see the reference's "how Codex's unified exec behaves"), for the agent
--- benchmark's baseline: [shell, -lc|-c, cmd]; pipes with stdin /dev/null or a 24x80 PTY; a
--- call returns when its yield passes or the process exited and its output closed (50 ms
--- at most after the exit); ongoing output and prompts never end a wait early; the output is
--- the raw bytes since the previous call (lossy UTF-8), cut by Codex's token truncation;
--- the text is Codex's. Nothing of luxec's engine is used but its process core and its
--- implementation of Codex's truncation algorithm (checked against Codex's own cases).
local luxec = require("luxec")
local uv = require("luv")
local truncate = require("luxec.engine.truncate")
local policy = require("luxec.engine.policy")

local M = {}

local Codex = {}
Codex.__index = Codex

--- A Codex model running commands in `cwd`.
function M.new(cwd)
  local env = policy.build_env({}, uv.os_environ(), policy.FORCED_ENV, { CODEX_CI = "1" })
  return setmetatable({ cwd = cwd, env = env, sessions = {}, next_id = 1000 }, Codex)
end

local function now_ms() return uv.hrtime() / 1e6 end

-- Wait until the deadline, or until the process finished (exited and output closed).
local function wait(p, deadline)
  local left = deadline - now_ms()
  if left > 0 then p:wait({ timeout = left / 1000 }) end
end

local function result(self, s, start, tokens)
  local p = s.p
  local data = p:read()
  local text = truncate.lossy(data)
  local out = truncate.codex(text, { tokens = tokens or 10000 })
  local lines = { ("Chunk ID: %06x"):format(math.random(0, 0xFFFFFF)),
    ("Wall time: %.4f seconds"):format((now_ms() - start) / 1000) }
  if p:finished() then
    local st = p:status()
    lines[#lines + 1] = ("Process exited with code %d"):format(st.signal and 128 + st.signal
      or st.code)
    self.sessions[s.id] = nil
    p:close()
  else
    lines[#lines + 1] = ("Process running with session ID %d"):format(s.id)
  end
  lines[#lines + 1] = ("Original token count: %d"):format(truncate.approx_tokens(#text))
  lines[#lines + 1] = "Output:"
  lines[#lines + 1] = out
  return table.concat(lines, "\n"), { session_id = not p:finished() and s.id or nil }
end

--- exec_command: cmd, tty, yield_time_ms (10000, clamped 250..30000), max_output_tokens.
function Codex:exec_command(a)
  local shell = policy.resolve_shell("bash", self.env.PATH)
  local p = assert(luxec.spawn({ shell, "-c", a.cmd }, { cwd = self.cwd, env = self.env,
    tty = a.tty and { rows = 24, cols = 80 } or nil, stdin = not a.tty and "null" or nil,
    head = 512 * 1024, tail = 512 * 1024, grace_ms = 50 }))
  local id = self.next_id
  self.next_id = id + 1
  local s = { id = id, p = p }
  self.sessions[id] = s
  local start = now_ms()
  local y = math.max(250, math.min(a.yield_time_ms or 10000, 30000))
  wait(p, start + y)
  return result(self, s, start, a.max_output_tokens)
end

--- write_stdin: session_id, chars (raw), yield_time_ms (250), max_output_tokens.
function Codex:write_stdin(a)
  local s = self.sessions[a.session_id]
  if not s then return ("Unknown process id %d"):format(a.session_id), {} end
  local chars = a.chars or ""
  local y = math.max(a.yield_time_ms or 250, 250)
  if chars ~= "" then
    s.p:write(chars)
    s.p:wait({ timeout = 0.1 })
    y = math.min(y, 30000)
  else
    y = math.max(5000, math.min(y, 300000))
  end
  local start = now_ms()
  wait(s.p, start + y)
  return result(self, s, start, a.max_output_tokens)
end

--- Codex ends a process with SIGKILL to its group (no tool: the agent's turn ends it).
function Codex:terminate(id)
  local s = self.sessions[id]
  if s then
    s.p:close()
    self.sessions[id] = nil
  end
end

function Codex:shutdown()
  for id in pairs(self.sessions) do self:terminate(id) end
end

return M
