--- A raw MCP peer for the specs: `build/bin/luxec mcp` as a child with pipes, lines written
--- to its stdin as they are, every line it prints decoded and kept. Waits pump the loop
--- (H.wait_for), so they work from plain spec code.
local uv = require("luv")
local cjson = require("cjson")
local H = require("helper")

local R = {}

local Peer = {}
Peer.__index = Peer

--- Start `luxec mcp ARGS...`. opts: args (list), cwd, env (list of "K=V"; default: ours).
function R.start(opts)
  opts = opts or {}
  local self = setmetatable({ messages = {}, stderr_parts = {}, next_id = 100, eofs = 0,
    raw_lines = {} }, Peer)
  local stdin, stdout, stderr = uv.new_pipe(), uv.new_pipe(), uv.new_pipe()
  self.stdin, self.stdout, self.stderr_pipe = stdin, stdout, stderr
  local env = opts.env
  if not env then
    env = {}
    for k, v in pairs(uv.os_environ()) do env[#env + 1] = k .. "=" .. v end
  end
  local args = { "mcp" }
  for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
  local proc, err = uv.spawn(H.luxec, { args = args, stdio = { stdin, stdout, stderr },
    env = env, cwd = opts.cwd }, function(code, signal)
    self.code, self.signal = code, signal
  end)
  assert(proc, err)
  self.proc, self.pid = proc, proc:get_pid()
  local buf = ""
  stdout:read_start(function(e, data)
    assert(not e, e)
    if not data then
      self.eofs = self.eofs + 1
      return
    end
    buf = buf .. data
    while true do
      local nl = buf:find("\n", 1, true)
      if not nl then break end
      local line = buf:sub(1, nl - 1)
      buf = buf:sub(nl + 1)
      self.raw_lines[#self.raw_lines + 1] = line
      local ok, msg = pcall(cjson.decode, line)
      assert(ok, "the server printed a line that is not JSON: " .. line:sub(1, 200))
      self.messages[#self.messages + 1] = msg
    end
  end)
  stderr:read_start(function(e, data)
    assert(not e, e)
    if data then
      self.stderr_parts[#self.stderr_parts + 1] = data
    else
      self.eofs = self.eofs + 1
    end
  end)
  return self
end

--- What the server wrote on stderr so far.
function Peer:stderr()
  return table.concat(self.stderr_parts)
end

--- Write `line` (a string, sent as is with a newline; or a table, encoded).
function Peer:send(line)
  if type(line) == "table" then line = cjson.encode(line) end
  local done = false
  self.stdin:write(line .. "\n", function() done = true end)
  H.wait_for(function() return done end, 20000, "writing to the server")
end

--- Send a request; returns its id.
function Peer:request(method, params, id)
  if not id then
    self.next_id = self.next_id + 1
    id = self.next_id
  end
  self:send({ jsonrpc = "2.0", id = id, method = method, params = params })
  return id
end

--- Send a notification.
function Peer:notify(method, params)
  self:send({ jsonrpc = "2.0", method = method, params = params })
end

--- Wait for the first message (from `from` on) that satisfies pred; returns it and its index.
function Peer:wait_for(pred, timeout, what)
  local found, at
  H.wait_for(function()
    for i = 1, #self.messages do
      if pred(self.messages[i]) then
        found, at = self.messages[i], i
        return true
      end
    end
    return false
  end, timeout or 15000, what or "a message")
  return found, at
end

--- Wait for the response to `id`.
function Peer:response(id, timeout)
  return (self:wait_for(function(m)
    return m.id == id and (m.result ~= nil or m.error ~= nil)
  end, timeout, "the response to " .. tostring(id)))
end

--- A request and its response.
function Peer:call(method, params, timeout)
  return self:response(self:request(method, params), timeout)
end

--- initialize + notifications/initialized; returns the result.
function Peer:handshake(version)
  local r = self:call("initialize", { protocolVersion = version or "2025-11-25",
    capabilities = {}, clientInfo = { name = "raw-spec", version = "1" } })
  assert(r.result, "initialize failed: " .. cjson.encode(r))
  self:notify("notifications/initialized")
  return r.result
end

--- tools/call; returns the result (or the error message table).
function Peer:tool(name, args, timeout)
  local r = self:call("tools/call", { name = name, arguments = args }, timeout)
  return r.result or r.error, r
end

--- Close the server's stdin (EOF).
function Peer:close_stdin()
  if self.stdin and not self.stdin:is_closing() then
    self.stdin:close()
  end
end

--- Wait for the server to exit and its output to end; returns code, signal.
function Peer:wait_exit(timeout)
  H.wait_for(function() return self.code ~= nil and self.eofs == 2 end, timeout or 15000,
    "the server to exit")
  return self.code, self.signal
end

--- End the peer: EOF, wait for the exit (kill if it hangs), close every handle.
function Peer:close()
  self:close_stdin()
  local ok = pcall(H.wait_for, function() return self.code ~= nil end, 10000, "server exit")
  if not ok then
    self.proc:kill("sigkill")
    H.wait_for(function() return self.code ~= nil end, 5000, "killed server")
  end
  for _, h in ipairs({ self.proc, self.stdout, self.stderr_pipe }) do
    if not h:is_closing() then h:close() end
  end
  uv.run("nowait")
end

--- Write a config file (Lua source) into dir; returns its path.
function R.config(dir, source, name)
  local path = dir .. "/" .. (name or "luxec-mcp.lua")
  local f = assert(io.open(path, "w"))
  f:write(source)
  f:close()
  return path
end

--- Start `luxec mcp --config CONFIG EXTRA...` in dir, CONFIG written there from `source`.
function R.start_in(dir, source, extra)
  local args = { "--config", R.config(dir, source) }
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  return R.start({ cwd = dir, args = args })
end

--- After a test: close the peer P (if any), remove dir, and check nothing is left behind.
function R.finish(P, dir)
  if P then P:close() end
  H.rmtree(dir)
  H.assert_clean()
end

--- Whether a pid is alive (zombies count as gone).
R.alive = H.alive

return R
