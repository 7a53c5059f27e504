-- The MCP server's JSON (luxec.json) and line splitting (luxec.mcp.stdio), as plain
-- functions: no process, no loop.
local H = require("helper")
local json = require("luxec.json")
local stdio = require("luxec.mcp.stdio")

describe("luxec.json", function()
  after_each(H.assert_clean)

  it("tells an empty list from an empty object, and sorts keys", function()
    assert.equal('{"a":[],"b":{},"c":[1,2]}',
      json.encode({ b = {}, a = json.array(), c = { 1, 2 } }))
    assert.equal('{"1":"x","3":"y"}', json.encode({ [1] = "x", [3] = "y" }))
    assert.equal("[null]", json.encode({ json.null }))
  end)

  it("writes integers as integers and other numbers exactly", function()
    assert.equal("[5,5,-3,0.5,null]", json.encode({ 5, 5.0, -3, 0.5, 0 / 0 }))
    assert.equal("0.1", json.encode(0.1))
  end)

  it("replaces bytes that are not UTF-8, and keeps valid text as is", function()
    assert.equal("héllo ✓", json.valid_utf8("héllo ✓"))
    assert.equal("a\u{FFFD}b\u{FFFD}\u{FFFD}", json.valid_utf8("a\xffb\xe2\x9c"))
    assert.equal('"a\u{FFFD}"', json.encode("a\xc3"))
    assert.equal('"tab\\tnl\\n\\u0001"', json.encode("tab\tnl\n\1"))
  end)

  it("decodes integral numbers as integers; reports errors without raising", function()
    local v = json.decode('{"id": 7, "x": [1.0, 2.5, {"y": 3}]}')
    assert.equal("integer", math.type(v.id))
    assert.equal("integer", math.type(v.x[1]))
    assert.equal("float", math.type(v.x[2]))
    assert.equal("integer", math.type(v.x[3].y))
    assert.equal("integer", math.type(json.decode("42")))
    local bad, err = json.decode("{oops")
    assert.is_nil(bad)
    assert.is_string(err)
    assert.same({ a = 1 }, json.without_nulls(json.decode('{"a": 1, "b": null}')))
  end)

  it("refuses what JSON cannot hold", function()
    assert.has_error(function() json.encode({ f = print }) end)
    local deep = {}
    local t = deep
    for _ = 1, 100 do
      t.x = {}
      t = t.x
    end
    assert.has_error(function() json.encode(deep) end)
  end)
end)

describe("luxec.mcp.stdio lines", function()
  after_each(H.assert_clean)

  local function splitter(max)
    local got = { lines = {}, oversize = {}, eof = 0 }
    local r = stdio.lines({
      max = max or 1000,
      on_line = function(l) got.lines[#got.lines + 1] = l end,
      on_oversize = function(n) got.oversize[#got.oversize + 1] = n end,
      on_eof = function() got.eof = got.eof + 1 end,
      on_error = error,
    })
    return r, got
  end

  it("cuts chunks into lines wherever the chunks end", function()
    local r, got = splitter()
    r:feed("one\ntw")
    r:feed("o\r\nthr")
    r:feed("ee")
    r:feed("\n\nfour")
    assert.same({ "one", "two", "three", "" }, got.lines)
    r:finish()
    assert.same({ "one", "two", "three", "", "four" }, got.lines)
    assert.equal(1, got.eof)
  end)

  it("skips a line over the limit up to its newline and goes on", function()
    local r, got = splitter(10)
    r:feed("short\n" .. ("x"):rep(8))
    r:feed(("x"):rep(8))
    r:feed("xx\nafter\n")
    assert.same({ "short", "after" }, got.lines)
    assert.same({ 18 }, got.oversize)
    r:feed(("y"):rep(50))
    r:finish() -- an oversized last line without its newline is dropped
    assert.same({ "short", "after" }, got.lines)
  end)
end)
