-- Test hosts for the remote specs: as root, each is a network namespace of its own on this
-- machine (`ip netns add`, a veth pair, its own address, its own sshd on port 22 with a
-- generated host key, a client key authorized for root), reached by address with the host key
-- checked; luxec there is the build tree's (the namespace shares the file system). Without
-- the rights for a namespace, a loopback sshd on a port of its own stands in (and it prints
-- why, once; LUXEC_TEST_HOSTS=loopback asks for that). `local T = require("lib.testhost")`;
-- `local h = T.start()`; `h:close()` in an after_each (whatever the spec did: the namespace
-- goes, with every process in it). A namespace left by an earlier run that was killed is
-- removed by the next T.start.
local luxec = require("luxec")
local H = require("helper")
local openssh = require("lib.sshd")
local uv = require("luv")

local T = {}

local PREFIX = "luxec-t" -- namespaces: luxec-t<pid of the run>-<n>
local serial = 0

local function sh(cmd)
  local r = luxec.run({ "sh", "-c", cmd }, { stderr = "merge", timeout = 30 })
  return r.code == 0, r.output
end

--- Why no sshd can run here (then the specs are pending), or nil.
function T.skip_reason()
  return openssh.skip_reason()
end

local mode_checked, netns_why
--- "netns", or "loopback" and why not namespaces.
function T.mode()
  if not mode_checked then
    mode_checked = true
    if os.getenv("LUXEC_TEST_HOSTS") == "loopback" then
      netns_why = "LUXEC_TEST_HOSTS=loopback"
    elseif uv.getuid() ~= 0 then
      netns_why = "network namespaces need root"
    elseif not uv.fs_access("/usr/sbin/ip", "X") and not uv.fs_access("/sbin/ip", "X") then
      netns_why = "no ip(8) (iproute2)"
    else
      local name = ("%s%d-probe"):format(PREFIX, uv.os_getpid())
      local ok, out = sh("ip netns add " .. name .. " && ip netns del " .. name)
      if not ok then netns_why = "ip netns add failed: " .. out:gsub("%s+$", "") end
    end
    if netns_why then
      io.stderr:write("test hosts: a loopback sshd each (", netns_why, ")\n")
    end
  end
  return netns_why and "loopback" or "netns", netns_why
end

--- Remove the namespaces of runs that are gone (killed before their after_each): every
--- process in one is killed first.
function T.sweep()
  local _, out = sh("ip netns list")
  for name, pid in out:gmatch("(" .. PREFIX:gsub("%-", "%%-") .. "(%d+)%-%d+)") do
    if not H.alive(tonumber(pid)) then
      local _, pids = sh("ip netns pids " .. name)
      for p in pids:gmatch("%d+") do uv.kill(tonumber(p), "sigkill") end
      sh("ip netns del " .. name)
    end
  end
end

-- lo..hi from the kernel's generator (a spec may have seeded math.random)
local function pick(lo, hi)
  return lo + tonumber(H.rand_digits(9)) % (hi - lo + 1)
end

-- A /30 of 10.240.0.0/12 not in use here: the host's end .1, the namespace's .2.
local function free_subnet()
  local _, used = sh("ip -4 -o addr show")
  for _ = 1, 100 do
    local a, b, c = pick(240, 255), pick(0, 255), pick(0, 63) * 4
    local net = ("10.%d.%d.%d"):format(a, b, c)
    local prefix = ("10.%d.%d."):format(a, b)
    if not used:find(prefix .. (c + 1) .. "/", 1, true)
      and not used:find(prefix .. (c + 2) .. "/", 1, true) then
      return net, prefix .. (c + 1), prefix .. (c + 2)
    end
  end
  error("no free subnet in 10.240.0.0/12")
end

local Host = {}
Host.__index = Host

local function make_netns(h)
  T.sweep()
  serial = serial + 1
  local pid = uv.os_getpid()
  h.netns = ("%s%d-%d"):format(PREFIX, pid, serial)
  local outer, inner = ("lx%dh%d"):format(pid, serial), ("lx%dn%d"):format(pid, serial)
  local _, here, there = free_subnet()
  local script = table.concat({
    "set -e",
    "ip netns add " .. h.netns,
    ("ip link add %s type veth peer name %s netns %s"):format(outer, inner, h.netns),
    ("ip addr add %s/30 dev %s"):format(here, outer),
    "ip link set " .. outer .. " up",
    ("ip -n %s addr add %s/30 dev %s"):format(h.netns, there, inner),
    ("ip -n %s link set %s up"):format(h.netns, inner),
    ("ip -n %s link set lo up"):format(h.netns),
  }, "\n")
  local ok, out = sh(script)
  if not ok then
    sh("ip netns del " .. h.netns .. " 2>/dev/null")
    error("cannot make the test host's namespace: " .. out)
  end
  h.addr, h.port = there, 22
