-- The base64 of the exec-server protocol: RFC 4648's test vectors, every byte value, and a
-- clear refusal of anything that is not canonical padded base64.
local b64 = require("luxec.serve.base64")

describe("luxec.serve.base64", function()
  it("encodes and decodes RFC 4648's vectors", function()
    local vectors = { [""] = "", f = "Zg==", fo = "Zm8=", foo = "Zm9v", foob = "Zm9vYg==",
      fooba = "Zm9vYmE=", foobar = "Zm9vYmFy" }
    for plain, coded in pairs(vectors) do
      assert.equals(coded, b64.encode(plain))
      assert.equals(plain, b64.decode(coded))
    end
  end)

  it("round-trips every byte value at every alignment", function()
    local all = {}
    for i = 0, 255 do all[#all + 1] = string.char(i) end
    all = table.concat(all)
    for cut = 0, 2 do
      local s = all:sub(1, #all - cut)
      assert.equals(s, b64.decode(b64.encode(s)))
    end
  end)

  it("refuses what is not base64, saying where", function()
    local cases = {
      { "YQ=", "not base64 (its length 3 is not a multiple of 4)" },
      { "a$==", "not base64 (a bad character at 2)" },
      { "Zm9vY$==", "not base64 (a bad character at 6)" },
      { "YQ==YQ==", "not base64 (a bad character at 3)" },
      { "Y===", "not base64 (a bad character at 2)" },
      { "YQ=a", "not base64 (a bad character at 3)" },
      { "$Q==", "not base64 (a bad character at 1)" },
      { "Zm9v\n", "not base64 (its length 5 is not a multiple of 4)" },
    }
    for _, c in ipairs(cases) do
      assert.same({ nil, c[2] }, { b64.decode(c[1]) })
    end
  end)
end)
