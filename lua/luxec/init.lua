--- luxec: a process host steered from Lua. This module is the public API.
local core = require("luxec.core")
local sched = require("luxec.sched")

local M = {}

---@type string luxec's version
M.version = core.version

M.go = sched.go
--- Wait `seconds` (a number, fractions allowed): every unsuffixed time in the API is in
--- seconds, as `timeout` is; options named `*_ms` are milliseconds.
---@param seconds number
function M.sleep(seconds)
  if type(seconds) ~= "number" or seconds ~= seconds or seconds < 0 or seconds == math.huge then
    error(("bad argument #1 to 'sleep' (non-negative finite number of seconds expected, got %s)")
      :format(type(seconds) == "number" and tostring(seconds) or type(seconds)), 2)
  end
  sched.sleep(seconds * 1000)
end
M.in_task = sched.in_task

local process = require("luxec.process")
M.spawn = process.spawn -- every option, `record = "file.cast"` included
M.terminate_all = process.terminate_all
M.defaults = process.defaults

-- Loaded the first time they are used: a program that never does keeps the host smaller.
local later = {
  run = function() return require("luxec.process.run").run end,
  ssh = function() return require("luxec.auto.ssh") end,
  replwrap = function() return require("luxec.auto.replwrap") end,
  -- expect over a socket, tty, FIFO or fd
  open_stream = function() return require("luxec.auto.stream").open end,
  -- sessions on a `luxec serve`: remote.connect{...}
  remote = function() return require("luxec.remote") end,
}
setmetatable(M, {
  __index = function(t, k)
    local load = later[k]
    if not load then return nil end
    local v = load()
    rawset(t, k, v)
    return v
  end,
})

local expect = require("luxec.auto.expect")
M.EOF = expect.EOF
M.TIMEOUT = expect.TIMEOUT

return M
