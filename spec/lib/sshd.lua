-- What the specs that run a real OpenSSH sshd share: where it is, whether it can run here,
-- keys, and its configuration file. How each spec starts it (in the foreground, as a daemon
-- in a mount namespace, or per connection in inetd mode) is its own.
-- `local openssh = require("lib.sshd")`.
local luxec = require("luxec")
local H = require("helper")
local uv = require("luv")

local M = { path = "/usr/sbin/sshd" }

--- Why sshd cannot run here (it needs root, and openssh-server installed), or nil.
function M.skip_reason()
  if uv.getuid() ~= 0 then return "sshd needs root" end
  if not uv.fs_access(M.path, "X") then return "no sshd (scripts/setup installs openssh-server)" end
  return nil
end

--- An ed25519 key pair at path and path .. ".pub", with the passphrase (default none).
function M.keygen(path, passphrase)
  local r = luxec.run({ "ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase or "", "-f", path })
  assert(r.code == 0, "ssh-keygen: " .. r.output)
end

--- Write dir/sshd_config: the host key, dir/authorized_keys, no PAM, no keyboard-interactive,
--- no ownership checks of dir, then the lines given. Returns its path.
function M.config(dir, host_key, lines)
  local all = { "HostKey " .. host_key, "AuthorizedKeysFile " .. dir .. "/authorized_keys",
    "StrictModes no", "UsePAM no", "KbdInteractiveAuthentication no" }
  for _, l in ipairs(lines) do all[#all + 1] = l end
  all[#all + 1] = ""
  H.write_file(dir .. "/sshd_config", table.concat(all, "\n"))
  return dir .. "/sshd_config"
end

return M
