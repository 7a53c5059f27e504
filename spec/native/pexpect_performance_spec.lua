-- pexpect's tests/test_performance.py translated case by case: expect wading through long
-- outputs (100,000 lines of a Python loop, a list of 100,000 numbers, 25 MiB of base64),
-- with and without a search window. As in pexpect's file, nothing is timed (luxec's speed is
-- scripts/bench's to measure): each case checks what matched. pexpect's patterns are
-- regexes; a plain string is luxec's literal match (expect_exact), `{re = ...}` its regex.
local H = require("helper")
local luxec = require("luxec")

local EOF, TIMEOUT = luxec.EOF, luxec.TIMEOUT

describe("pexpect's test_performance.py", function()
  if not H.have("python3") then
    pending("python3 is not installed: skipped")
    return
  end
  after_each(H.assert_clean)

  local function python()
    local p = assert(luxec.spawn({ "python3", "-q" }, { tty = true, timeout = 100 }))
    assert.equals(1, p:expect(">>>"))
    return p
  end

  -- pexpect's "%d" % n matches the command's echo as well as the loop's last line, as there.
  -- exact: expect_exact with strings (pexpect's exact_range), else regexes.
  local function range_case(n, exact, opts)
    local p = python()
    p:sendline(("for n in range(1, %d+1): print(n)"):format(n))
    if exact then
      assert.equals(1, p:expect_exact({ "..." }))
    else
      assert.equals(1, p:expect({ re = [[\.{3}]] }))
    end
    p:sendline("")
    if exact then
      assert.equals(2, p:expect_exact({ "inquisition", tostring(n) }, opts))
    else
      assert.equals(2, p:expect({ { re = "inquisition" }, { re = tostring(n) } }, opts))
    end
    -- (the last number was the last line: the prompt follows it)
    assert.equals(1, p:expect({ re = "^\r\n>>> " }, { timeout = 10 }))
    p:close()
  end

  it("plain_range(100000)", function()
    range_case(100000, false)
  end)

  it("window_range(10000): searchwindowsize = 20", function()
    range_case(10000, false, { searchwindowsize = 20 })
  end)

  it("exact_range(100000)", function()
    range_case(100000, true)
  end)

  it("ewin_range(100000): expect_exact with searchwindowsize = 20", function()
    range_case(100000, true, { searchwindowsize = 20 })
  end)

  it("faster_range(100000): one expression printing a list", function()
    local p = python()
    p:sendline("list(range(1, 100000+1))")
    assert.equals(2, p:expect({ { re = "inquisition" }, { re = "100000" } }))
    assert.equals(1, p:expect("]\r\n>>> ", { timeout = 10 }))
    p:close()
  end)

  it("test_large_stdout_stream: 25 MiB of base64 to EOF with searchwindowsize = 1000", function()
    if not H.have("openssl") then
      pending("openssl is not installed: skipped")
      return
    end
    local p = assert(luxec.spawn({ "openssl", "rand", "-base64", tostring(1024 * 1024 * 25) },
      { tty = true, timeout = 100 }))
    assert.equals(2, p:expect({ "Password:", EOF, TIMEOUT }, { searchwindowsize = 1000 }))
    p:close()
  end)
end)
