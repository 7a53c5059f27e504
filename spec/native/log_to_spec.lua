-- The log_to spawn option: a session's output as it arrives (pexpect's logfile_read).
local H = require("helper")
local luxec = require("luxec")

local err_of = H.err_of

describe("log_to", function()
  after_each(H.assert_clean)

  it("writes every output as it arrives to a file or a function, both streams", function()
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/log", "w"))
    local seen = {}
    local p = assert(luxec.spawn({ "sh", "-c", "echo one; read x; echo two >&2; echo three" },
      { stderr = "pipe", log_to = function(data, stream) seen[#seen + 1] = { stream, data } end }))
    local q = assert(luxec.spawn({ "sh", "-c", "echo one; read x; echo \"got $x\"" },
      { tty = true, log_to = f }))
    assert(p:expect("one\n", { timeout = 5 }))
    assert.same({ { 1, "one\n" } }, seen) -- as it arrived, before the program went on
    p:sendline("")
    assert(p:wait({ timeout = 5 }))
    local out, err = {}, {}
    for _, s in ipairs(seen) do
      table.insert(s[1] == 1 and out or err, s[2])
    end
    assert.same({ "one\nthree\n", "two\n" }, { table.concat(out), table.concat(err) })
    assert(q:expect("one\r\n", { timeout = 5 }))
    assert.equals("one\r\n", H.read_file(dir .. "/log")) -- flushed as it came
    q:sendline("x")
    assert(q:wait({ timeout = 5 }))
    assert.equals("one\r\nx\r\ngot x\r\n", H.read_file(dir .. "/log"))
    f:close()
    p:close()
    q:close()
    H.rmtree(dir)
  end)

  it("names a bad log_to", function()
    local dir = H.tmpdir()
    local f = assert(io.open(dir .. "/log", "w"))
    f:close()
    H.rmtree(dir)
    assert.matches("bad option 'log_to' to 'spawn' %(an open file such as io.stdout, or a " ..
      "function, expected, got closed file%)", err_of(luxec.spawn, { "true" }, { log_to = f }))
    assert.matches("bad option 'log_to' to 'spawn' %(userdata or function expected, got " ..
      "string%)", err_of(luxec.spawn, { "true" }, { log_to = "x" }))
  end)
end)
