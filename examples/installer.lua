-- Answer an installer's dialog by patterns: a table of what the installer may ask and what
-- to answer, whatever the order and whichever questions this version asks. The installer
-- here is a small Lua program run by luxec itself; any program on a terminal works the same.
--   build/bin/luxec examples/installer.lua
local luxec = require("luxec")
local uv = require("luv")

local INSTALLER = [[
local function ask(q, default)
  io.write(q) io.flush()
  local a = io.read("l")
  if a == nil then os.exit(1) end
  return a ~= "" and a or default
end
print("Demo 2.0 setup")
if ask("Do you accept the license? [y/N] ", "n"):lower() ~= "y" then
  print("You must accept the license.") os.exit(2)
end
local dir = ask("Install to [/usr/local/demo]? ", "/usr/local/demo")
local telemetry = ask("Send anonymous usage data? [Y/n] ", "y")
if ask(("Install to %s (usage data: %s). Proceed? [y/N] "):format(dir, telemetry), "n") ~= "y"
then print("Cancelled.") os.exit(3) end
for pct = 20, 100, 20 do io.write(("\rInstalling... %d%%"):format(pct)) io.flush() end
print(("\nInstalled to %s."):format(dir))
]]

local answers = {
  { { lua = "accept the license%? %[y/N%] $" }, "y" },
  { { re = "Install to \\[[^]]*\\]\\? $" }, "/opt/demo" },
  { { re = "usage data\\? \\[Y/n\\] $", flags = "i" }, "n" },
  { "Proceed? [y/N] ", "y" },
}

local p = assert(luxec.spawn({ uv.exepath(), "-e", INSTALLER }, { tty = true }))
local patterns = { luxec.EOF, { re = "Installed to (\\S+)\\." } }
for _, a in ipairs(answers) do
  patterns[#patterns + 1] = a[1]
end

local given, dir = 0, nil
while true do
  local i, _, captured = assert(p:expect(patterns, { timeout = 10 }))
  if i == 1 then break end
  if i == 2 then
    dir = captured
  else
    local answer = answers[i - 2][2]
    print(("%-40s -> %s"):format(p.after:gsub("%s+$", ""):sub(-40), answer))
    p:sendline(answer)
    given = given + 1
  end
end
local st = p:wait({ timeout = 5 })
if st.code ~= 0 or not dir then error(("the installer failed (exit %s)"):format(st.code)) end
print(("installed to %s with %d answers"):format(dir, given))
