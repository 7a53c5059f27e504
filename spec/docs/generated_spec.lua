-- docs/api.md and the key table of docs/config.md are what spec/docs/gen.lua makes from
-- types/ and lua/luxec/mcp/config.lua now: a function added to types/ or a key added to the
-- config loader without regenerating them (`build/bin/luxec spec/docs/gen.lua`) fails here.
local H = require("helper")
local gen = require("docs.gen")

describe("the generated docs", function()
  it("docs/api.md is the reference the annotations in types/ make", function()
    assert.equals(gen.api(H.root), H.read_file(H.root .. "/docs/api.md"),
      "docs/api.md is out of date: run build/bin/luxec spec/docs/gen.lua")
  end)

  it("docs/api.md names every function of types/ under its own heading", function()
    local api = H.read_file(H.root .. "/docs/api.md")
    local fns = gen.functions(H.root)
    assert.is_true(#fns >= 50, "fewer functions than types/ declares: " .. #fns)
    for _, name in ipairs(fns) do
      assert.truthy(api:find("\n#### `" .. name .. "(", 1, true), name)
    end
  end)

  it("docs/config.md's table is every key config.lua accepts, with its default", function()
    assert.equals(gen.config_doc(H.root), H.read_file(H.root .. "/docs/config.md"),
      "docs/config.md's table is out of date: run build/bin/luxec spec/docs/gen.lua")
    local doc = H.read_file(H.root .. "/docs/config.md")
    for k, kind in pairs(gen.schema(H.root)) do
      if type(kind) == "table" and #kind == 0 then
        for f in pairs(kind) do
          assert.truthy(doc:find("| `" .. k .. "." .. f .. "` |", 1, true), k .. "." .. f)
        end
      else
        assert.truthy(doc:find("| `" .. k .. "` |", 1, true), k)
      end
    end
  end)
end)
