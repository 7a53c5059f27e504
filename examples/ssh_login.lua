-- Log in through an ssh-style password prompt and run commands: the job of Expect's classic
-- ssh script, without its sleeps and without its race (ssh flushes what is typed before it
-- turns echo off, so the password is sent once the program really waits for it).
--   build/bin/luxec examples/ssh_login.lua [SSH [USER@HOST [PASSWORD]]]
-- By default it drives build/fixtures/fakessh (which behaves like ssh at a password prompt);
-- `examples/ssh_login.lua ssh you@yourhost yourpassword` drives the real one.
local luxec = require("luxec")

local here = arg[0]:match("^(.*)/[^/]*$") or "."
local ssh = arg[1] or (here .. "/../build/fixtures/fakessh")
local login, password = arg[2] or "alice@db1", arg[3] or "secret"

local p = assert(luxec.spawn({ ssh, login }, { tty = true }))
p.timeout = 10 -- seconds, for every expect below

local i = assert(p:expect({ "password: ", "(yes/no", "Permission denied" }))
if i == 2 then -- a new host key
  p:sendline("yes")
  assert(p:expect("password: "))
elseif i == 3 then
  error("the server refused: " .. p.before)
end
assert(p:wait_input({ echo_off = true }))
print("password prompt, echo off: " .. tostring(p:status().echo_off))
p:sendline(password)

i = assert(p:expect({ "Permission denied", { re = "\\$ $" } }))
if i == 1 then error("wrong password for " .. login) end

-- A command, its output between the echo of the command and the next prompt.
local function run(cmd)
  p:sendline(cmd)
  assert(p:expect(cmd .. "\r\n"))
  assert(p:expect({ re = "\\$ $" }))
  return (p.before:gsub("\r\n[^\n]*$", ""):gsub("\r", ""))
end

print("hostname: " .. run("hostname"))
print("whoami: " .. run("whoami"))
p:sendline("exit")
assert(p:expect(luxec.EOF))
local st = p:wait({ timeout = 5 })
print(("logged out, exit code %d"):format(st.code))
