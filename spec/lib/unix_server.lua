--- `luxec serve --listen unix:SOCK` for the serve specs: started (and waited for until a
--- client can connect) and stopped with TERM, expecting a clean exit.
local H = require("helper")
local luxec = require("luxec")
local remote = require("luxec.remote")

local M = {}

function M.listen(sock)
  local server = assert(luxec.spawn({ H.luxec, "serve", "--listen", "unix:" .. sock }))
  H.wait_for(function() -- (the socket is there a moment before the server listens on it)
    local host = remote.connect({ socket = sock })
    if host then host:close() end
    return host ~= nil
  end, 5000, "the server to listen")
  return server
end

function M.stop(server)
  server:signal("TERM")
  local code = server:wait({ timeout = 10 }).code
  assert(code == 0, ("the server ended with %s, not 0"):format(tostring(code)))
  server:close()
end

return M
