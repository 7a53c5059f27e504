-- The README's code blocks about ssh, prompt answering and REPLs run as they are: each
-- block that loads luxec is a script whose asserts must hold.
local H = require("helper")

local function blocks()
  local text = assert(H.read_file(H.root .. "/README.md"))
  local from = assert(text:find("### ssh logins, prompt answering, REPLs", 1, true))
  local to = assert(text:find("### The prompt", from, true))
  local list = {}
  for code in text:sub(from, to):gmatch("```lua\n(.-)```") do
    if code:find('require("luxec")', 1, true) then list[#list + 1] = code end
  end
  return list
end

describe("README: ssh, prompt answering, REPLs", function()
  local dir
  before_each(function() dir = H.tmpdir() end)
  after_each(function() H.rmtree(dir) end)

  it("has the blocks this spec runs", function()
    assert.equals(2, #blocks())
  end)

  for i, code in ipairs(blocks()) do
    it(("block %d runs"):format(i), function()
      if code:find("python", 1, true) and
          os.execute("command -v python3 >/dev/null 2>&1") ~= true then
        print("README block skipped: no python3")
        return pending("no python3")
      end
      H.write_file(dir .. "/block.lua", code)
      local r = H.run({ dir .. "/block.lua" }, { timeout = 20000 })
      assert.equals(0, r.code, r.stderr)
    end)
  end
end)
