--- luxec.serve.base64: standard base64 (RFC 4648, with padding) for the byte chunks of the
--- exec-server protocol, done by the native core (src/base64.c): encode(s) -> text;
--- decode(t) -> bytes, or nil and what is wrong with it ("not base64 (a bad character at 5)").
local core = require("luxec.core")

return {
  encode = core.base64_encode,
  decode = core.base64_decode,
}
