-- pexpect's own test cases for run (tests/test_run.py) and replwrap (tests/test_replwrap.py),
-- translated case by case to luxec's API. Where luxec differs by design, the case says so
-- (README: "For pexpect users") and checks luxec's behaviour instead.
local H = require("helper")
local luxec = require("luxec")

local err_of, have = H.err_of, H.have

local function lines(s)
  local list = {}
  for l in s:gsub("%s+$", ""):gmatch("[^\n]+") do
    list[#list + 1] = l
  end
  return list
end

describe("pexpect's test_run.py", function()
  after_each(H.assert_clean)

  it("test_run_exit", function()
    local r = assert(luxec.run({ "sh", "-c", "exit 1" }, { tty = true }))
    assert.equals(1, r.code)
  end)

  it("test_run: the output of ls -l /bin, as a pipe gives it", function()
    local old_way = H.run({ cmd = "/bin/ls", "-l", "/bin" }).stdout:gsub("%s+$", "")
    local r = assert(luxec.run({ "ls", "-l", "/bin" }, { tty = true }))
    assert.equals(old_way, (r.output:gsub("\r", ""):gsub("%s+$", "")))
    assert.equals(0, r.code)
  end)

  it("test_run_callback: TIMEOUT is not an event in luxec (run's timeout ends the run)",
    function()
      assert.equals("bad option 'events' to 'run' (luxec.TIMEOUT is not an event: the end " ..
        "of the output ends the run, and run's timeout ends it too)",
        err_of(luxec.run, { "cat" }, { timeout = 1, events = { [luxec.TIMEOUT] = "x" } }))
      local r = assert(luxec.run({ "cat" }, { timeout = 0.2, events = { never = "x" } }))
      assert.same({ true, 0 }, { r.timed_out, r.events })
    end)

  it("test_run_bad_exitstatus", function()
    local r = assert(luxec.run({ "ls", "-l", "/najoeufhdnzkxjd" }, { tty = true }))
    assert.is_true(r.code ~= 0)
  end)

  it("test_run_tuple_list (regexes as {re =}; a list keeps its order)", function()
    local r = assert(luxec.run({ "bash", "--norc", "--noprofile" }, { timeout = 10,
      env = { PS1 = "$ ", HOME = "/nonexistent" }, events = {
        { { re = [==[abc\r\n.*[$#]]==] }, 'echo "def"\n' },
        { { re = [==[def\r\n.*[$#]]==] }, "exit\n" },
        { { re = "[$#] " }, 'echo "abc"\n' },
      } }))
    assert.equals(0, r.code)
    assert.equals(3, r.events)
  end)
end)

describe("pexpect's test_replwrap.py", function()
  after_each(H.assert_clean)

  local function bash()
    return assert(luxec.replwrap.bash({ timeout = 10 }))
  end

  it("test_bash (an empty input returns nothing: pexpect raises ValueError)", function()
    local b = bash()
    assert.truthy(b:run("alias xyzzy=true; alias"):find("alias", 1, true))
    assert.equals("", b:run(""))
    b:close()
  end)

  it("test_pager_as_cat", function()
    if not have("man") then return pending("no man") end
    local b = bash()
    local out = assert(b:run("man sleep", { timeout = 5 }))
    assert.truthy(out:find("SLEEP", 1, true), out)
    b:close()
  end)

  it("test_bash_env", function()
    local b = bash()
    b:run("export PS1")
    assert.truthy(b:run("env"):find("PS1", 1, true))
    assert.matches("^/", b:run("echo $HOME"))
    b:close()
  end)

  it("test_long_running_multiline", function()
    local b = bash()
    assert.same({ "begin", "done" }, lines(b:run("echo begin\r\nsleep 2\r\necho done")))
    b:close()
  end)

  it("test_long_running_continuation", function()
    local b = bash()
    assert.same({ "begin", "done" }, lines(b:run("echo begin\\\n;sleep 2\r\necho done")))
    b:close()
  end)

  it("test_multiline", function()
    local b = bash()
    assert.same({ "1 2", "3 4" }, lines(b:run("echo '1 2\n3 4'")))
    assert.equals("incomplete", select(3, b:run("echo '5 6")))
    assert.same({ "1 2", "3 4" }, lines(b:run("echo '1 2\n3 4'")))
    b:close()
  end)

  it("test_existing_spawn", function()
    local child = assert(luxec.spawn({ "bash", "--norc", "--noprofile" }, { tty = true,
      echo = false, env = { PS1 = "$ ", TERM = "dumb" }, inherit_env = true }))
    local repl = assert(luxec.replwrap(child, { orig_prompt = "$ ", timeout = 5,
      init = "PS1='[new''1]> ' PS2='[new''2]+ ' PROMPT_COMMAND=''",
      prompt = "[new1]> ", continuation = "[new2]+ " }))
    assert.matches("^/", repl:run("echo $HOME"))
    repl:close()
  end)

  it("test_python", function()
    if not have("python3") then return pending("no python3") end
    local p = assert(luxec.replwrap.python())
    assert.equals("11", (p:run("4+7"):gsub("%s+$", "")))
    assert.same({ "0", "1", "2" }, lines(p:run("for a in range(3): print(a)\n")))
    p:close()
  end)

  it("test_no_change_prompt", function()
    if not have("python3") then return pending("no python3") end
    local py = assert(luxec.replwrap({ "python3", "-q" }, { prompt = ">>> ",
      continuation = "... ", timeout = 5, env = { PYTHONSTARTUP = false } }))
    assert.equals(">>> ", py.prompt)
    assert.same({ "0", "1", "2" }, lines(py:run("for a in range(3): print(a)\n")))
    py:close()
  end)
end)
