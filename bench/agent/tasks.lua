--- The agent benchmark's six tasks: each sets up its files, names the facts an agent must
--- see, and gives two fixed policies — `codex` (Codex's arguments only) and `luxec` (luxec's
--- extra arguments: until, input (one answer or several), keep, grep, terminate, read_output's
--- grep). A policy drives a client
--- (exec / write / read / stop, each one tool call) and returns nothing: the facts are
--- checked in the text the client was given.
local M = {}

local function write(path, text, mode)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  if mode then os.execute(("chmod %s '%s'"):format(mode, path)) end
end

local function port_of(text)
  return text:match("port (%d+)")
end

M.list = {
  {
    name = "build",
    what = "a noisy build: colours, progress bars, 2 s",
    facts = { "BUILD OK: 40 targets" },
    setup = function(dir)
      write(dir .. "/build.sh", [[#!/bin/bash
bars='##########'
for ((i = 1; i <= 40; i++)); do
  printf '\033[1;34m[%3d%%]\033[0m Building CXX object src/unit_%02d.o\n' $((i * 100 / 40)) $i
  for ((j = 1; j <= 10; j++)); do
    printf '\r  [%-10s] %3d%%' "${bars:0:j}" $((j * 10))
  done
  printf '\r\033[K'
  sleep 0.05
done
printf '\033[32mBUILD OK: 40 targets\033[0m, 0 warnings\n'
]], "+x")
    end,
    codex = function(c) c:exec({ cmd = "./build.sh" }) end,
    luxec = function(c) c:exec({ cmd = "./build.sh", keep = "tail", max_output_tokens = 400 }) end,
  },
  {
    name = "test-log",
    what = "20,000 test lines, the failure in the middle",
    facts = { "test_10007 ... FAILED: expected 3, got 4" },
    setup = function(dir)
      write(dir .. "/tests.py", [[
import sys, time
for i in range(1, 20001):
    if i == 10007:
        print("test_%05d ... FAILED: expected 3, got 4" % i)
    else:
        print("test_%05d ... ok" % i)
    if i % 5000 == 0:
        sys.stdout.flush(); time.sleep(0.25)
print("20000 tests, 1 failed")
]])
    end,
    codex = function(c)
      local text = c:exec({ cmd = "python3 tests.py" })
      if not text:find("FAILED:", 1, true) then
        c:exec({ cmd = "python3 tests.py | grep -n -B2 -A2 FAILED" })
      end
    end,
    luxec = function(c)
      -- return at the first failing line (the match shows it whole) or at the summary
      local text, r = c:exec({ cmd = "python3 tests.py", keep = "tail", max_output_tokens = 200,
        ["until"] = "^.*(FAILED|tests, \\d+ failed).*$" })
      if not text:find("FAILED:", 1, true) then
        c:read({ log = r.log_range.path, grep = "FAILED", context = 2 })
      end
    end,
  },
  {
    name = "python-repl",
    what = "python3 -i: two statements, then exit",
    facts = { "43" },
    setup = function() end,
    codex = function(c)
      local _, r = c:exec({ cmd = "python3 -q -i", tty = true, yield_time_ms = 2000 })
      c:write({ session_id = r.session_id, chars = "x = 6 * 7\n" })
      c:write({ session_id = r.session_id, chars = "print(x + 1)\n" })
      c:write({ session_id = r.session_id, chars = "exit()\n" })
    end,
    luxec = function(c)
      -- each line when the REPL next waits for input; the call ends when python exits
      c:exec({ cmd = "python3 -q -i", tty = true,
        input = { "x = 6 * 7\n", "print(x + 1)\n", "exit()\n" } })
    end,
  },
  {
    name = "password",
    what = "a password prompt on /dev/tty with echo off",
    facts = { "Password:", "welcome, token XYZ-42" },
    setup = function(dir)
      write(dir .. "/login.py", [[
import getpass, time
time.sleep(0.2)
pw = getpass.getpass("Password: ")
print("welcome, token XYZ-42" if pw == "hunter2" else "denied")
]])
    end,
    codex = function(c)
      local _, r = c:exec({ cmd = "python3 login.py", tty = true, yield_time_ms = 2000 })
      c:write({ session_id = r.session_id, chars = "hunter2\n" })
    end,
    luxec = function(c)
      c:exec({ cmd = "python3 login.py", tty = true, input = "hunter2\n" })
    end,
  },
  {
    name = "server",
    what = "a background HTTP server, a client, then stop the server",
    facts = { "Serving HTTP on", "MARKER-7" },
    setup = function(dir) write(dir .. "/marker.txt", "MARKER-7\n") end,
    codex = function(c)
      local text, r = c:exec({ cmd = "python3 -u -m http.server 0 --bind 127.0.0.1",
        tty = true, yield_time_ms = 2000 })
      c:exec({ cmd = ("curl -s http://127.0.0.1:%s/marker.txt"):format(port_of(text)) })
      c:write({ session_id = r.session_id, chars = "\3" })
    end,
    luxec = function(c)
      local text, r = c:exec({ cmd = "python3 -u -m http.server 0 --bind 127.0.0.1",
        ["until"] = "port \\d+" })
      -- the client, and the server ended when it is done
      c:exec({ cmd = ("curl -s http://127.0.0.1:%s/marker.txt"):format(port_of(text)),
        terminate = { r.session_id } })
    end,
  },
  {
    name = "git-log",
    what = "find one commit among 300 in git log",
    facts = { "fix: off-by-one in the parser" },
    setup = function(dir)
      local script = { "set -e", "cd '" .. dir .. "'", "git init -q repo", "cd repo",
        "git config user.email a@b.c", "git config user.name Bench" }
      script[#script + 1] = [[for i in $(seq 1 300); do echo $i > f$((i % 7)).txt; ]]
        .. [[git add -A; if [ $i = 137 ]; then m='fix: off-by-one in the parser'; ]]
        .. [[else m="chore: update file $((i % 7)) (step $i)"; fi; ]]
        .. [[GIT_COMMITTER_DATE="2026-01-01T00:00:$((i % 60))" git commit -q -m "$m" ]]
        .. [[-m "A longer description of change $i, which explains what it does and why."; ]]
        .. [[done]]
      assert(os.execute(table.concat(script, "\n")))
    end,
    codex = function(c)
      local text = c:exec({ cmd = "cd repo && git log" })
      if not text:find("off-by-one", 1, true) then
        c:exec({ cmd = "cd repo && git log --grep=off-by-one" })
      end
    end,
    luxec = function(c)
      -- the commit's line wherever it is in the log, and the newest commits
      local text, r = c:exec({ cmd = "cd repo && git log", max_output_tokens = 200,
        grep = "off-by-one" })
      if not text:find("off-by-one", 1, true) then
        c:read({ log = r.log_range.path, grep = "off-by-one", context = 4 })
      end
    end,
  },
}

return M
