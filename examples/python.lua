-- Drive an interactive Python: send statements, read their results, define a function over
-- several lines — what pexpect is most often used for.
--   build/bin/luxec examples/python.lua
local luxec = require("luxec")

-- The basic prompt, without colours or bracketed paste, whatever the Python version.
local p, err, code = luxec.spawn({ "python3", "-i", "-q" }, { tty = true, inherit_env = true,
  env = { TERM = "dumb", PYTHON_BASIC_REPL = "1", PYTHONSTARTUP = false } })
if not p then
  if code ~= "ENOENT" then error(err) end
  print("skipped: python3 is not installed (" .. err .. ")")
  os.exit(0)
end
p.timeout = 10 -- seconds, for every expect below

-- Send a line; what it printed before the next prompt (">>> ", or "... " inside a block).
local function ask(line)
  p:sendline(line)
  assert(p:expect(line .. "\r\n")) -- the terminal's echo of the line
  assert(p:expect({ ">>> ", "... " }))
  return (p.before:gsub("\r", ""):gsub("%s+$", ""))
end

assert(p:expect(">>> "))
print("6 * 7 = " .. ask("6 * 7"))

ask("def fib(n):")
ask("    return n if n < 2 else fib(n - 1) + fib(n - 2)")
ask("") -- the empty line ends the block
print("fib(20) = " .. ask("fib(20)"))

local trace = ask("1 / 0")
print("1 / 0 -> " .. (trace:match("ZeroDivisionError[^\n]*") or trace))

p:sendline("exit()")
assert(p:expect(luxec.EOF))
print(("python exited with %d"):format(p:wait({ timeout = 5 }).code))
