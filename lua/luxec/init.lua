--- luxec: a process host steered from Lua. This module is the public API.
local core = require("luxec.core")
local sched = require("luxec.sched")

local M = {}

---@type string luxec's version
M.version = core.version

M.go = sched.go
M.sleep = sched.sleep
M.in_task = sched.in_task

local process = require("luxec.process")
M.spawn = process.spawn -- every option, `record = "file.cast"` included
M.run = require("luxec.process.run").run
M.ssh = require("luxec.auto.ssh")
M.replwrap = require("luxec.auto.replwrap")
M.terminate_all = process.terminate_all
M.defaults = process.defaults
M.remote = require("luxec.remote") -- sessions on a `luxec serve`: remote.connect{...}

local expect = require("luxec.auto.expect")
M.EOF = expect.EOF
M.TIMEOUT = expect.TIMEOUT

return M