end

--- A test host with its sshd running. opts.name: how it is called in errors.
function T.start(opts)
  opts = opts or {}
  local h = setmetatable({ name = opts.name or "box", dir = H.tmpdir() }, Host)
  h.kind = T.mode()
  if not uv.fs_stat("/run/sshd") then uv.fs_mkdir("/run/sshd", 493) end
  local ok, err = pcall(function()
    if h.kind == "netns" then
      make_netns(h)
    else
      h.addr, h.port = "127.0.0.1", H.free_port()
    end
    local d = h.dir
    openssh.keygen(d .. "/host_key")
    openssh.keygen(d .. "/client_key")
    openssh.keygen(d .. "/other_key")
    H.write_file(d .. "/authorized_keys", H.read_file(d .. "/client_key.pub"))
    local where = h.port == 22 and h.addr or ("[%s]:%d"):format(h.addr, h.port)
    local function known(key)
      return where .. " " .. H.read_file(key):match("^(%S+ %S+)") .. "\n"
    end
    H.write_file(d .. "/known_hosts", known(d .. "/host_key.pub"))
    H.write_file(d .. "/wrong_known_hosts", known(d .. "/other_key.pub"))
    openssh.config(d, d .. "/host_key", { "Port " .. h.port, "ListenAddress " .. h.addr,
      "PermitRootLogin prohibit-password", "PasswordAuthentication no",
      "PidFile " .. d .. "/sshd.pid" })
    h:start_sshd()
  end)
  if not ok then
    h:close()
    error(err, 0)
  end
  return h
end

function Host:start_sshd()
  local argv = { openssh.path, "-D", "-e", "-f", self.dir .. "/sshd_config" }
  if self.netns then argv = { "ip", "netns", "exec", self.netns, table.unpack(argv) } end
  self.sshd = assert(luxec.spawn(argv))
  self.sshd:expect("Server listening on " .. self.addr, { timeout = 20 })
end

function Host:stop_sshd()
  if not self.sshd then return end
  self.sshd:terminate()
  self.sshd:close()
  self.sshd = nil
end

--- ssh's argv to the host, then the command: opts.key ("client_key" unless named),
--- opts.known_hosts (a file of the host's dir; "known_hosts" unless named).
function Host:ssh(opts, ...)
  opts = opts or {}
  local argv = { "ssh", "-T", "-i", self.dir .. "/" .. (opts.key or "client_key"),
    "-p", tostring(self.port),
    "-o", "UserKnownHostsFile=" .. self.dir .. "/" .. (opts.known_hosts or "known_hosts"),
    "-o", "StrictHostKeyChecking=yes", "-o", "GlobalKnownHostsFile=/dev/null",
    "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "root@" .. self.addr }
  for _, a in ipairs({ ... }) do argv[#argv + 1] = a end
  return argv
end

--- The pids of the processes in the host's namespace (nil on a loopback host).
function Host:pids()
  if not self.netns then return nil end
  local _, out = sh("ip netns pids " .. self.netns)
  local list = {}
  for p in out:gmatch("%d+") do list[#list + 1] = tonumber(p) end
  return list
end

--- Whether the host holds no process but its sshd's listener (on a loopback host: none of
--- `pids`, which are then the ones to look for).
function Host:only_sshd(pids)
  local keep = self.sshd and self.sshd.pid -- (`ip netns exec` becomes sshd: the same pid)
  for _, p in ipairs(self.netns and self:pids() or pids or {}) do
    if p ~= keep and H.alive(p) then return false, p end
  end
  return true
end

--- sshd ended, the namespace removed with anything still in it, the files gone.
function Host:close()
  pcall(self.stop_sshd, self)
  if self.netns then
    local pids = self:pids() or {}
    for _, p in ipairs(pids) do uv.kill(p, "sigkill") end
    sh("ip netns del " .. self.netns)
    self.netns = nil
  end
  if self.dir then H.rmtree(self.dir) end
  self.dir = nil
end

return T
