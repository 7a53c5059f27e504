-- luxec serve: Codex's exec-server protocol, message for message, with its rules and errors.
local H = require("helper")
local P = require("serve.peer")
local b64 = require("luxec.serve.base64")
local cjson = require("cjson")

local function err_of(r)
  assert(r.error, "expected an error, got " .. cjson.encode(r))
  return r.error.code, r.error.message
end

describe("luxec serve (stdio)", function()
  local peer, dir
  before_each(function()
    dir = H.tmpdir()
    peer = P.start({}, { cwd = dir })
  end)
  after_each(function()
    if peer then
      local st = peer:close()
      assert.equals(0, st.code)
    end
    H.rmtree(dir)
    H.assert_clean()
  end)

  it("plays the example session of Codex's exec-server README", function()
    local r = peer:call("initialize", { clientName = "example-client" }, 1)
    assert.same({ id = 1, result = {} }, r)
    peer:send('{"method":"initialized","params":{}}')
    r = peer:call("process/start", { processId = "proc-1", argv = { "bash", "-lc",
      "printf 'ready\\n'; while IFS= read -r line; do printf 'echo:%s\\n' \"$line\"; done" },
      cwd = dir, env = { PATH = "/usr/bin:/bin", HOME = dir }, tty = true, pipeStdin = false,
      arg0 = cjson.null }, 2)
    assert.same({ id = 2, result = { processId = "proc-1" } }, r)
    local data, notes = peer:output_until("proc-1", "ready\r\n")
    assert.equals("ready\r\n", data) -- a terminal turns \n into \r\n
    -- (the README's one chunk "cmVhZHkNCg==": the program's output may also come in two
    -- reads, "ready" then "\r\n"; seq numbers them in order either way)
    local chunks = {}
    for i, n in ipairs(notes) do
      assert.same({ processId = "proc-1", seq = i, stream = "pty" },
        { processId = n.processId, seq = n.seq, stream = n.stream })
      chunks[i] = b64.decode(n.chunk)
    end
    assert.equals("ready\r\n", table.concat(chunks))
    if #notes == 1 then assert.equals("cmVhZHkNCg==", notes[1].chunk) end
    r = peer:call("process/write", { processId = "proc-1", chunk = "aGVsbG8K" }, 3)
    assert.same({ id = 3, result = { status = "accepted" } }, r)
    data, notes = peer:output_until("proc-1", "echo:hello\r\n")
    assert.equals("hello\r\necho:hello\r\n", data) -- the terminal's echo, then the answer
    local first = #chunks
    for i, n in ipairs(notes) do assert.equals(first + i, n.seq) end
    local last = notes[#notes].seq
    r = peer:call("process/terminate", { processId = "proc-1" }, 4)
    assert.same({ id = 4, result = { running = true } }, r)
    local ex = peer:note("process/exited", "proc-1")
    assert.same({ method = "process/exited", params = { processId = "proc-1", seq = last + 1,
      exitCode = 143 } }, ex) -- SIGTERM: 128 + 15
    assert.same({ method = "process/closed", params = { processId = "proc-1" } },
      peer:note("process/closed", "proc-1"))
    assert.same({}, peer.queue)
  end)

  it("keeps the handshake's rules", function()
    local code, msg = err_of(peer:call("process/list", {}))
    assert.equals(-32600, code)
    assert.matches("'process/list' before the handshake ended", msg)
    peer:send({ method = "initialized" })
    local r
    r = peer:recv(function(m) return m.id == -1 end, "the error under id -1")
    assert.same({ code = -32600, message = "invalid request: 'initialized' before "
      .. "'initialize'" }, r.error)
    code, msg = err_of(peer:call("initialize", {}))
    assert.same({ -32602, "invalid params: 'clientName' is required" }, { code, msg })
    peer:handshake()
    code, msg = err_of(peer:call("initialize", { clientName = "again" }))
    assert.same({ -32600, "invalid request: 'initialize' was already received" }, { code, msg })
    peer:send({ method = "process/output", params = {} })
    r = peer:recv(function(m) return m.id == -1 end, "the error under id -1")
    assert.same({ code = -32600, message = "invalid request: unexpected notification "
      .. "'process/output' (only 'initialized' is one)" }, r.error)
    peer:send("{not json")
    r = peer:recv(function(m) return m.error and m.error.code == -32700 end, "a parse error")
    assert.equals(cjson.null, r.id)
    assert.same({ -32601, "method not found: 'process/bogus'" },
      { err_of(peer:call("process/bogus", {})) })
    for _, line in ipairs({ '[{"id":5,"method":"process/list"}]', '{"id":6}' }) do
      peer:send(line)
      r = peer:recv(function(m) return m.error and m.error.code == -32600 end, "an error")
      assert.equals("invalid request: a message must be an object with a string 'method' "
        .. "(a batch is not supported)", r.error.message)
    end
  end)

  it("answers every bad request with the right code and a message naming the field", function()
    peer:handshake()
    local cases = {
      { "process/start", { processId = "a", argv = {} }, -32602,
        "invalid params: 'argv' must not be empty" },
      { "process/start", { argv = { "true" } }, -32602, "invalid params: 'processId' is required" },
      { "process/start", { processId = "a", argv = { "true", 5 } }, -32602,
        "invalid params: 'argv[1]' must be a string (got 5)" },
      { "process/start", { processId = "a", argv = { "true" }, cwd = "rel" }, -32602,
        "invalid params: 'cwd' must be an absolute path (got \"rel\")" },
      { "process/start", { processId = "a", argv = { "true" }, tty = "yes" }, -32602,
        "invalid params: 'tty' must be true or false (got \"yes\")" },
      { "process/start", { processId = "a", argv = { "true" }, luxec = { bogus = 1 } }, -32602,
        "invalid params: unknown field 'bogus' in 'luxec' (known: cols, grace_ms, head, log, "
          .. "meta, rows, sandbox, stderr, tail)" },
      { "process/start", { processId = "a", argv = { "/nonexistent/x" } }, -32603,
        "cannot start /nonexistent/x: ENOENT" },
      { "process/read", { processId = "nope" }, -32600, "unknown process id nope" },
      { "process/read", { processId = "nope", waitMs = -1 }, -32602,
        "invalid params: 'waitMs' must be an integer from 0 to 86400000 (got -1)" },
      { "process/write", { processId = "nope", chunk = "" }, -32600, "unknown process id nope" },
      { "fs/readFile", { path = "relative" }, -32602,
        "invalid params: 'path' must be an absolute path (got \"relative\")" },
      { "fs/readFile", { path = dir .. "/none" }, -32600, "readFile " .. dir .. "/none: ENOENT" },
    }
    for _, c in ipairs(cases) do
      local code, msg = err_of(peer:call(c[1], c[2]))
      assert.equals(c[3], code, c[1] .. " " .. msg)
      assert.equals(c[4], msg:sub(1, #c[4]))
    end
    -- duplicate ids, and writes to a session without an input
    assert.same({ processId = "s" }, peer:call("process/start", { processId = "s",
      argv = { "sleep", "30" } }).result)
    assert.same({ -32600, "process s already exists" },
      { err_of(peer:call("process/start", { processId = "s", argv = { "true" } })) })
    assert.same({ -32600, "process s takes no input: it has no terminal and was started "
      .. "without pipeStdin" }, { err_of(peer:call("process/write", { processId = "s",
      chunk = "eA==" })) })
    local code, msg = err_of(peer:call("process/write", { processId = "s", chunk = "eA=" }))
    assert.same({ -32602, "invalid params: 'chunk' is not base64 (its length 3 is not a "
      .. "multiple of 4)" }, { code, msg })
    assert.same({ running = true }, peer:call("process/terminate", { processId = "s" }).result)
    assert.equals(143, peer:note("process/exited", "s").params.exitCode)
    assert.same({ running = false }, peer:call("process/terminate", { processId = "s" }).result)
    assert.same({ running = false }, peer:call("process/terminate", { processId = "s" }).result)
  end)

  it("reads by sequence number, with maxBytes and waitMs, stdout and stderr apart", function()
    peer:handshake()
    peer:call("process/start", { processId = "c", argv = { "sh", "-c",
      "printf out; printf err >&2; cat" }, pipeStdin = true })
    local r
    repeat
      r = peer:call("process/read", { processId = "c", waitMs = 2000 }).result
    until #r.chunks == 2
    table.sort(r.chunks, function(a, b) return a.stream > b.stream end)
    assert.same({ { "stdout", "out" }, { "stderr", "err" } },
      { { r.chunks[1].stream, b64.decode(r.chunks[1].chunk) },
        { r.chunks[2].stream, b64.decode(r.chunks[2].chunk) } })
    assert.same({ 3, false, cjson.null, false }, { r.nextSeq, r.exited, r.exitCode, r.closed })
    -- nothing new: waitMs is waited out
    local t0 = H.now_ms()
    r = peer:call("process/read", { processId = "c", afterSeq = 2, waitMs = 300 }).result
    assert.same({}, r.chunks)
    assert.is_true(H.now_ms() - t0 >= 290)
    -- a read that waits is answered as soon as output comes
    peer:send({ id = 77, method = "process/read", params = { processId = "c", afterSeq = 2,
      waitMs = 10000 } })
    peer:call("process/write", { processId = "c", chunk = b64.encode("abcdef") })
    r = peer:recv(function(m) return m.id == 77 end, "the waiting read").result
    assert.equals("abcdef", b64.decode(r.chunks[1].chunk))
    assert.equals(3, r.chunks[1].seq)
    -- maxBytes: whole chunks, at least one
    peer:call("process/write", { processId = "c", chunk = b64.encode("gh") })
    peer:note("process/output", "c") -- (seq 3)
    peer:note("process/output", "c") -- (seq 4)
    r = peer:call("process/read", { processId = "c", afterSeq = 0, maxBytes = 6 }).result
    assert.same({ 1, 2 }, { r.chunks[1].seq, r.chunks[2].seq, r.chunks[3] and 3 })
    assert.equals(3, r.nextSeq)
    r = peer:call("process/read", { processId = "c", afterSeq = 0, maxBytes = 4 }).result
    assert.same({ 1, 2 }, { #r.chunks, r.nextSeq })
    peer:call("process/closeStdin", { processId = "c" })
    local ex = peer:note("process/exited", "c")
    assert.same({ processId = "c", seq = 5, exitCode = 0 }, ex.params)
    r = peer:call("process/read", { processId = "c", afterSeq = 4 }).result
    assert.same({ {}, 6, true, 0, true }, { r.chunks, r.nextSeq, r.exited, r.exitCode,
      r.closed })
  end)

  it("gives luxec's status, snapshot and input state to a client that asks", function()
    peer:handshake({ version = 1 })
    local r = peer:call("process/start", { processId = "py", argv = { "sh", "-c",
      "printf 'name? '; read n; echo hi $n; exit 3" }, tty = true,
      luxec = { rows = 30, cols = 100 } })
    assert.is_number(r.result.luxec.pid)
    peer:output_until("py", "name? ")
    local st
    H.wait_for(function()
      st = peer:call("process/inputState", { processId = "py" }).result
      return st.waiting
    end, 5000, "the prompt to wait for input")
    assert.same({ 0, true, false }, { st.unread, st.waiting, st.echoOff })
    st = peer:call("process/status", { processId = "py" }).result
    assert.same({ true, true, r.result.luxec.pid }, { st.running, st.tty, st.pid })
    peer:call("process/write", { processId = "py", chunk = b64.encode("bo\n") })
    local ex = peer:note("process/exited", "py")
    assert.same({ 3, "exit" }, { ex.params.exitCode, ex.params.luxec.code == 3 and "exit" })
    local snap = peer:call("process/snapshot", { processId = "py" }).result
    assert.equals("name? bo\r\nhi bo\r\n", b64.decode(snap.head))
  end)

  it("does the fs methods, and refuses changes outside a --sandbox's writable roots", function()
    peer:handshake()
    local f = dir .. "/sub/a.txt"
    assert.same({}, peer:call("fs/createDirectory", { path = dir .. "/sub" }).result)
    assert.same({}, peer:call("fs/writeFile", { path = f, dataBase64 = b64.encode("x\0y") })
      .result)
    assert.equals("x\0y", b64.decode(peer:call("fs/readFile", { path = f }).result.dataBase64))
    local md = peer:call("fs/getMetadata", { path = f }).result
    assert.same({ false, true, false, 3 }, { md.isDirectory, md.isFile, md.isSymlink, md.size })
    assert.same({}, peer:call("fs/copy", { sourcePath = dir .. "/sub",
      destinationPath = dir .. "/copy", recursive = true }).result)
    assert.same({ entries = { { fileName = "copy", isDirectory = true, isFile = false },
      { fileName = "sub", isDirectory = true, isFile = false } } },
      peer:call("fs/readDirectory", { path = dir }).result)
    assert.same({}, peer:call("fs/remove", { path = dir .. "/copy" }).result)
    assert.is_nil(io.open(dir .. "/copy/a.txt"))
    peer:close()
    peer = P.start({ "--sandbox", "read-only" }, { cwd = dir })
    peer:handshake()
    local code, msg = err_of(peer:call("fs/writeFile", { path = f, dataBase64 = "" }))
    assert.same({ -32600, "writeFile: " .. f .. " is not writable under the server's sandbox "
      .. "(read-only)" }, { code, msg })
    assert.equals("x\0y", H.read_file(f))
    local usable, why = H.sandbox_usable()
    if not usable then return pending(why) end
    peer:call("process/start", { processId = "w", argv = { "sh", "-c",
      "echo new > sub/b.txt" }, luxec = {} })
    local ex = peer:note("process/exited", "w")
    assert.equals(2, ex.params.exitCode) -- the shell could not open the file
    assert.is_nil(H.read_file(dir .. "/sub/b.txt"))
    local code2, msg2 = err_of(peer:call("process/start", { processId = "x",
      argv = { "true" }, luxec = { sandbox = { mode = "full-access" } } }))
    assert.same({ -32602, "invalid params: 'luxec.sandbox': this server confines every "
      .. "process with its own policy (--sandbox read-only)" }, { code2, msg2 })
    peer:close()
    peer = P.start({ "--sandbox", "workspace-write" }, { cwd = dir })
    peer:handshake()
    assert.same({}, peer:call("fs/writeFile", { path = dir .. "/sub/c.txt",
      dataBase64 = "" }).result)
    code, msg = err_of(peer:call("fs/createDirectory", { path = "/var/luxec-serve-spec" }))
    assert.same({ -32600, "createDirectory: /var/luxec-serve-spec is not writable under the "
      .. "server's sandbox (workspace-write)" }, { code, msg })
    peer:call("process/start", { processId = "w", argv = { "sh", "-c",
      "echo new > sub/b.txt; echo x > /var/luxec-serve-spec" } })
    assert.equals(2, peer:note("process/exited", "w").params.exitCode)
    assert.equals("new\n", H.read_file(dir .. "/sub/b.txt"))
    assert.is_nil(H.read_file("/var/luxec-serve-spec"))
  end)
end)

describe("luxec serve's arguments", function()
  after_each(H.assert_clean)

  it("refuses bad ones with a message naming them", function()
    local cases = {
      { { "--listen", "tcp:1" }, 2, "luxec serve: --listen: unix:PATH expected, got 'tcp:1'\n" },
      { { "--sandbox", "bogus" }, 1, "luxec serve: --sandbox: bad sandbox policy: unknown mode "
        .. "\"bogus\" (\"full-access\", \"read-only\" or \"workspace-write\")\n" },
      { { "--max-queued", "0" }, 2, "luxec serve: --max-queued needs a positive number, got "
        .. "'0'\n" },
    }
    for _, c in ipairs(cases) do
      local args = { "serve" }
      for _, a in ipairs(c[1]) do args[#args + 1] = a end
      local r = H.run(args, { timeout = 10000 })
      assert.equals(c[2], r.code)
      assert.equals(c[3], r.stderr:sub(1, #c[3]))
      assert.equals("", r.stdout)
    end
  end)
end)
