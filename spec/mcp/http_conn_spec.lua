-- luxec.mcp.http_conn on real TCP: a client that never reads what it asked for is dropped
-- once more than the bound waits unsent, so the server's memory stays bounded.
local H = require("helper")
local uv = require("luv")
local conn_mod = require("luxec.mcp.http_conn")

describe("luxec.mcp.http_conn", function()
  after_each(function() H.assert_clean() end)

  it("drops a client that does not read an event stream, past max_queued_bytes", function()
    local MAX = 256 * 1024
    local limits = { header_bytes = 4096, body_bytes = 4096, request_timeout_ms = 60000,
      max_queued_bytes = MAX }
    local server = uv.new_tcp()
    assert(server:bind("127.0.0.1", 0))
    local port = server:getsockname().port
    local conn, logs, sent, chunk = nil, {}, 0, ("x"):rep(64 * 1024)
    local pump = uv.new_timer()
    assert(server:listen(8, function()
      local c = uv.new_tcp()
      server:accept(c)
      conn = conn_mod.serve(c, limits, function(cn)
        cn:stream(200, { ["Content-Type"] = "text/event-stream" })
        -- what a session would send: event after event, as fast as the loop turns
        pump:start(0, 1, function()
          if cn.closed then return pump:stop() end
          cn:write(chunk)
          if not cn.closed then sent = sent + #chunk end
        end)
      end, function(msg) logs[#logs + 1] = msg end)
    end))
    local client = uv.new_tcp()
    client:connect("127.0.0.1", port, function(err)
      assert(not err, err)
      client:write("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") -- and never reads
    end)
    H.wait_for(function() return conn and conn.closed end, 60000, "the slow client dropped")
    pump:close()
    client:close()
    server:close()
    uv.run("nowait")
    assert.same({ ("the client reads too slowly (over %d bytes unsent)"):format(MAX) }, logs)
    -- what the kernel's buffers took, the bound, and one event more: never all it would send
    assert.is_true(sent > MAX, "sent " .. sent)
    assert.is_true(sent < 64 * 1024 * 1024, "sent " .. sent)
  end)
end)
