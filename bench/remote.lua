--- Remote sessions over ssh (luxec.remote), one measurement a run; prints key=value lines.
---   luxec bench/remote.lua w4 N SSH_ARGV...      N round trips through `cat` on a remote
---                                                PTY, each waited for with p:expect
---   luxec bench/remote.lua fan N SSH_ARGV... -- SSH_ARGV... -- ...
---                                                N `true` spread over the hosts, one
---                                                connection each, all at once
---   luxec bench/remote.lua pipe BYTES SSH_ARGV...  BYTES written into `cat > /dev/null`
---                                                through a remote pipe session
---   luxec bench/remote.lua pipe BYTES unix:PATH   the same through a server on a socket
--- SSH_ARGV is the command that runs `luxec serve` there (ssh ... luxec serve). Connecting
--- is timed too, except in w4 (one connection, then the round trips).
local luxec = require("luxec")
local remote = require("luxec.remote")
local uv = require("luv")

local mode, n = arg[1], math.tointeger(tonumber(arg[2]))
assert(mode and n, "usage: remote.lua w4|fan|pipe N SSH_ARGV...")

local function hosts_of(from)
  local list, cur = {}, {}
  for i = from, #arg do
    if arg[i] == "--" then
      list[#list + 1], cur = cur, {}
    else
      cur[#cur + 1] = arg[i]
    end
  end
  if #cur > 0 then list[#list + 1] = cur end
  return list
end

local function w4(argv)
  local host = assert(remote.connect({ command = argv, name = "bench" }))
  local p = assert(host:spawn({ "cat" }, { tty = true }))
  p:write("ready\n") -- (as the pexpect side does: the terminal is ready once it echoes)
  p:expect("ready\r\nready\r\n")
  p:read()
  local t0 = uv.hrtime()
  for i = 0, n - 1 do
    local line = ("rt%06d"):format(i)
    assert(p:write(line .. "\n"))
    p:expect(line .. "\r\n" .. line .. "\r\n", { timeout = 10 })
  end
  local secs = (uv.hrtime() - t0) / 1e9
  p:close()
  host:close()
  print(("secs=%.6f"):format(secs))
end

local function fan(targets)
  local t0 = uv.hrtime()
  local hosts, tasks = {}, {}
  for i, argv in ipairs(targets) do
    tasks[i] = luxec.go(function()
      hosts[i] = assert(remote.connect({ command = argv, name = "host" .. i }))
    end)
  end
  for _, t in ipairs(tasks) do t:wait() end
  tasks = {}
  local failed = 0
  for i = 1, n do
    local h = hosts[(i - 1) % #hosts + 1]
    tasks[i] = luxec.go(function()
      local r = assert(h:run({ "true" }))
      if r.code ~= 0 then failed = failed + 1 end
    end)
  end
  for _, t in ipairs(tasks) do t:wait() end
  for _, h in ipairs(hosts) do h:close() end
  local secs = (uv.hrtime() - t0) / 1e9
  assert(failed == 0, failed .. " commands failed")
  print(("secs=%.6f"):format(secs))
end

-- Written in 1 MiB pieces, at most WINDOW bytes not yet accepted by the server (the
-- protocol's process/write answers), so that memory stays bounded on both sides.
local function target_of(argv)
  local path = #argv == 1 and argv[1]:match("^unix:(.+)$")
  -- (LUXEC_FRAMING=lines: Codex's framing, for a comparison)
  local framing = os.getenv("LUXEC_FRAMING")
  if path then return { socket = path, name = "bench", framing = framing } end
  return { command = argv, name = "bench", framing = framing }
end

local function pipe(argv)
  local t0 = uv.hrtime()
  local host = assert(remote.connect(target_of(argv)))
  local p = assert(host:spawn({ "sh", "-c", "cat > /dev/null; echo done" }, { stdin = "pipe" }))
  local piece, window, inflight, sent = ("\0"):rep(1 << 20), 8 << 20, 0, 0
  local conn, waiting = host.conn, nil
  while sent < n do
    local data = #piece <= n - sent and piece or piece:sub(1, n - sent)
    sent = sent + #data
    inflight = inflight + #data
    conn:send_write(p.id, data, function(r, err)
      assert(r and r.status == "accepted", err or (r and r.status))
      inflight = inflight - #data
      if waiting and inflight <= window then
        local w = waiting
        waiting = nil
        w()
      end
    end)
    if inflight > window then
      require("luxec.sched").suspend(function(wake) waiting = wake end)
    end
  end
  p:close_stdin()
  p:expect("done")
  p:wait({ timeout = 60 })
  local secs = (uv.hrtime() - t0) / 1e9
  p:close()
  host:close()
  print(("secs=%.6f"):format(secs))
end

local targets = hosts_of(3)
if mode == "w4" then w4(targets[1])
elseif mode == "fan" then fan(targets)
elseif mode == "pipe" then pipe(targets[1])
else error("unknown mode " .. mode) end
