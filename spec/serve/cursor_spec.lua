-- luxec.remote: a client takes a session up again from its own cursor (p:cursor(), a plain
-- table it may keep anywhere): the output after it, nothing repeated, and what the server no
-- longer holds counted exactly as dropped.
local H = require("helper")
local cjson = require("cjson")
local remote = require("luxec.remote")

local server_lib = require("lib.unix_server")
local listen, stop = server_lib.listen, server_lib.stop

local function seq_text(from, to)
  local t = {}
  for i = from, to do t[#t + 1] = tostring(i) end
  return table.concat(t, "\n") .. "\n"
end

describe("host:attach(id, cursor)", function()
  local dir, server, sock
  before_each(function()
    dir = H.tmpdir()
    sock = dir .. "/s.sock"
    server = listen(sock)
  end)
  after_each(function()
    stop(server)
    H.rmtree(dir)
    H.assert_clean()
  end)

  -- A session that says "one" and waits; client A sees that much and goes, keeping its cursor
  -- (through JSON, as another process would); client B makes it print `n` numbers and "two".
  local function start_and_leave(script, n, opts)
    local a = assert(remote.connect({ socket = sock }))
    local p = assert(a:spawn({ "sh", "-c", script }, opts))
    assert(p:expect("one\n"))
    local cursor = cjson.decode(cjson.encode(p:cursor()))
    local id = p.id
    a:close()
    local b = assert(remote.connect({ socket = sock }))
    local pb = assert(b:attach(id))
    pb:sendline("go")
    assert(pb:expect(("\n%d\ntwo\n"):format(n), { timeout = 30 }))
    b:close()
    return id, cursor
  end

  it("continues after the cursor: nothing the first client saw again, nothing lost", function()
    local id, cursor = start_and_leave("echo one; read x; seq 1 20000; echo two; read y; "
      .. "echo three", 20000)
    assert.same({ 4, 0 }, cursor.offsets)
    assert.is_true(cursor.seq >= 1)
    local c = assert(remote.connect({ socket = sock }))
    local p = assert(c:attach(id, cursor))
    p:sendline("y")
    assert(p:expect("three\n"))
    assert.equals(0, p:wait({ timeout = 10 }).code)
    local got, dropped = p:read()
    assert.equals(0, dropped)
    assert.is_true(got == seq_text(1, 20000) .. "two\nthree\n", "not the bytes after the cursor")
    c:close()
  end)

  it("says exactly how many bytes after the cursor the server no longer holds", function()
    -- (more than the server keeps as chunks, and a session tail of 64 KiB: the start is gone)
    local n = 400000
    local id, cursor = start_and_leave("echo one; read x; seq 1 " .. n .. "; echo two; read y",
      n, { tail = 65536 })
    local c = assert(remote.connect({ socket = sock }))
    local p = assert(c:attach(id, cursor))
    assert(p:expect("two\n"))
    p:sendline("")
    assert.equals(0, p:wait({ timeout = 10 }).code)
    local got, dropped, gap_at = p:read()
    local want = seq_text(1, n) .. "two\n"
    assert.is_true(dropped > 0, "nothing was dropped: the spec tests nothing")
    assert.equals(#want, dropped + #got)
    -- (the session's head, fetched, then what was gone, then the newest bytes)
    assert.is_true(gap_at > 0 and got:sub(1, gap_at) == want:sub(1, gap_at),
      "not the first bytes after the cursor")
    assert.is_true(got:sub(-65536) == want:sub(-65536), "not the last bytes after the cursor")
    c:close()
  end)

  it("refuses a cursor past the session's output, and one that is not a cursor", function()
    local host = assert(remote.connect({ socket = sock, name = "daemon" }))
    local p = assert(host:spawn({ "sh", "-c", "echo one; read x" }))
    assert(p:expect("one\n"))
    local cursor = p:cursor()
    local r, err = host:attach(p.id, { seq = cursor.seq + 5, offsets = { 4, 0 } })
    assert.is_nil(r)
    assert.equals(("daemon: the cursor (seq %d) is past the output of process %s (its last "
      .. "seq is %d)"):format(cursor.seq + 5, p.id, cursor.seq), err)
    local ok, msg = pcall(host.attach, host, p.id, { seq = 1 })
    assert.is_false(ok)
    assert.matches("bad argument #2 to 'attach' %(a cursor {seq = N, offsets = {O1, O2}} from "
      .. "p:cursor%(%) expected: no 'offsets'%)", msg)
    p:sendline("")
    assert.equals(0, p:wait({ timeout = 10 }).code)
    host:close()
  end)
end)
