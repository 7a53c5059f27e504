-- An MCP server on the fake process and fake clock, for the unit specs of its request
-- handling: lines go in through Server:handle_line and what it writes is captured, one
-- decoded message per line. `local M = require("lib.mcp_fake")`.
package.path = "fuzz/lua/?.lua;" .. package.path
local fake = require("lib.fake_process")
local mcp = require("luxec.mcp")
local config = require("luxec.mcp.config")
local json = require("luxec.json")
local assert = require("luassert")

local M = { fake = fake }

local servers = {}

-- A server on `t` (a config table); returns it and the list of messages it sent.
function M.server(t)
  local c = { login = false, cwd = "/tmp", output = { log = false },
    exec = { deterministic = true }, server = { log = "off" } }
  for k, v in pairs(t or {}) do
    if type(v) == "table" and type(c[k]) == "table" then
      for kk, vv in pairs(v) do c[k][kk] = vv end
    else
      c[k] = v
    end
  end
  local cfg = assert(config.check(c))
  local srv = mcp.new(cfg, { spawn = fake.spawn, clock = function() return fake.now_ms end })
  local sent = {}
  srv.out = {
    write = function(_, text)
      assert.equals(#text, text:find("\n", 1, true), "one message per line")
      sent[#sent + 1] = assert(json.decode(text:sub(1, -2)))
    end,
    drained = function() return true end,
    close = function() end,
  }
  servers[#servers + 1] = srv
  return srv, sent
end

-- Shut down the engine of every server made since the last call.
function M.shutdown()
  for _, srv in ipairs(servers) do srv.engine:shutdown() end
  servers = {}
end

function M.send(srv, msg)
  msg.jsonrpc = "2.0"
  srv:handle_line(json.encode(msg))
end

function M.answer(sent, id)
  for _, m in ipairs(sent) do
    if m.id == id and m.method == nil then return m end
  end
end

-- Call a tool (it answers at once: the fake clock does not wait); returns the result.
function M.tool(srv, sent, name, args, id)
  id = id or #sent + 1000
  M.send(srv, { id = id, method = "tools/call", params = { name = name, arguments = args } })
  local m = assert(M.answer(sent, id), "no answer to " .. name)
  assert.is_nil(m.error, m.error and m.error.message)
  return m.result
end

return M
