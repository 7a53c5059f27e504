-- luxec.remote: a client far behind a session (re-attached after a long absence, or slower
-- than the output) gets every byte the server still holds — its log, the session's head and
-- tail — fetched in bounded pieces as it reads, and only what the server no longer has is
-- counted as dropped; and a client writing faster than the link keeps a bounded window.
local H = require("helper")
local luxec = require("luxec")
local remote = require("luxec.remote")
local core = require("luxec.remote.core")

local MIB = 1024 * 1024

local server_lib = require("lib.unix_server")
local listen, stop = server_lib.listen, server_lib.stop

-- Everything a reader gets until the session ends: the bytes, the dropped count, where the
-- first gap was, and the most this client held of the stream at once.
local function read_all(p)
  local parts, dropped, gap_at, len, most = {}, 0, nil, 0, 0
  local b = p._core.bufs[1]
  while true do
    most = math.max(most, b.total - b.base)
    local data, d, at = p:read()
    if d > 0 and not gap_at then gap_at = len + at end
    parts[#parts + 1], dropped, len = data, dropped + d, len + #data
    if data == "" then
      if p:eof() then break end
      if not p:wait_output({ timeout = 60 }) then
        -- (what the client's catching up was doing, to tell where it stopped)
        local c = p._core
        error(("no output came in 60 s: %d bytes read; client: seen %s, exit_seq %s, "
          .. "exited %s, closed %s, filling %s, lagging %s, waiting for room %s, taken %d, "
          .. "held %d..%d"):format(len, tostring(c.seen), tostring(c.exit_seq),
          tostring(c.exited), tostring(c.closed), tostring(c.filling), tostring(c.lagging),
          tostring(c.room_wake ~= nil), c.taken[1], b.base, b.total))
      end
    end
  end
  return table.concat(parts), dropped, gap_at, most
end

describe("a remote client far behind a session", function()
  local dir, server, sock, data
  before_each(function()
    dir = H.tmpdir()
    sock = dir .. "/s.sock"
    server = listen(sock)
    -- 12 MiB no two of whose MiB are alike
    local block = assert(io.open("/dev/urandom", "rb")):read(MIB)
    local t = {}
    for i = 1, 12 do t[i] = ("%08d"):format(i) .. block:sub(9) end
    data = table.concat(t)
    H.write_file(dir .. "/data", data)
    assert(os.execute("mkfifo " .. dir .. "/go"))
  end)
  after_each(function()
    stop(server)
    H.rmtree(dir)
    H.assert_clean()
  end)

  -- A session that writes the 12 MiB once told (through a fifo), while no client is attached;
  -- then a client attaches from a cursor at 0.
  local function written_while_away(opts)
    local a = assert(remote.connect({ socket = sock }))
    opts.stdin = "null"
    local p = assert(a:spawn({ "sh", "-c", ("read x < %s/go; cat %s/data; : > %s/done")
      :format(dir, dir, dir) }, opts))
    local id = p.id
    a:close()
    local f = assert(io.open(dir .. "/go", "w"))
    f:write("go\n")
    f:close()
    H.wait_for(function() return H.read_file(dir .. "/done") ~= nil end, 60000,
      "the session to write its output")
    local c = assert(remote.connect({ socket = sock }))
    return c, assert(c:attach(id, { seq = 0, offsets = { 0, 0 } }))
  end

  it("reads every byte of the session's log, in bounded pieces, none dropped", function()
    local c, p = written_while_away({ log = dir .. "/log" })
    local got, dropped, _, most = read_all(p)
    assert.equals(0, dropped)
    assert.equals(#data, #got)
    assert.is_true(got == H.read_file(dir .. "/log"), "not the bytes of the log")
    assert.is_true(got == data, "not the bytes the session wrote")
    assert.is_true(most <= 2 * core.KEEP, ("the client held %d bytes at once"):format(most))
    assert.equals(0, p:wait({ timeout = 10 }).code)
    c:close()
  end)

  it("without a log, gets the head and the tail and counts exactly what is gone", function()
    local c, p = written_while_away({})
    local snap = p:snapshot()
    assert.is_true(snap.dropped > 0, "the server dropped nothing: the spec tests nothing")
    local got, dropped, gap_at = read_all(p)
    assert.equals(snap.dropped, dropped)
    assert.equals(#snap.head, gap_at)
    assert.equals(#data, #got + dropped)
    assert.is_true(got == data:sub(1, #snap.head) .. data:sub(#snap.head + dropped + 1),
      "not the bytes the server held")
    assert.equals(0, p:wait({ timeout = 10 }).code)
    c:close()
  end)
end)

describe("a remote client writing faster than the session reads", function()
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

  it("keeps at most its window in flight, and every byte arrives", function()
    local host = assert(remote.connect({ socket = sock }))
    local p = assert(host:spawn({ "md5sum" }))
    local block = assert(io.open("/dev/urandom", "rb")):read(MIB)
    local all, most = {}, 0
    for i = 1, 64 do
      local piece = ("%08d"):format(i) .. block:sub(9)
      all[i] = piece
      assert.equals(MIB, p:write(piece))
      most = math.max(most, p:status().write_queued)
    end
    p:close_stdin()
    assert.equals(0, p:wait({ timeout = 120 }).code)
    assert.is_true(most >= MIB, "nothing was in flight: the spec tests nothing")
    assert.is_true(most <= core.WINDOW + MIB,
      ("%d bytes were queued on the client"):format(most))
    local want = luxec.run({ "md5sum" }, { input = table.concat(all) })
    assert.equals(want.output, p:read())
    host:close()
  end)
end)
