-- luxec.replwrap: REPLs with a unique prompt, run(code) -> that code's output.
local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")

local err_of, have = H.err_of, H.have

-- The entries of a directory (none: the REPL wrote no history file there).
local function entries(dir)
  local list = {}
  local req = assert(uv.fs_scandir(dir))
  for name in function() return uv.fs_scandir_next(req) end do
    list[#list + 1] = name
  end
  return list
end

local function skipping(cmd, body)
  if have(cmd) then return body end
  return function()
    print(("replwrap spec: %s is not installed, skipped"):format(cmd))
    pending(cmd .. " is not installed")
  end
end

describe("luxec.replwrap", function()
  local home
  before_each(function() home = H.tmpdir() end)
  after_each(function()
    assert.same({}, entries(home))
    H.rmtree(home)
    H.assert_clean()
  end)

  it("python: output of each run, blocks ended for you, open statements interrupted",
    skipping("python3", function()
      local r = assert(luxec.replwrap.python({ env = { HOME = home } }))
      assert.equals("3\n", r:run("print(1 + 2)"))
      assert.equals("0\n1\n", r:run("for i in range(2):\n    print(i)"))
      assert.equals("42\n", r:run("def f(x):\n    return x * 2\n\nprint(f(21))"))
      assert.equals("", r:run("x = 5"))
      assert.same({ nil, "incomplete: the code leaves a statement open (python3 shows its " ..
        "continuation prompt after the last line); it was abandoned", "incomplete" },
        { r:run("y = (1,") })
      assert.equals("5\n", r:run("print(x)"))
      local out, msg, code = r:run("import time; time.sleep(30)", { timeout = 0.3 })
      assert.same({ nil, "timeout" }, { out, code })
      assert.matches("^timeout: ", msg)
      assert.matches("KeyboardInterrupt\n$", r:interrupt())
      assert.equals("6\n", r:run("print(x + 1)"))
      r:close()
    end))

  it("bash: multi-line commands, continuation lines, the end of the shell",
    skipping("bash", function()
      local r = assert(luxec.replwrap.bash({ env = { HOME = home } }))
      assert.equals("hi\n", r:run("echo hi"))
      assert.equals("1\n2\n", r:run("for i in 1 2; do\n  echo $i\ndone"))
      assert.equals("a\nb\n", r:run("echo 'a\nb'"))
      assert.equals("incomplete", select(3, r:run("echo 'open")))
      assert.equals("still here\n", r:run("echo still here"))
      assert.same({ nil, 'eof: bash ended; last output: "exit\\n"', "eof" }, { r:run("exit 3") })
      assert.equals(3, r.process:wait({ timeout = 5 }).code)
      r:close()
    end))

  it("sqlite3: statements over several lines", skipping("sqlite3", function()
    local r = assert(luxec.replwrap.sqlite3({ env = { HOME = home } }))
    assert.equals("", r:run("create table t(a); insert into t values (1), (2);"))
    assert.equals("3\n", r:run("select\n  sum(a)\nfrom t;"))
    assert.equals("6\n", r:run("select 6;"))
    assert.same({ nil, "incomplete: the code leaves a statement open (sqlite3 shows its " ..
      "continuation prompt after the last line); it cannot be abandoned, so the repl was " ..
      "closed", "incomplete" }, { r:run("select 5") })
    assert.is_true(r.process:closed())
  end))

  it("node: expressions and functions over several lines", skipping("node", function()
    local r = assert(luxec.replwrap.node({ env = { HOME = home } }))
    assert.equals("3\n", r:run("1 + 2"))
    assert.equals("undefined\n5\n", r:run("function f() {\n  return 5 }\nf()"))
    assert.equals("incomplete", select(3, r:run("[1,")))
    assert.equals("'ok'\n", r:run("'ok'"))
    r:close()
  end))

  it("any REPL: a line sent at its first prompt sets the unique one", function()
    local r = assert(luxec.replwrap({ "sh", "-i" }, { env = { PS1 = "orig> ", HOME = home },
      orig_prompt = "orig> ", init = "PS1='[new''-1]> '", prompt = "[new-1]> ", timeout = 5 }))
    assert.equals("x y\n", r:run("echo x y"))
    r:close()
  end)

  it("any REPL: its first prompt given as a pattern (pexpect's test_existing_spawn passes "
    .. "re.compile('[$#]'))", function()
      local r = assert(luxec.replwrap({ "sh", "-i" }, { env = { PS1 = "orig# ", HOME = home },
        orig_prompt = { re = "[$#] " }, init = "PS1='[new''-2]> '", prompt = "[new-2]> ",
        timeout = 5 }))
      assert.equals("x y\n", r:run("echo x y"))
      r:close()
      assert.equals("bad option 'orig_prompt' to 'replwrap' (string or table expected, got "
        .. "number)", err_of(luxec.replwrap, { "sh" }, { prompt = "$ ", orig_prompt = 3 }))
    end)

  it("a session given that echoes is set not to (pexpect's REPLWrapper does the same)",
    function()
      -- (sh -i: no line editor that would put a saved echo back)
      local p = assert(luxec.spawn({ "sh", "-i" }, { tty = true,
        env = { PS1 = "orig$ ", HOME = home, PATH = os.getenv("PATH") } }))
      assert.is_true(p:getecho())
      local r = assert(luxec.replwrap(p, { orig_prompt = { re = "[$#] " },
        init = "PS1='[new''-3]> '", prompt = "[new-3]> ", timeout = 5 }))
      assert.is_false(p:getecho())
      assert.equals("x y\n", r:run("echo x y"))
      r:close()
    end)

  it("names bad options", function()
    assert.equals("bad option 'prompt' to 'replwrap' (the prompt the REPL shows expected)",
      err_of(luxec.replwrap, { "sh" }, {}))
    assert.equals("bad option 'orig_prompt' to 'replwrap' (init is sent at this prompt: it " ..
      "is needed with init)", err_of(luxec.replwrap, { "sh" }, { prompt = "$ ", init = "x" }))
    assert.equals("bad option 'timout' to 'python' (unknown option)",
      err_of(luxec.replwrap.python, { timout = 1 }))
    local r = assert(luxec.replwrap({ "sh", "-i" }, { env = { PS1 = "%% " }, prompt = "%% " }))
    assert.matches("bad argument #1 to 'run' %(string expected, got nil%)", err_of(r.run, r))
    assert.matches("bad argument #2 to 'run' %(unknown option 'timout'%)",
      err_of(r.run, r, "echo x", { timout = 1 }))
    assert.matches("bad argument #1 to 'interrupt' %(unknown option 'timout'%)",
      err_of(r.interrupt, r, { timout = 1 }))
    r:close()
    assert.matches("attempt to call 'run' on a closed repl", err_of(r.run, r, "x"))
  end)
end)
