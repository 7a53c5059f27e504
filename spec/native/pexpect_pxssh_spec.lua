-- pexpect's tests/test_pxssh.py translated case by case. pexpect's cases log in through a
-- fake ssh on PATH; so do these: a client that asks "me@server's password: " with the
-- terminal's echo off (as ssh does), refuses a wrong password as ssh does, and then runs an
-- interactive bash on the raw terminal (luxec.ssh's login is over when the terminal goes
-- raw). luxec.ssh against the real OpenSSH is spec/native/ssh_spec.lua.
local H = require("helper")
local luxec = require("luxec")

local FAKE_SSH = [[#!/usr/bin/env python3
import os, sys, termios, tty
who = "me@server"
for _ in range(3):
    old = termios.tcgetattr(0)
    new = termios.tcgetattr(0); new[3] &= ~termios.ECHO
    sys.stdout.write(who + "'s password: "); sys.stdout.flush()
    termios.tcsetattr(0, termios.TCSAFLUSH, new)
    pw = sys.stdin.readline().strip()
    termios.tcsetattr(0, termios.TCSAFLUSH, old)
    sys.stdout.write("\n"); sys.stdout.flush()
    if pw == "s3cret":
        break
    sys.stdout.write("Permission denied, please try again.\n"); sys.stdout.flush()
else:
    sys.stdout.write(who + ": Permission denied (publickey,password).\n"); sys.exit(255)
tty.setraw(0)
os.execvp("bash", ["bash", "--noprofile", "--rcfile", os.environ["FAKE_RC"], "-i"])
]]

-- The other kind of fake pexpect's test_pxssh.py uses (tests/fakessh/ssh, described, not
-- copied): the terminal stays cooked all along; after the password a "$" prompt, a line
-- `PS1=<a Python string literal>` sets the prompt as the literal reads (no $? expanded),
-- "ping" answers "pong", "exit" ends it.
local COOKED_SSH = [[#!/usr/bin/env python3
import getpass, sys
print("a fake ssh that keeps the terminal cooked")
if getpass.getpass("password:") != "s3cret":
    print("Permission denied!")
    sys.exit(1)
prompt = "$"
while True:
    line = input(prompt)
    if line.startswith("PS1="):
        prompt = eval(line[4:])
    elif line == "ping":
        print("pong")
    elif line in ("exit", "logout"):
        break
]]

describe("pexpect's test_pxssh.py", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    H.write_file(dir .. "/ssh", FAKE_SSH, tonumber("755", 8))
    H.write_file(dir .. "/rc", "ping() { echo pong; }\nPS1='$ '\n")
    H.write_file(dir .. "/rc-readonly", "PS1='$ '\nreadonly PS1\n")
  end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  local function login(password, rc)
    return luxec.ssh.login({ host = "server", user = "me", password = password,
      ssh = dir .. "/ssh", timeout = 10, env = { FAKE_RC = dir .. "/" .. (rc or "rc") } })
  end

  it("test_fake_ssh", function()
    local s = assert(login("s3cret"))
    s.process:sendline("ping")
    assert(s.process:expect("pong", { timeout = 10 }))
    assert(s:prompt({ timeout = 10 }))
    assert.same({ "pong\n", 0 }, { s:run("ping") })
    assert(s:logout())
  end)

  it("test_fake_ssh, with pexpect's kind of fake: a session that never makes the terminal "
    .. "raw is open at its prompt once it echoes again and waits for a line", function()
      H.write_file(dir .. "/cooked-ssh", COOKED_SSH, tonumber("755", 8))
      local s = assert(luxec.ssh.login({ host = "server", user = "me", password = "s3cret",
        ssh = dir .. "/cooked-ssh", timeout = 10 }))
      s.process:sendline("ping")
      assert(s.process:expect("pong", { timeout = 10 }))
      assert(s:prompt({ timeout = 10 }))
      -- (this shell does not expand $? in its prompt: no status)
      assert.same({ "pong\n" }, { s:run("ping") })
      assert(s:logout())
      local none, _, code = luxec.ssh.login({ host = "server", user = "me", password = "wr0ng",
        ssh = dir .. "/cooked-ssh", timeout = 10 })
      assert.same({ nil, "auth" }, { none, code })
    end)

  it("a cooked session whose prompt comes well before it reads (a loaded machine) is open "
    .. "once it reads", function()
      H.write_file(dir .. "/slow-ssh", COOKED_SSH:gsub("prompt = \"%$\"\n",
        "prompt = \"$\"\nimport time\nsys.stdout.write(prompt); sys.stdout.flush()\n"
        .. "time.sleep(1.5); prompt = \"\"\n", 1), tonumber("755", 8))
      local s = assert(luxec.ssh.login({ host = "server", user = "me", password = "s3cret",
        ssh = dir .. "/slow-ssh", timeout = 10 }))
      s.process:sendline("ping")
      assert(s.process:expect("pong", { timeout = 10 }))
      s.process:sendline("exit")
      assert(s.process:wait({ timeout = 10 }))
      s.process:close()
    end)

  it("test_wrong_pw", function()
    local s, msg, code = login("wr0ng")
    assert.same({ nil, "auth" }, { s, code })
    assert.equals("auth: permission denied: me@server refused the password", msg)
  end)

  it("test_failed_set_unique_prompt: a shell that keeps its own prompt", function()
    local s, msg, code = luxec.ssh.login({ host = "server", user = "me", password = "s3cret",
      ssh = dir .. "/ssh", timeout = 5, env = { FAKE_RC = dir .. "/rc-readonly" } })
    assert.same({ nil, "timeout" }, { s, code })
    assert.matches("^timeout: the shell on me@server did not show the prompt set for it", msg)
  end)
end)
