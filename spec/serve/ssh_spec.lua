-- luxec.remote over real OpenSSH on test hosts (spec/lib/testhost.lua: as root each a network
-- namespace with its own address, sshd, generated host key and client key; luxec serve from
-- the build tree): the Process API, expect driving python3 -i, trees ended with no survivor
-- (looked for on the host's side), the ssh client killed mid-stream, and each fault said with
-- the host's name and ssh's own words.
local H = require("helper")
local T = require("lib.testhost")
local remote = require("luxec.remote")
local uv = require("luv")

describe("luxec.remote over ssh", function()
  local box

  before_each(function()
    local why_not = T.skip_reason()
    if why_not then return pending(why_not) end
    box = T.start({ name = "box" })
  end)

  after_each(function()
    if box then box:close() end
    box = nil
    H.assert_clean()
  end)

  local function connect()
    return assert(remote.connect({ command = box:ssh(nil, H.luxec, "serve"), name = "box" }))
  end

  it("drives python3 -i on a remote terminal and runs commands", function()
    local host = connect()
    local py = assert(host:spawn({ "python3", "-i" }, { tty = true,
      env = { PATH = os.getenv("PATH"), TERM = "dumb" } }))
    assert(py:expect(">>> ", { timeout = 30 }))
    py:sendline("print(6*7)")
    assert(py:expect("42\r\n"))
    assert(py:expect(">>> "))
    py:sendeof()
    assert.equals(0, py:wait({ timeout = 30 }).code)
    local r = assert(host:run({ "sh", "-c", "echo $((40+2)); echo $SSH_CONNECTION; exit 7" }))
    assert.equals(7, r.code)
    assert.matches("^42\n%S+ %d+ " .. box.addr:gsub("%.", "%%.") .. " " .. box.port .. "\n$",
      r.output)
    host:close()
  end)

  it("terminates a remote tree with no survivor on the host", function()
    local host = connect()
    local p = assert(host:spawn({ "sh", "-c", "sleep 1000 & sleep 1000 & echo children $!; "
      .. "wait" }))
    assert(p:expect({ lua = "children (%d+)\n" }))
    local tree = { p.pid, tonumber(p.captures[1]) }
    if box.netns then -- (the host's own view: its processes)
      local there = {}
      for _, pid in ipairs(box:pids()) do there[pid] = true end
      assert.is_true(there[tree[1]] and there[tree[2]], "the tree is not on the host")
    end
    local r = p:terminate({ grace_ms = 200 })
    assert.is_true(r.graceful)
    assert.equals("TERM", p:status().signal_name)
    local survivor
    H.wait_for(function()
      survivor = nil
      for _, pid in ipairs(box:pids() or tree) do
        for _, t in ipairs(tree) do
          if pid == t and H.alive(pid) then survivor = pid end
        end
      end
      return survivor == nil
    end, 10000, "the tree to be gone from the host")
    host:close()
    H.wait_for(function() return box:only_sshd(tree) end, 10000,
      "nothing but sshd on the host once the client closed")
  end)

  it("ends the remote trees when the ssh client is killed mid-stream", function()
    local host = connect()
    local p = assert(host:spawn({ "sh", "-c", "sleep 1000 & echo child $!; while :; do "
      .. "echo tick; sleep 0.05; done" }))
    assert(p:expect({ lua = "child (%d+)\n" }))
    local tree = { p.pid, tonumber(p.captures[1]) }
    assert(p:expect("tick"))
    local run_result
    local task = require("luxec").go(function()
      run_result = host:run({ "sleep", "1000" })
    end)
    H.wait_for(function() return #(assert(host:list())) == 2 end, 10000, "the second session")
    assert.equals(0, uv.kill(host.conn.transport.pid, "sigkill"))
    local st = p:wait({ timeout = 10 })
    assert.matches("^connection to box lost", st.connection_lost)
    task:wait()
    assert.matches("^connection to box lost", run_result.connection_lost)
    local r, err = host:spawn({ "true" })
    assert.is_nil(r)
    assert.matches("^connection to box lost", err)
    H.wait_for(function() return box:only_sshd(tree) end, 10000,
      "the remote trees (and luxec serve) to end on the host")
    host:close()
  end)

  it("says what went wrong, naming the host and quoting ssh", function()
    local h, err = remote.connect({ command = box:ssh({ key = "other_key" }, H.luxec, "serve"),
      name = "box" })
    assert.is_nil(h)
    assert.equals("connection to box lost: root@" .. box.addr
      .. ": Permission denied (publickey).", err)
    h, err = remote.connect({ command = box:ssh({ known_hosts = "wrong_known_hosts" },
      H.luxec, "serve"), name = "box" })
    assert.is_nil(h)
    assert.matches("^connection to box lost: .*REMOTE HOST IDENTIFICATION HAS CHANGED.*"
      .. "Host key verification failed%.$", err)
    -- a host without luxec: the login shell there cannot find it
    -- (a path no luxec is at: a copy of the suite beside this one may have a luxec package
    -- installed for a moment, which a bare `luxec` would find)
    h, err = remote.connect({ command = box:ssh(nil, "/nonexistent/bin/luxec", "serve"),
      name = "box" })
    assert.is_nil(h)
    assert.matches("^connection to box lost: .*luxec: No such file or directory$", err)
    box:stop_sshd()
    h, err = remote.connect({ command = box:ssh(nil, H.luxec, "serve"), name = "box" })
    assert.is_nil(h)
    assert.equals(("connection to box lost: ssh: connect to host %s port %d: "
      .. "Connection refused"):format(box.addr, box.port), err)
  end)
end)
