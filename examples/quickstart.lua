-- The quickstart: processes, a sandbox that reports what it denied, and tasks on one loop.
--   build/bin/luxec examples/quickstart.lua      (or: scripts/quickstart)
local luxec = require("luxec")
local sandbox = require("luxec.sandbox")

print(("luxec %s"):format(luxec.version))

-- A command to completion: exit code and output.
local r = luxec.run({ "sh", "-c", "echo hello from $0; exit 3" })
print(("run: exit %d, output %q"):format(r.code, r.output))

-- A session on a terminal, driven like Expect: wait for the prompt, answer, read the result.
local p = assert(luxec.spawn({ "sh", "-c", "printf 'name? '; read n; echo \"hi $n\"" },
  { tty = true }))
p:expect("name? ")
p:sendline("luxec")
p:expect("hi luxec")
print("expect: the program greeted us")
p:close()

-- A sandboxed command: writes outside the workspace and the network are denied, and the
-- denials are reported as evidence (on kernels that offer the layers).
local ok, sb = pcall(luxec.spawn, { "sh", "-c", "echo x > /etc/luxec-quickstart" },
  { sandbox = { mode = "workspace-write", network = "deny", best_effort = true } })
if ok and sb then
  local st = sb:wait({ timeout = 10 })
  sb:close()
  for _, d in ipairs(st.sandbox.denials) do
    print("sandbox denied: " .. sandbox.describe(d))
  end
  if #st.sandbox.denials == 0 then
    print("sandbox: no evidence on this machine: "
      .. table.concat(st.sandbox.degraded, "; "))
  end
else
  print("sandbox: " .. tostring(sb))
end

-- Two tasks wait at the same time: the whole takes the longer wait, not the sum.
local t0 = require("luv").hrtime()
local slow = luxec.go(function() return luxec.run({ "sleep", "0.3" }).code end)
local fast = luxec.go(function() return luxec.run({ "sleep", "0.1" }).code end)
assert(slow:wait() and fast:wait())
print(("tasks: two commands of 300 and 100 ms took %.0f ms together"):format(
  (require("luv").hrtime() - t0) / 1e6))
