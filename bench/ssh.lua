-- luxec.ssh: log in, run N commands, log out; prints the seconds it took (one line).
--   luxec bench/ssh.lua PORT USER PASSWORD KNOWN_HOSTS [N]
local luxec = require("luxec")
local uv = require("luv")

local port, user, password, known = tonumber(arg[1]), arg[2], arg[3], arg[4]
local n = tonumber(arg[5] or "100")
local t0 = uv.hrtime()
local s = assert(luxec.ssh.login({ host = "127.0.0.1", port = port, user = user,
  password = password, config = "/dev/null",
  options = { UserKnownHostsFile = known, PubkeyAuthentication = "no",
    IdentityAgent = "none" } }))
for i = 1, n do
  local out, status = s:run("echo " .. i)
  assert(out == i .. "\n" and status == 0, out)
end
assert(s:logout())
print(("%.4f"):format((uv.hrtime() - t0) / 1e9))
