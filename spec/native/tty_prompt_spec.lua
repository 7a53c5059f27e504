-- Prompts that read the controlling terminal through /dev/tty (getpass, ssh, ssh-keygen,
-- `read </dev/tty`) count as waiting for input, like prompts that read stdin.
local H = require("helper")
local luxec = require("luxec")
local openssh = require("lib.sshd")

local procs = {}
local engine = H.engine

local function clean_up()
  H.end_engines()
  for _, p in ipairs(procs) do p:close() end
  procs = {}
  H.assert_clean()
end

describe("a prompt read from /dev/tty", function()
  after_each(clean_up)

  it("python's getpass: the exec call returns at the prompt, waiting for a password",
    function()
      local e = engine()
      local t0 = H.now_ms()
      local r = assert(e:exec_command({ tty = true, yield_time_ms = 20000,
        cmd = "python3 -c \"import getpass; print('got', getpass.getpass('Secret: '))\"" }))
      assert.is_true(H.now_ms() - t0 < 10000, "it returned at the prompt, not at the yield")
      assert.equals("waiting_for_password", r.state)
      assert.matches("Secret: $", r.output)
      r = assert(e:write_stdin({ session_id = r.session_id, chars = "pw1\n",
        yield_time_ms = 5000 }))
      assert.matches("got pw1", r.output, 1, true)
      assert.equals(0, r.exit_code)
    end)

  it("`read -s </dev/tty` in a shell: waiting for a password", function()
    local e = engine()
    local r = assert(e:exec_command({ tty = true, yield_time_ms = 20000,
      cmd = "read -r -s -p 'Key: ' k </dev/tty; echo; echo \"got $k\"" }))
    assert.equals("waiting_for_password", r.state)
    r = assert(e:write_stdin({ session_id = r.session_id, chars = "k2\n", yield_time_ms = 5000 }))
    assert.matches("got k2", r.output, 1, true)
    assert.equals(0, r.exit_code)
  end)

  it("ssh-keygen asking for a key's passphrase: p:wait_input({echo_off = true}) returns",
    function()
      local dir = H.tmpdir()
      local key = dir .. "/id_ed25519"
      local gen = luxec.run({ "ssh-keygen", "-q", "-t", "ed25519", "-N", "pp3", "-f", key })
      assert.equals(0, gen.code)
      local p = luxec.spawn({ "ssh-keygen", "-y", "-f", key }, { tty = true })
      procs[#procs + 1] = p
      assert.is_true(p:wait_input({ echo_off = true, timeout = 10 }))
      p:write("pp3\n")
      assert.is_true(p:wait({ timeout = 10 }).exited)
      assert.equals(0, p:status().code)
      local out = p:read()
      assert.matches("ssh%-ed25519 ", out)
      H.rmtree(dir)
    end)

  -- A real ssh client against a real sshd (run over the client's ProxyCommand in inetd mode,
  -- no port, no password database): a key with a passphrase, which ssh asks on /dev/tty.
  local function ssh_setup()
    local dir = H.tmpdir()
    openssh.keygen(dir .. "/hostkey")
    openssh.keygen(dir .. "/id", "pp5")
    H.write_file(dir .. "/authorized_keys", H.read_file(dir .. "/id.pub"))
    openssh.config(dir, dir .. "/hostkey", { "PasswordAuthentication no",
      "PermitRootLogin yes", "PidFile none" })
    os.execute("mkdir -p /run/sshd") -- (sshd's privilege separation directory)
    local cmd = ("ssh -F /dev/null -o 'ProxyCommand=%s -i -f %s/sshd_config' "
      .. "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes "
      .. "-i %s/id root@luxec-test"):format(openssh.path, dir, dir)
    return dir, cmd
  end
  local ssh_why_not = openssh.skip_reason()

  it("a real ssh asking a key's passphrase: the call returns at that prompt, not before",
    function()
      if ssh_why_not then return pending(ssh_why_not) end
      local dir, cmd = ssh_setup()
      local e = engine()
      -- (ssh waits on its connection with the terminal as stdin before it asks: that wait
      -- is not a wait for input)
      local r = assert(e:exec_command({ tty = true, yield_time_ms = 20000,
        cmd = cmd .. " 'echo logged-in'" }))
      assert.equals("waiting_for_password", r.state)
      assert.matches("Enter passphrase for key '[^']+/id': $", r.output)
      e:terminate(r.session_id)
      -- and with the command's stdin not the terminal, the answer logs in
      r = assert(e:exec_command({ tty = true, yield_time_ms = 20000, input = "pp5\n",
        cmd = cmd .. " -n 'echo logged-in'" }))
      if r.exit_code ~= 0 then -- what ssh and sshd do now, for the failure's message
        local ps = io.popen("ps -eo pid,ppid,stat,wchan:24,args | grep -E 'ssh[d ]' | grep -v grep")
        r.ps = ps:read("a")
        ps:close()
      end
      assert.equals(0, r.exit_code, ("state %s after %s s, warnings %s, output %q, ps:\n%s")
        :format(r.state, r.wall_time, table.concat(r.warnings or {}, "; "), r.output, r.ps))
      assert.matches("logged%-in", r.output)
      H.rmtree(dir)
    end)
end)
