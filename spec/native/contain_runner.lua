-- The luxec host of one attempt of the containment spec (sandbox_contain_spec.lua). The spec
-- starts it as the user under test (setpriv drops root first), so the host itself runs
-- unprivileged. arg[1] is a JSON object:
--   argv     the command ("@HOST@" in an argument becomes this host's pid)
--   cwd      its working directory
--   sandbox  the policy, or absent for the control run without a sandbox
--   tty      a session on a terminal
--   input    written to the session once it started
--   env      the session's environment (absent: this host's)
-- The session inherits this host's environment (so TMPDIR is the spec's choice).
-- Prints "HOLD <pid>" when the command printed "HELD" (and then waits for a line on stdin
-- before the session gets a newline), then "RESULT <json>" ({code, signal, output, denials,
-- denials_total, error, pid}), then waits for EOF on stdin: while this host is alive the
-- spec looks at it from outside.
local json = require("luxec.json")
local luxec = require("luxec")
local uv = require("luv")

local req = assert(json.decode(arg[1]), "contain_runner: arg[1] must be a JSON object")
local me = ("%d"):format(uv.os_getpid())
local argv = {}
for i, a in ipairs(req.argv) do
  argv[i] = (a:gsub("@HOST@", me))
end

local function finish(res)
  io.stdout:write("RESULT ", json.encode(res), "\n")
  io.stdout:flush()
  io.stdin:read("a")
  os.exit(0)
end

local ok, p, err = pcall(luxec.spawn, argv, { cwd = req.cwd, tty = req.tty == true,
  stdin = req.stdin, sandbox = req.sandbox, env = req.env })
if not ok or not p then
  finish({ error = tostring(ok and err or p) })
end
if req.input then
  p:write(req.input)
end
local held = false
while not p:finished() do
  p:wait_output({ timeout = 20 })
  if not held and p:snapshot().head:find("HELD", 1, true) then
    held = true
    io.stdout:write("HOLD ", p.pid, "\n")
    io.stdout:flush()
    io.stdin:read("l")
    p:write("\n")
  end
end
local st = p:status()
local sb = st.sandbox or {}
finish({
  pid = p.pid,
  code = st.code,
  signal = st.signal,
  output = p:read(),
  denials = json.array(sb.denials or {}),
  denials_total = sb.denials_total or 0,
  denials_overflow = sb.denials_overflow,
})
