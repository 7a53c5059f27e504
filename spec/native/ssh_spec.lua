-- luxec.ssh against the real OpenSSH: an sshd started here on a loopback port with its own
-- host key and configuration, a test user created here (password and key authentication)
-- and removed after. sshd runs in a mount namespace of its own with empty /run and /var/log:
-- its privilege separation directory and its login records (utmp, wtmp, lastlog) never
-- reach the machine.
local H = require("helper")
local luxec = require("luxec")
local openssh = require("lib.sshd")
local uv = require("luv")

local err_of = H.err_of

local function sh(cmd)
  local ok = os.execute("(" .. cmd .. ") >/dev/null 2>&1")
  assert(ok, "failed: " .. cmd)
end

local function skip_reason()
  local why_not = openssh.skip_reason()
  if why_not then return why_not end
  if not uv.fs_stat("/usr/sbin/useradd") then return "no useradd" end
  if not uv.fs_stat("/usr/bin/unshare") then return "no unshare (util-linux)" end
  return nil
end

local why_not = skip_reason()

describe("luxec.ssh.login against OpenSSH", function()
  if why_not then
    it("is skipped", function()
      print("ssh spec skipped: " .. why_not)
      pending(why_not)
    end)
    return
  end

  local dir, port, user, sshd_pid
  local password = "pw-" .. tostring(uv.hrtime() % 1000000)

  -- Options every login here uses: this spec's known_hosts, no agent, no other keys.
  local function opts(extra)
    local o = {
      host = "127.0.0.1", port = port, user = user, timeout = 10,
      options = { UserKnownHostsFile = dir .. "/known_hosts", IdentityAgent = "none",
        PubkeyAuthentication = "no", GlobalKnownHostsFile = "/dev/null" },
      config = "/dev/null",
    }
    for k, v in pairs(extra or {}) do
      o[k] = v
    end
    return o
  end

  -- H.assert_clean, but for sshd: it daemonised, and where this process is a subreaper (the
  -- host becomes one when earlier specs need it) it is one of this process's children.
  -- Children this process had before the file began (an orphan an earlier file's shell left,
  -- adopted by the subreaper) are not this file's.
  local before = {}
  local function assert_clean()
    local function others()
      local list = {}
      for _, pid in ipairs(H.children()) do
        if pid ~= sshd_pid and not before[pid] then list[#list + 1] = pid end
      end
      return list
    end
    uv.run("nowait")
    local handles = require("luxec.core").active_handles()
    local kids -- as the wait's last look saw them (a read after it could see one adopted since)
    pcall(H.wait_for, function()
      kids = others()
      return #kids == 0
    end, 2000)
    local described = {}
    for _, pid in ipairs(kids) do
      local f = io.open(("/proc/%d/cmdline"):format(pid))
      local cmd = f and f:read("a"):gsub("%z", " ") or "?"
      if f then f:close() end
      f = io.open(("/proc/%d/stat"):format(pid))
      described[#described + 1] = ("%d %s %s"):format(pid,
        f and f:read("l"):match("%b() %a") or "?", cmd)
      if f then f:close() end
      uv.kill(pid, "sigkill")
    end
    assert(#handles == 0, "test left active handles: " .. table.concat(handles, ", "))
    assert(#kids == 0, "test left child processes: " .. table.concat(described, ", "))
  end

  -- known_hosts with the server's key, as a host already trusted.
  local function trust_host()
    local pub = H.read_file(dir .. "/host_key.pub"):match("^(%S+ %S+)")
    H.write_file(dir .. "/known_hosts", ("[127.0.0.1]:%d %s\n"):format(port, pub))
  end

  setup(function()
    for _, pid in ipairs(H.children()) do before[pid] = true end
    dir = H.tmpdir()
    sh("chmod 755 " .. dir) -- sshd reads authorized_keys as the user
    user = ("luxec-t%d"):format(uv.os_getpid() % 100000)
    openssh.keygen(dir .. "/host_key")
    openssh.keygen(dir .. "/other_host_key")
    openssh.keygen(dir .. "/user_key")
    openssh.keygen(dir .. "/locked_key", "secret words")
    sh(("cat %s/user_key.pub %s/locked_key.pub > %s/authorized_keys"):format(dir, dir, dir))
    sh(("chmod 644 %s/authorized_keys"):format(dir))
    sh(("useradd -l -M -d %s/home -s /bin/bash %s"):format(dir, user)) -- -l: no lastlog entry
    sh(("mkdir %s/home && chown %s %s/home"):format(dir, user, dir))
    local f = assert(io.popen("chpasswd", "w"))
    f:write(("%s:%s\n"):format(user, password))
    assert(f:close())
    port = H.free_port()
    openssh.config(dir, dir .. "/host_key", { "Port " .. port, "ListenAddress 127.0.0.1",
      "PidFile " .. dir .. "/sshd.pid", "PasswordAuthentication yes", "PermitRootLogin no",
      "AllowUsers " .. user, "PrintMotd no", "PrintLastLog no", "LogLevel ERROR" })
    local r = H.run({ cmd = "/usr/bin/unshare", "--mount", "--propagation", "private",
      "/bin/sh", "-c", "mount -t tmpfs tmpfs /run && mkdir /run/sshd && " ..
      "mount -t tmpfs tmpfs /var/log && exec " .. openssh.path .. " -f " .. dir .. "/sshd_config" })
    assert(r.code == 0, "sshd: " .. r.stderr)
    H.wait_for(function()
      local pid = tonumber(H.read_file(dir .. "/sshd.pid") or "")
      sshd_pid = pid
      return pid ~= nil
    end, 5000, "sshd's pid file")
  end)

  teardown(function()
    if os.getenv("KEEP") then print(dir, port, user) return end
    if sshd_pid then
      uv.kill(sshd_pid, "sigterm")
      H.wait_for(function() return not H.alive(sshd_pid) end, 5000, "sshd's end")
    end
    if user then os.execute("userdel -f " .. user .. " >/dev/null 2>&1") end
    if dir then H.rmtree(dir) end
  end)

  after_each(function()
    os.remove(dir .. "/known_hosts")
    assert_clean()
  end)

  it("logs in with a password; run returns each command's output and exit status", function()
    trust_host()
    local s = assert(luxec.ssh.login(opts({ password = password })))
    assert.same({ "hi\n", 0 }, { s:run("echo hi") })
    assert.same({ user .. "\n", 0 }, { s:run("id -un") })
    assert.same({ "", 1 }, { s:run("false") })
    assert.same({ "a\tb\nc\n", 7 }, { s:run("printf 'a\\tb\\nc\\n'; (exit 7)") })
    assert.same({ dir .. "/home\n", 0 }, { s:run("pwd") })
    local st = assert(s:logout())
    assert.equals(0, st.code)
    assert.is_true(s.process:closed())
  end)

  it("logs in with a key, and with a key's passphrase", function()
    trust_host()
    local s = assert(luxec.ssh.login(opts({ key = dir .. "/user_key",
      options = { UserKnownHostsFile = dir .. "/known_hosts", IdentityAgent = "none" } })))
    assert.same({ user .. "\n", 0 }, { s:run("whoami") })
    assert.equals(0, assert(s:logout()).code)
    s = assert(luxec.ssh.login(opts({ key = dir .. "/locked_key", passphrase = "secret words",
      options = { UserKnownHostsFile = dir .. "/known_hosts", IdentityAgent = "none" } })))
    assert.same({ "3\n", 0 }, { s:run("echo $((1 + 2))") })
    s:close()
    local none, msg, code = luxec.ssh.login(opts({ key = dir .. "/locked_key",
      options = { UserKnownHostsFile = dir .. "/known_hosts", IdentityAgent = "none" } }))
    assert.same({ nil, "auth" }, { none, code })
    assert.equals(("auth: %s@127.0.0.1:%d asks for the key's passphrase (option passphrase) " ..
      "and none was given"):format(user, port), msg)
  end)

  it("a wrong password is an auth error, and no process is left", function()
    trust_host()
    local s, msg, code = luxec.ssh.login(opts({ password = "not-" .. password }))
    assert.is_nil(s)
    assert.equals("auth", code)
    assert.equals(("auth: permission denied: %s@127.0.0.1:%d refused the password")
      :format(user, port), msg)
    s, msg, code = luxec.ssh.login(opts())
    assert.same({ nil, "auth" }, { s, code })
    assert.equals(("auth: %s@127.0.0.1:%d asks for a password (option password) and none " ..
      "was given"):format(user, port), msg)
  end)

  it("an unknown host key fails naming its fingerprint unless accepted", function()
    local s, msg, code = luxec.ssh.login(opts({ password = password }))
    assert.same({ nil, "host_key" }, { s, code })
    local fp = H.run({ cmd = "/usr/bin/ssh-keygen", "-l", "-E", "sha256", "-f",
      dir .. "/host_key.pub" }).stdout:match("(SHA256:%S+)")
    assert.equals(("host key: %s@127.0.0.1:%d is not a known host (ED25519 key fingerprint " ..
      "is %s); accept it with accept_new_host_key = true, or add it to known_hosts")
      :format(user, port, fp), msg)
    assert.is_nil(H.read_file(dir .. "/known_hosts"))
    s = assert(luxec.ssh.login(opts({ password = password, accept_new_host_key = true })))
    assert.same({ "ok\n", 0 }, { s:run("echo ok") })
    s:close()
    assert.truthy(H.read_file(dir .. "/known_hosts"):find(("[127.0.0.1]:%d ssh-ed25519 ")
      :format(port), 1, true))
    s = assert(luxec.ssh.login(opts({ password = password }))) -- known now
    s:close()
    os.remove(dir .. "/known_hosts")
    local o = opts({ password = password })
    o.options.StrictHostKeyChecking = "yes"
    s, msg, code = luxec.ssh.login(o)
    assert.same({ nil, "host_key" }, { s, code })
    assert.equals(("host key: ssh could not verify the host key of %s@127.0.0.1:%d: No " ..
      "ED25519 host key is known for [127.0.0.1]:%d and you have requested strict checking.")
      :format(user, port, port), msg)
  end)

  it("a changed host key is a clear error", function()
    local other = H.read_file(dir .. "/other_host_key.pub"):match("^(%S+ %S+)")
    H.write_file(dir .. "/known_hosts", ("[127.0.0.1]:%d %s\n"):format(port, other))
    local s, msg, code = luxec.ssh.login(opts({ password = password,
      accept_new_host_key = true }))
    assert.same({ nil, "host_key" }, { s, code })
    assert.equals(("host key: the host key of %s@127.0.0.1:%d has changed (possible " ..
      "man-in-the-middle, or the host was reinstalled); ssh refused to connect. Remove the " ..
      "old key with ssh-keygen -R if the change is expected"):format(user, port), msg)
  end)

  it("a server that never answers is a timeout; a closed port ends as eof", function()
    local silent = uv.new_tcp()
    assert(silent:bind("127.0.0.1", 0))
    local sport = silent:getsockname().port
    local conns = {}
    silent:listen(8, function()
      local c = uv.new_tcp()
      silent:accept(c)
      conns[#conns + 1] = c
    end)
    local t0 = H.now_ms()
    local s, msg, code = luxec.ssh.login(opts({ port = sport, password = password,
      timeout = 0.5 }))
    local ms = H.now_ms() - t0
    for _, c in ipairs(conns) do c:close() end
    silent:close()
    assert.same({ nil, "timeout" }, { s, code })
    assert.equals(("timeout: no shell session on %s@127.0.0.1:%d within 0.5 s; last output: " ..
      "(nothing)"):format(user, sport), msg)
    assert.is_true(ms >= 500 and ms < 10000, ms) -- (the login's own default is 30 s)
    local closed = H.free_port()
    s, msg, code = luxec.ssh.login(opts({ port = closed, password = password }))
    assert.same({ nil, "eof" }, { s, code })
    assert.equals(("eof: ssh to %s@127.0.0.1:%d ended before a shell session (exit code " ..
      "255): ssh: connect to host 127.0.0.1 port %d: Connection refused")
      :format(user, closed, closed), msg)
  end)

  it("a command that outlasts its timeout; ^C and s:prompt() take the session back", function()
    trust_host()
    local s = assert(luxec.ssh.login(opts({ password = password })))
    local out, msg, code = s:run("sleep 30", { timeout = 0.3 })
    assert.same({ nil, "timeout" }, { out, code })
    assert.truthy(msg:find('(running "sleep 30" on ', 1, true), msg)
    s.process:sendcontrol("c")
    assert.same({ "\n", 130 }, { s:prompt() }) -- the shell ends the line ^C cut
    assert.same({ "back\n", 0 }, { s:run("echo back") })
    s:close()
  end)
end)

describe("luxec.ssh.login", function()
  after_each(H.assert_clean)

  it("sends no password to a prompt whose terminal still echoes it", function()
    local dir = H.tmpdir()
    -- Says what ssh says, but reads the answer with echo on.
    H.write_file(dir .. "/fake-ssh", "#!/bin/sh\nprintf \"%s\" \"alice@db1's password: \"\n" ..
      "read pw\necho \"got $pw\"\n", tonumber("755", 8))
    local s, msg, code = luxec.ssh.login({ host = "db1", user = "alice", password = "hunter2",
      ssh = dir .. "/fake-ssh", timeout = 0.5 })
    H.rmtree(dir)
    assert.same({ nil, "auth" }, { s, code })
    assert.equals("auth: a password prompt from alice@db1, but the terminal still echoes; " ..
      "last output: alice@db1's password:", msg)
  end)

  it("names bad options", function()
    assert.equals("bad argument #1 to 'login' (options table expected, got string)",
      err_of(luxec.ssh.login, "host"))
    assert.equals("bad option 'host' to 'login' (a host name or address expected)",
      err_of(luxec.ssh.login, { user = "a" }))
    assert.equals("bad option 'port' to 'login' (1-65535 expected, got 0)",
      err_of(luxec.ssh.login, { host = "h", port = 0 }))
    assert.equals("bad option 'pasword' to 'login' (unknown option)",
      err_of(luxec.ssh.login, { host = "h", pasword = "x" }))
    assert.equals("bad option 'password' to 'login' (string expected, got number)",
      err_of(luxec.ssh.login, { host = "h", password = 1 }))
    assert.truthy(err_of(luxec.ssh.login, { host = "h", options = { "-v" } })
      :find("bad option 'options' to 'login' (a table of ssh -o settings", 1, true))
  end)
end)
