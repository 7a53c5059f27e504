-- `luxec mcp` with configured hosts over real OpenSSH on a test host (spec/lib/testhost.lua:
-- as root a network namespace with its own address and sshd, a generated host key and client
-- key, `luxec serve` from the build tree): exec_command's `host`, the host's own environment,
-- list_sessions, write_stdin, and errors that name the host and quote ssh.
local H = require("helper")
local R = require("mcp.raw")
local T = require("lib.testhost")
local uv = require("luv")

describe("luxec mcp with hosts", function()
  local box, P

  local function lua_list(t)
    local parts = {}
    for i, a in ipairs(t) do parts[i] = ("%q"):format(a) end
    return "{" .. table.concat(parts, ", ") .. "}"
  end

  before_each(function()
    local why_not = T.skip_reason()
    if why_not then return pending(why_not) end
    box = T.start({ name = "box" })
    local env = { "MCP_SIDE_ONLY=here" }
    for k, v in pairs(uv.os_environ()) do env[#env + 1] = k .. "=" .. v end
    P = R.start({ cwd = box.dir, env = env, args = { "--config", R.config(box.dir, ([[
      return { login = false, sandbox = false, hosts = {
        box = { command = %s },
        nokey = %s,
        nolux = { command = %s },
      } }]]):format(lua_list(box:ssh(nil, H.luxec, "serve")),
        lua_list(box:ssh({ key = "other_key" }, H.luxec, "serve")),
        -- (a path no luxec is at: a copy of the suite beside this one may have a luxec package
        -- installed for a moment, which a bare `luxec` would find)
        lua_list(box:ssh(nil, "/nonexistent/bin/luxec", "serve")))) } })
    P:handshake()
  end)

  after_each(function()
    if P then P:close() end
    P = nil
    if box then box:close() end
    box = nil
    H.assert_clean()
  end)

  it("runs exec_command on the host named, in the host's environment; list_sessions shows "
    .. "the host and write_stdin continues the session", function()
    local tools = P:call("tools/list", {}).result.tools
    local exec
    for _, t in ipairs(tools) do if t.name == "exec_command" then exec = t end end
    assert.same({ "box", "nokey", "nolux" }, exec.inputSchema.properties.host.enum)
    local here = P:tool("exec_command", { cmd = "echo ${MCP_SIDE_ONLY:-unset}" })
    assert.matches("^here\n", here.structuredContent.output)
    local there = P:tool("exec_command", { cmd = "echo ${MCP_SIDE_ONLY:-unset}; "
      .. "echo $SSH_CONNECTION", host = "box" })
    local addr = box.addr:gsub("%.", "%%.")
    assert.matches("^unset\n%S+ %d+ " .. addr .. " " .. box.port .. "\n",
      there.structuredContent.output)
    assert.equals(0, there.structuredContent.exit_code)
    local r = P:tool("exec_command", { cmd = "echo ready; read x; echo got:$x", tty = true,
      host = "box", workdir = "/tmp" })
    local id = assert(r.structuredContent.session_id)
    local list = P:tool("list_sessions", {})
    assert.same({ id, "box", true }, { list.structuredContent.sessions[1].session_id,
      list.structuredContent.sessions[1].host, list.structuredContent.sessions[1].running })
    assert.matches("%[box%] echo ready", list.content[1].text)
    local w = P:tool("write_stdin", { session_id = id, chars = "hi\n", yield_time_ms = 10000 })
    assert.matches("got:hi", w.structuredContent.output)
    assert.equals(0, w.structuredContent.exit_code)
  end)

  it("names the host and quotes ssh when it cannot run there", function()
    local r = P:tool("exec_command", { cmd = "true", host = "nokey" })
    assert.is_true(r.isError)
    local addr = box.addr:gsub("%.", "%%.")
    assert.matches("host nokey: connection to nokey lost: root@" .. addr .. ": Permission "
      .. "denied %(publickey%)%.", r.content[1].text)
    r = P:tool("exec_command", { cmd = "true", host = "nolux" })
    assert.is_true(r.isError)
    -- (a host without luxec: its login shell cannot find it)
    assert.matches("host nolux: connection to nolux lost: .*luxec: No such file or directory",
      r.content[1].text)
    r = P:tool("exec_command", { cmd = "true", host = "elsewhere" })
    assert.is_true(r.isError)
    assert.matches('unknown host "elsewhere" %(the configured hosts: box, nokey, nolux%)',
      r.content[1].text)
    box:stop_sshd()
    r = P:tool("exec_command", { cmd = "true", host = "box" })
    assert.is_true(r.isError)
    assert.matches(("host box: connection to box lost: ssh: connect to host %s port %d: "
      .. "Connection refused"):format(addr, box.port), r.content[1].text)
  end)
end)
