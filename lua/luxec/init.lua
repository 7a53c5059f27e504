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
M.run = require("luxec.process.run").run
M.ssh = require("luxec.auto.ssh")
M.replwrap = require("luxec.auto.replwrap")
M.open_stream = require("luxec.auto.stream").open -- expect over a socket, tty, FIFO or fd
M.terminate_all = process.terminate_all
M.defaults = process.defaults
M.remote = require("luxec.remote") -- sessions on a `luxec serve`: remote.connect{...}

local expect = require("luxec.auto.expect")
M.EOF = expect.EOF
M.TIMEOUT = expect.TIMEOUT

return M
