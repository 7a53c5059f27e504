-- `luxec mcp --listen http://…`: MCP's Streamable HTTP transport, driven by the real MCP SDK
-- client (StreamableHTTPClientTransport, spec/mcp/client/http.mjs) and by curl and a raw TCP
-- socket for the exact statuses.
local H = require("helper")
local R = require("mcp.raw")
local uv = require("luv")
local cjson = require("cjson")

local CLIENT = H.root .. "/spec/mcp/client"

local function find(cmd)
  for d in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    if uv.fs_access(d .. "/" .. cmd, "X") then return d .. "/" .. cmd end
  end
end

local node, curl = find("node"), find("curl")
local installed = uv.fs_stat(CLIENT .. "/node_modules/@modelcontextprotocol/sdk") ~= nil

local function environ(extra)
  local env = {}
  for k, v in pairs(uv.os_environ()) do
    if k ~= "LUXEC_MCP_TOKEN" then env[#env + 1] = k .. "=" .. v end
  end
  for _, kv in ipairs(extra or {}) do env[#env + 1] = kv end
  return env
end

-- `luxec mcp --listen URL ARGS...` in dir; waits for the address it prints.
local function start(dir, url, args, env)
  local srv = { parts = {} }
  local err = uv.new_pipe()
  local argv = { "mcp", "--listen", url }
  if not args then
    args = { "--config", R.config(dir, 'return { login = false, sandbox = { mode = '
      .. '"full-access" } }') }
  end
  for _, a in ipairs(args or {}) do argv[#argv + 1] = a end
  local proc, perr = uv.spawn(H.luxec, { args = argv, stdio = { nil, nil, err },
    env = environ(env), cwd = dir }, function(code, signal)
    srv.code, srv.signal = code, signal
  end)
  assert(proc, perr)
  srv.proc, srv.pid, srv.pipe = proc, proc:get_pid(), err
  err:read_start(function(_, data)
    if data then srv.parts[#srv.parts + 1] = data else srv.eof = true end
  end)
  function srv.stderr() return table.concat(srv.parts) end
  H.wait_for(function()
    return srv.stderr():find("listening on", 1, true) or srv.code
  end, 10000, "luxec mcp to listen")
  srv.port = tonumber(srv.stderr():match("listening on http://[^\n]*:(%d+)/mcp\n"))
  srv.url = ("http://127.0.0.1:%s/mcp"):format(srv.port)
  function srv.stop()
    if srv.code == nil then uv.kill(srv.pid, "sigterm") end
    H.wait_for(function() return srv.code ~= nil and srv.eof end, 20000, "luxec mcp to exit")
    if not srv.proc:is_closing() then srv.proc:close() end
    if not err:is_closing() then err:close() end
  end
  return srv
end

-- curl ARGS... → status, headers (lower-case names), body
local function http(args)
  local argv = { cmd = curl, "-sS", "-D", "-", "--max-time", "30" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local r = H.run(argv, { timeout = 40000 })
  assert(r.code == 0, "curl failed: " .. r.stderr)
  local head, body = r.stdout:match("^(.-)\r\n\r\n(.*)$")
  local status = tonumber(head:match("^HTTP/1%.1 (%d+)"))
  local headers = {}
  for k, v in head:gmatch("\r\n([^:\r\n]+): ([^\r\n]*)") do headers[k:lower()] = v end
  return status, headers, body
end

local INIT = cjson.encode({ jsonrpc = "2.0", id = 1, method = "initialize", params = {
  protocolVersion = "2025-06-18", capabilities = {}, clientInfo = { name = "curl",
    version = "1" } } })
local LIST = '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
local JSON = { "-H", "Content-Type: application/json", "-H", "Accept: application/json" }

local function post(url, body, extra)
  local args = { "-X", "POST", url, "--data-binary", body }
  for _, a in ipairs(JSON) do args[#args + 1] = a end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  return http(args)
end

-- Bytes to a raw TCP connection; returns everything the server sent until it closed.
local function raw(port, bytes)
  local tcp = uv.new_tcp()
  local got, closed = {}, false
  tcp:connect("127.0.0.1", port, function(cerr)
    if cerr then -- refused: nothing sent back
      closed = true
      return
    end
    if bytes then tcp:write(bytes, function() end) end
    tcp:read_start(function(_, data) -- an error (a reset) ends it as EOF does
      if data then got[#got + 1] = data else closed = true end
    end)
  end)
  H.wait_for(function() return closed end, 20000, "the server to close the connection")
  tcp:close()
  return table.concat(got)
end

local function node_run(name, url, dir, env)
  local e = environ({ "LUXEC_URL=" .. url, "LUXEC_CWD=" .. dir })
  for _, kv in ipairs(env or {}) do e[#e + 1] = kv end
  local r = H.run({ cmd = node, CLIENT .. "/http.mjs", name }, { env = e, timeout = 90000,
    cwd = CLIENT })
  local ok, out = pcall(cjson.decode, r.stdout:match("[^\n]+") or "")
  assert(ok and type(out) == "table", ("scenario %s printed no result (exit %s):\n%s\n%s")
    :format(name, tostring(r.code), r.stdout, r.stderr))
  assert(out.error == nil, ("scenario %s failed: %s"):format(name, tostring(out.error)))
  assert.same({}, out.errors)
  return out
end

local function gone(pid)
  H.wait_for(function() return not H.alive(pid) end, 10000, "pid " .. pid .. " to end")
  return true
end

describe("luxec mcp --listen http://", function()
  local dir, srv

  before_each(function()
    if not curl then
      pending("curl is not installed")
      return
    end
    dir = H.tmpdir()
  end)

  after_each(function()
    if srv then srv.stop() end
    srv = nil
    if dir then H.rmtree(dir) end
    dir = nil
    H.assert_clean()
  end)

  local function sdk()
    if not node or not installed then
      pending("node or spec/mcp/client/node_modules missing: run scripts/setup")
      return false
    end
    return true
  end

  it("serves the SDK client: tools, a command, an interactive session", function()
    if not dir or not sdk() then return end
    srv = start(dir, "http://127.0.0.1:0")
    local out = node_run("basic", srv.url, dir)
    assert.matches("^%x+$", out.sessionId)
    assert.equal(32, #out.sessionId)
    assert.same({}, out.capabilities.logging)
    assert.same({ "exec_command", "write_stdin", "list_sessions", "terminate_session",
      "read_output" }, out.tools)
    assert.equal("over-http\n", out.echo)
    assert.equal(0, out.echoExit)
    assert.is_number(out.sid)
    assert.matches("typed", out.back)
    assert.equal(0, out.endExit)
  end)

  it("serves two sessions at once: a long call blocks neither, each sees its own", function()
    if not dir or not sdk() then return end
    srv = start(dir, "http://127.0.0.1:0")
    local out = node_run("concurrent", srv.url, dir)
    assert.are_not.equal(out.ids[1], out.ids[2])
    assert.equal("B-done\n", out.b)
    assert.equal("A-done\n", out.a)
    assert.same({ out.bgSession }, out.aSessions)
    assert.same({}, out.bSessions)
  end)

  it("sends the server's log as notifications/message after logging/setLevel", function()
    if not dir or not sdk() then return end
    srv = start(dir, "http://127.0.0.1:0")
    local out = node_run("logging", srv.url, dir)
    assert.same({}, out.logging)
    local seen
    for _, m in ipairs(out.logs) do
      if m.level == "debug" and m.logger == "luxec" and m.data:match("exec_command") then
        seen = m
      end
    end
    assert.is_table(seen, cjson.encode(out.logs))
    assert.equal(-32602, out.bad.code)
    assert.matches("level must be one of debug, info, notice", out.bad.message)
  end)

  it("sends a call's progress on its own stream", function()
    if not dir or not sdk() then return end
    srv = start(dir, "http://127.0.0.1:0", { "--config", R.config(dir, "return { login = "
      .. "false, sandbox = { mode = 'full-access' }, server = { progress_interval_ms = 100 } }") })
    local out = node_run("progress", srv.url, dir)
    assert.equal("went\n", out.output)
    assert.is_true(out.progress >= 1)
    assert.is_number(out.first.progress)
    assert.matches("waiting", out.first.message)
  end)

  it("DELETE ends the session and its processes; the id is then unknown (404)", function()
    if not dir or not sdk() then return end
    srv = start(dir, "http://127.0.0.1:0")
    local out = node_run("start", srv.url, dir)
    local pid = tonumber(out.output:match("pid=(%d+)"))
    assert.is_number(pid)
    assert.is_true(gone(pid))
    local status, _, body = post(srv.url, LIST, { "-H", "Mcp-Session-Id: " .. out.sessionId })
    assert.equal(404, status)
    assert.matches("Session not found", body)
  end)

  it("ends every session's processes on SIGTERM", function()
    if not dir or not sdk() then return end
    srv = start(dir, "http://127.0.0.1:0")
    local one = node_run("start", srv.url, dir, { "LEAVE=1" })
    local two = node_run("start", srv.url, dir, { "LEAVE=1" })
    local pids = { tonumber(one.output:match("pid=(%d+)")),
      tonumber(two.output:match("pid=(%d+)")) }
    assert.is_true(H.alive(pids[1]) and H.alive(pids[2]))
    srv.stop()
    assert.same({ 0, 0 }, { srv.code, srv.signal })
    assert.is_false(H.alive(pids[1]) or H.alive(pids[2]))
  end)

  it("answers JSON to a JSON-only client, with the session id, then requires it", function()
    if not dir then return end
    srv = start(dir, "http://127.0.0.1:0")
    local status, headers, body = post(srv.url, INIT)
    local _
    assert.equal(200, status)
    assert.equal("application/json", headers["content-type"])
    local sid = headers["mcp-session-id"]
    assert.matches("^%x+$", sid)
    assert.equal("2025-06-18", cjson.decode(body).result.protocolVersion)
    status = post(srv.url, '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      { "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(202, status)
    status, _, body = post(srv.url, LIST, { "-H", "Mcp-Session-Id: " .. sid,
      "-H", "MCP-Protocol-Version: 2025-06-18" })
    assert.equal(200, status)
    assert.equal("exec_command", cjson.decode(body).result.tools[1].name)
    -- the errors, each with its exact status
    status, _, body = post(srv.url, '{"jsonrpc":"1.0","method":"x"}',
      { "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(400, status)
    assert.matches('"jsonrpc\\" must be \\"2.0', body, 1, true)
    status, _, body = post(srv.url, "[" .. LIST .. "]", { "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(400, status)
    assert.matches("batches", body)
    status, _, body = post(srv.url, "{not json", { "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(400, status)
    assert.matches("Parse error", body)
    status, _, body = post(srv.url, LIST)
    assert.equal(400, status)
    assert.matches("Mcp%-Session%-Id header is required", body)
    status = post(srv.url, LIST, { "-H", "Mcp-Session-Id: 0123456789abcdef" })
    assert.equal(404, status)
    status, _, body = post(srv.url, LIST, { "-H", "Mcp-Session-Id: " .. sid,
      "-H", "MCP-Protocol-Version: 1999-01-01" })
    assert.equal(400, status)
    assert.matches('unsupported MCP%-Protocol%-Version \\"1999%-01%-01\\"', body)
    status, _, body = post(srv.url, LIST, { "-H", "Mcp-Session-Id: " .. sid,
      "-H", "Host: evil.example:" .. srv.port })
    assert.equal(403, status)
    assert.matches("is not this server", body)
    status, _, body = post(srv.url, LIST, { "-H", "Mcp-Session-Id: " .. sid,
      "-H", "Origin: http://evil.example" })
    assert.equal(403, status)
    assert.matches("is not a local one", body)
    status = post(srv.url, LIST, { "-H", "Mcp-Session-Id: " .. sid,
      "-H", "Origin: http://localhost:3000" })
    assert.equal(200, status)
    status = http({ "-X", "PUT", srv.url })
    assert.equal(405, status)
    status = http({ "-X", "POST", srv.url:gsub("/mcp$", "/other"), "--data-binary", LIST })
    assert.equal(404, status)
    status = http({ "-X", "POST", srv.url, "--data-binary", LIST, "-H",
      "Content-Type: text/plain", "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(415, status)
    status = http({ "-X", "GET", srv.url, "-H", "Accept: application/json",
      "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(406, status)
    status = http({ "-X", "DELETE", srv.url, "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(200, status)
    status = http({ "-X", "DELETE", srv.url, "-H", "Mcp-Session-Id: " .. sid })
    assert.equal(404, status)
  end)

  it("refuses a body over the limit (413), malformed requests (400), big headers (431), "
    .. "and drops a client that sends nothing", function()
    if not dir then return end
    local config = R.config(dir, "return { login = false, server = { max_message_bytes = 1024, "
      .. "http_header_bytes = 1024, http_request_timeout_ms = 500 } }")
    srv = start(dir, "http://127.0.0.1:0", { "--config", config })
    local status, _, body = post(srv.url, '{"x":"' .. ("y"):rep(2000) .. '"}')
    assert.equal(413, status)
    assert.matches("over the limit of 1024 bytes", body)
    local got = raw(srv.port, "GET /mcp HTTP/1.1 junk\r\nHost: 127.0.0.1\r\n\r\n")
    assert.matches("^HTTP/1%.1 400 Bad Request\r\n", got)
    assert.matches("malformed request", got)
    got = raw(srv.port, "GET /mcp HTTP/2.0\r\nHost: 127.0.0.1\r\n\r\n")
    assert.matches("^HTTP/1%.1 505 HTTP Version Not Supported\r\n", got)
    got = raw(srv.port, "GET /mcp HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n")
    assert.matches("^HTTP/1%.1 400 Bad Request\r\n", got)
    assert.matches("malformed request", got)
    got = raw(srv.port, "BREW /mcp HTTP/1.1\r\n\r\n")
    assert.matches("^HTTP/1%.1 400 Bad Request\r\n", got)
    got = raw(srv.port, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " .. ("z"):rep(2000)
      .. "\r\n\r\n")
    assert.matches("^HTTP/1%.1 431 ", got)
    got = raw(srv.port, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\nab")
    assert.matches("^HTTP/1%.1 408 Request Timeout\r\n", got)
    -- pipelined requests are each answered, in order (HTTP/1.0's ends the connection)
    got = raw(srv.port, "GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
      .. "GET /b HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
    local paths = {}
    for code, path in got:gmatch("HTTP/1%.1 (%d+) .-Not Found: \\(/%a)") do
      paths[#paths + 1] = code .. path
    end
    assert.same({ "404/a", "404/b" }, paths)
    assert.equal("", raw(srv.port, nil)) -- said nothing: closed without an answer
    assert.matches("no request in time", srv.stderr())
  end)

  it("keeps at most server.http_max_connections open", function()
    if not dir then return end
    srv = start(dir, "http://127.0.0.1:0", { "--config", R.config(dir, "return { login = "
      .. "false, server = { http_max_connections = 2 } }") })
    local held, answers = {}, 0
    for i = 1, 2 do
      local tcp = uv.new_tcp()
      held[i] = tcp
      tcp:connect("127.0.0.1", srv.port, function(err)
        assert(not err, err)
        tcp:read_start(function(_, data) if data then answers = answers + 1 end end)
        tcp:write("GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") -- kept alive after
      end)
    end
    H.wait_for(function() return answers == 2 end, 10000, "both connections answered")
    assert.equal("", raw(srv.port, "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
    assert.matches("a connection refused: 2 are open", srv.stderr(), 1, true)
    for _, tcp in ipairs(held) do tcp:close() end
    H.wait_for(function() -- the server sees them go, then serves a new one
      return raw(srv.port, "GET /x HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n") ~= ""
    end, 10000, "a connection served again")
  end)

  it("needs a bearer token off loopback (401 without or with a wrong one)", function()
    if not dir then return end
    local r = H.run({ "mcp", "--listen", "http://0.0.0.0:0" }, { env = environ() })
    assert.equal(2, r.code)
    assert.matches("not a loopback address, so a bearer token is required", r.stderr)
    r = H.run({ "mcp", "--listen", "http://127.0.0.1:0", "--daemon" }, { env = environ() })
    assert.same({ 2, "luxec mcp: --listen does not run sessions on the daemon (--daemon or the "
      .. "config key daemon): each HTTP session has its own\n" }, { r.code, r.stderr })
    r = H.run({ "mcp", "--check-config", R.config(dir, "return { server = { "
      .. "http_header_bytes = 10 } }", "small.lua") }, { env = environ() })
    assert.equal(1, r.code)
    assert.matches("server.http_header_bytes: expected at least 256, got 10", r.stderr, 1, true)
    r = H.run({ "mcp", "--listen", "http://build-1:80" }, { env = environ() })
    assert.same({ 2, "luxec mcp: --listen http://build-1:80: build-1 is not an IP address (use "
      .. "an address or localhost)\n" }, { r.code, r.stderr })
    local token = "s3cret-token-0123456789"
    srv = start(dir, "http://0.0.0.0:0", nil, { "LUXEC_MCP_TOKEN=" .. token })
    local status, headers = post(srv.url, INIT)
    assert.equal(401, status)
    assert.equal('Bearer realm="luxec"', headers["www-authenticate"])
    status = post(srv.url, INIT, { "-H", "Authorization: Bearer " .. token .. "x" })
    assert.equal(401, status)
    status = post(srv.url, INIT, { "-H", "Authorization: Bearer s3cret" })
    assert.equal(401, status)
    status = post(srv.url, INIT, { "-H", "Authorization: Bearer " .. token,
      "-H", "Host: build-1.example:" .. srv.port })
    assert.equal(200, status)
    srv.stop()
    H.write_file(dir .. "/token", "short\n")
    r = H.run({ "mcp", "--listen", "http://127.0.0.1:0", "--token-file", dir .. "/token" },
      { env = environ() })
    assert.equal(2, r.code)
    assert.matches("at least 16 characters", r.stderr)
    H.write_file(dir .. "/token", token .. "\n")
    srv = start(dir, "http://[::1]:0", { "--token-file", dir .. "/token", "--config",
      R.config(dir, "return { login = false }") })
    status = http({ "-X", "POST", ("http://[::1]:%d/mcp"):format(srv.port), "--data-binary",
      INIT, "-H", "Content-Type: application/json", "-H", "Accept: application/json" })
    assert.equal(401, status)
    status = http({ "-X", "POST", ("http://[::1]:%d/mcp"):format(srv.port), "--data-binary",
      INIT, "-H", "Content-Type: application/json", "-H", "Accept: application/json",
      "-H", "Authorization: Bearer " .. token })
    assert.equal(200, status)
  end)
end)
