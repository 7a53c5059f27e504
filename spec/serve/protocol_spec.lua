-- luxec.serve.protocol's chunk fast path: a chunk spliced into a message and cut out of a
-- line decode exactly as the whole JSON would.
local proto = require("luxec.serve.protocol")
local json = require("luxec.json")

describe("luxec.serve.protocol chunks", function()
  it("splices a base64 chunk in and cuts it out again, as JSON encodes and decodes it",
    function()
    local b64 = ("QUJD"):rep(3000)
    local msg = { id = 7, method = "process/write",
      params = { processId = 'a"chunk":"x\\', chunk = "" } }
    local line = proto.encode_chunked(msg, b64)
    msg.params.chunk = b64
    assert.equals(json.encode(msg) .. "\n", line)
    local back = proto.decode(line:sub(1, -2))
    assert.same(json.decode(line), back)
    assert.equals(b64, back.params.chunk)
  end)

  it("leaves a chunk with escapes, or one that is not params', to the JSON decoder", function()
    local escaped = '{"id":1,"method":"process/write","params":{"chunk":"'
      .. ("\\u0041"):rep(1000) .. '","processId":"p"}}'
    assert.equals(("A"):rep(1000), proto.decode(escaped).params.chunk)
    local top = '{"chunk":"' .. ("QUJD"):rep(2000) .. '","id":1,"params":{}}'
    local m = proto.decode(top)
    assert.same({ ("QUJD"):rep(2000), nil }, { m.chunk, m.params.chunk })
    local nl, err = proto.decode('{"id":1,"params":{"chunk":"' .. ("Q"):rep(5000))
    assert.is_nil(nl)
    assert.is_string(err)
  end)
end)
