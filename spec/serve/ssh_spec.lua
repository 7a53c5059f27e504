-- luxec.remote over real OpenSSH: an sshd on the loopback with a generated host key and
-- client key runs `luxec serve` from the build tree for each connection.
local H = require("helper")
local luxec = require("luxec")
local remote = require("luxec.remote")
local openssh = require("lib.sshd")
local uv = require("luv")

describe("luxec.remote over ssh", function()
  local dir, port, sshd

  local function start_sshd()
    sshd = assert(luxec.spawn({ openssh.path, "-D", "-e", "-f", dir .. "/sshd_config" }))
    sshd:expect("Server listening on 127.0.0.1", { timeout = 10 })
  end

  local function ssh(key, ...)
    local argv = { "ssh", "-T", "-i", dir .. "/" .. key, "-p", tostring(port),
      "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
      "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@127.0.0.1" }
    for _, a in ipairs({ ... }) do argv[#argv + 1] = a end
    return argv
  end

  before_each(function()
    local why_not = openssh.skip_reason()
    if why_not then return pending(why_not) end
    if not uv.fs_stat("/run/sshd") then uv.fs_mkdir("/run/sshd", 493) end
    dir = H.tmpdir()
    port = H.free_port()
    openssh.keygen(dir .. "/host_key")
    openssh.keygen(dir .. "/client_key")
    openssh.keygen(dir .. "/other_key")
    H.write_file(dir .. "/authorized_keys", H.read_file(dir .. "/client_key.pub"))
    openssh.config(dir, dir .. "/host_key", { "Port " .. port, "ListenAddress 127.0.0.1",
      "PermitRootLogin prohibit-password", "PasswordAuthentication no",
      "PidFile " .. dir .. "/sshd.pid" })
    start_sshd()
  end)

  after_each(function()
    if sshd then
      sshd:terminate()
      sshd:close()
      sshd = nil
    end
    if dir then H.rmtree(dir) end
    dir = nil
    H.assert_clean()
  end)

  it("drives python3 -i on a remote terminal and runs commands", function()
    local host = assert(remote.connect({ command = ssh("client_key", H.luxec, "serve"),
      name = "sshbox" }))
    local py = assert(host:spawn({ "python3", "-i" }, { tty = true,
      env = { PATH = os.getenv("PATH"), TERM = "dumb" } }))
    py:expect(">>> ")
    py:sendline("print(6*7)")
    py:expect("42\r\n")
    py:sendeof()
    assert.equals(0, py:wait({ timeout = 10 }).code)
    local r = assert(host:run({ "sh", "-c", "echo $((40+2)); exit 7" }))
    assert.same({ 7, "42\n" }, { r.code, r.output })
    host:close()
  end)

  it("ends the remote tree when the ssh client is killed mid-stream", function()
    local host = assert(remote.connect({ command = ssh("client_key", H.luxec, "serve"),
      name = "sshbox" }))
    local p = assert(host:spawn({ "sh", "-c", "sleep 1000 & echo child $!; while :; do "
      .. "echo tick; sleep 0.05; done" }))
    p:expect({ lua = "child (%d+)\n" })
    local child = tonumber(p.captures[1])
    p:expect("tick")
    assert.equals(0, uv.kill(host.conn.transport.pid, "sigkill"))
    local st = p:wait({ timeout = 10 })
    assert.matches("^connection to sshbox lost", st.connection_lost)
    H.wait_for(function() return not H.alive(p.pid) and not H.alive(child) end, 10000,
      "the remote tree to end")
    host:close()
  end)

  it("says what went wrong, naming the host and quoting ssh", function()
    local h, err = remote.connect({ command = ssh("other_key", H.luxec, "serve"),
      name = "sshbox" })
    assert.is_nil(h)
    assert.equals("connection to sshbox lost: root@127.0.0.1: Permission denied (publickey).",
      err)
    h, err = remote.connect({ command = ssh("client_key", "/nonexistent/luxec", "serve"),
      name = "sshbox" })
    assert.is_nil(h)
    assert.matches("^connection to sshbox lost: .*/nonexistent/luxec: .*No such file", err)
    sshd:terminate()
    sshd:close()
    sshd = nil
    h, err = remote.connect({ command = ssh("client_key", H.luxec, "serve"), name = "sshbox" })
    assert.is_nil(h)
    assert.equals(("connection to sshbox lost: ssh: connect to host 127.0.0.1 port %d: "
      .. "Connection refused"):format(port), err)
  end)
end)
