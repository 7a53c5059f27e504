--- luxec.lazy: a stand-in for a module that is loaded the first time one of its fields is
--- read, so a program that never uses it does not pay for it (the host's memory with many
--- sessions, start-up). Only for modules whose loading has no effect a caller depends on.
---   local sandbox = require("luxec.lazy")("luxec.sandbox")
return function(name)
  return setmetatable({}, {
    __index = function(_, k)
      return require(name)[k]
    end,
  })
end
