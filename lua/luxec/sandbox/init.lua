--- luxec.sandbox: sandbox policy. A policy table is checked here, with errors that name the
--- key, and turned into what the native core installs between clone and exec: the writable
--- roots, what stays read-only inside them, the network verdict, and how strict to be.
local uv = require("luv")
local paths = require("luxec.sandbox.paths")
local deny_read = require("luxec.sandbox.deny_read")
local limits = require("luxec.sandbox.limits")
local netpolicy = require("luxec.sandbox.network")
local deps = require("luxec.sandbox.deps")

local M = {}

---@class luxec.SandboxPolicy
---@field mode "full-access"|"read-only"|"workspace-write"
---@field network "deny"|"allow"|table|nil  deny by default in the restricted modes; a table
---  {allow = {names}, deny = {names}, resolve = {[name] = address}} lets the session reach the
---  named hosts through a proxy of the host's, and nothing else (luxec.sandbox.network)
---@field roots string[]|nil  more writable roots (absolute, existing) for workspace-write
---@field best_effort boolean|nil  run with what the kernel offers instead of failing (false)
---@field evidence boolean|{network: boolean, files: boolean}|nil  record denials (true)
---@field tmp boolean|nil  /tmp, $TMPDIR and /dev/shm writable in workspace-write (true)
---@field workspace string|nil  the writable workspace (absolute); default: the session's cwd
---@field limits luxec.Limits|nil  memory, pids and cpu of the session (see luxec.sandbox.limits)
---@field unix_sockets string[]|nil  sockets outside the sandbox it may connect to (absolute
---  paths); every other socket file whose server is not inside the sandbox is refused
---@field protect false|string[]|nil  read-only in each writable root besides git (paths
---  relative to each root, absolute, or ~/ in HOME); a list adds to the defaults,
---  `defaults = false` in it replaces them, false clears them (luxec.sandbox.paths.DEFAULT_PROTECT)
---@field deny_read false|string[]|nil  masked paths (absolute or ~/, globs `*` `?` `[...]`
---  within a name); added to, replaced or cleared as `protect`
---  (luxec.sandbox.deny_read.DEFAULT_DENY_READ)
---@field git_scan {depth: integer|nil, dirs: integer|nil}|nil  bounds of the search for
---  git repositories in the writable roots (DEFAULT_SCAN)

local MODES = { ["full-access"] = true, ["read-only"] = true, ["workspace-write"] = true }
local KEYS = { mode = true, network = true, roots = true, best_effort = true, evidence = true,
  tmp = true, workspace = true, protect = true, deny_read = true, git_scan = true,
  unix_sockets = true, limits = true }

local function fail(msg, ...)
  error("bad sandbox policy: " .. msg:format(...), 0)
end

--- policy[key] as a list of absolute paths (strings), or an error naming the key and item.
local function absolute_list(policy, key, what)
  local list = policy[key]
  if list == nil then return {} end
  if type(list) ~= "table" then
    fail("'%s' must be a list of absolute paths, got %s", key, type(list))
  end
  for k in pairs(list) do -- (a key that is no index would be ignored)
    if math.type(k) ~= "integer" or k < 1 or k > #list then
      fail("'%s' must be a list of absolute paths, got the key %s", key, type(k) == "string"
        and ("%q"):format(k) or type(k) == "number" and tostring(k) or "(a " .. type(k) .. ")")
    end
  end
  for i = 1, #list do -- (ipairs would stop at a hole)
    if type(list[i]) ~= "string" then
      fail("%s[%d] must be a string, got %s", key, i, type(list[i]))
    end
    if list[i]:sub(1, 1) ~= "/" then
      fail("%s[%d] is relative: %q (%s must be absolute)", key, i, list[i], what)
    end
  end
  return list
end

local function realpath(path)
  return deps.fs.fs_realpath(path)
end

-- (M.resolve, without the kept policies)
local function resolve(policy, cwd, home, search)
  local t0 = uv.hrtime()
  if type(policy) ~= "table" then
    fail("a table expected, got %s", type(policy))
  end
  for k in pairs(policy) do
    if not KEYS[k] then
      fail("unknown key '%s'", tostring(k))
    end
  end
  local mode = policy.mode
  if mode == nil then
    fail("'mode' is required (\"full-access\", \"read-only\" or \"workspace-write\")")
  end
  if not MODES[mode] then
    fail("unknown mode %q (\"full-access\", \"read-only\" or \"workspace-write\")", tostring(mode))
  end
  local network, by_name = policy.network, nil
  if network == nil then
    network = mode == "full-access" and "allow" or "deny"
  elseif type(network) == "table" then -- by name: an empty namespace whose way out is a proxy
    by_name, network = netpolicy.check(network), "deny"
  elseif network ~= "deny" and network ~= "allow" then
    fail("'network' must be \"deny\", \"allow\" or {allow = {host names}}, got %q",
      tostring(network))
  end
  for _, k in ipairs({ "best_effort", "tmp" }) do
    if policy[k] ~= nil and type(policy[k]) ~= "boolean" then
      fail("'%s' must be a boolean, got %s", k, type(policy[k]))
    end
  end
  local ev = policy.evidence
  local ev_net, ev_files = true, true
  if type(ev) == "boolean" then
    ev_net, ev_files = ev, ev
  elseif type(ev) == "table" then
    for k, v in pairs(ev) do
      if k ~= "network" and k ~= "files" then
        fail("unknown key 'evidence.%s'", tostring(k))
      end
      if type(v) ~= "boolean" then
        fail("'evidence.%s' must be a boolean, got %s", k, type(v))
      end
    end
    ev_net, ev_files = ev.network ~= false, ev.files ~= false
  elseif ev ~= nil then
    fail("'evidence' must be a boolean or {network=, files=}, got %s", type(ev))
  end
  local root_list = absolute_list(policy, "roots", "writable roots")
  local unix_sockets = absolute_list(policy, "unix_sockets", "socket paths")
  local wanted = {}
  for i, root in ipairs(root_list) do
    local real = realpath(root)
    if not real then
      fail("roots[%d] does not exist: %q", i, root)
    end
    wanted[#wanted + 1] = real
  end
  if mode == "read-only" and #wanted > 0 then
    fail("'roots' makes no sense in read-only mode")
  end
  local workspace = cwd
  if policy.workspace ~= nil then
    if type(policy.workspace) ~= "string" or policy.workspace:sub(1, 1) ~= "/" then
      fail("'workspace' must be an absolute path, got %s", tostring(policy.workspace))
    end
    if not realpath(policy.workspace) then
      fail("'workspace' does not exist: %q", policy.workspace)
    end
    workspace = policy.workspace
  end
  local protect_defaults, protect = paths.check_list("protect", policy.protect)
  local deny_defaults, deny = paths.check_list("deny_read", policy.deny_read)
  local scan = paths.check_scan(policy.git_scan)
  if mode == "full-access" and (policy.deny_read or policy.protect or policy.git_scan) then
    fail("'%s' needs mode \"read-only\" or \"workspace-write\" (a full-access session has no "
      .. "mount namespace)", policy.deny_read and "deny_read" or policy.protect and "protect"
      or "git_scan")
  end
  local roots, bases = {}, {}
  if mode == "workspace-write" then
    local base = { realpath(workspace) or workspace }
    -- relative protect entries: in the workspace and the configured roots (the programs
    -- that load them start in a project, not in a temporary directory)
    bases[1] = base[1]
    for _, r in ipairs(wanted) do bases[#bases + 1] = r end
    if policy.tmp ~= false then
      -- (a list with a nil in it would end an ipairs early: TMPDIR is often unset)
      for _, p in ipairs({ "/tmp", os.getenv("TMPDIR") or "", "/dev/shm" }) do
        local real = p ~= "" and realpath(p)
        if real then base[#base + 1] = real end
      end
    end
    for _, r in ipairs(wanted) do
      base[#base + 1] = r
    end
    -- drop duplicates and roots inside other roots
    table.sort(base, function(a, b) return #a < #b end)
    for _, r in ipairs(base) do
      local inside = false
      for _, kept in ipairs(roots) do
        if r == kept or kept == "/" or r:sub(1, #kept + 1) == kept .. "/" then
          inside = true
        end
      end
      if not inside then roots[#roots + 1] = r end
    end
  end
  home = home or os.getenv("HOME")
  local found = { ro = {}, reserved = {}, unprotected = {}, repos = 0, dirs = 0 }
  local masks = {}
  local list = {}
  for _, e in ipairs(protect_defaults and paths.DEFAULT_PROTECT or {}) do list[#list + 1] = e end
  for _, e in ipairs(protect) do list[#list + 1] = e end
  local reserved = mode == "workspace-write" and paths.reserved_names(list) or {}
  if mode ~= "full-access" and search ~= false then
    found = paths.protected(roots, { home = home, scan = scan, protect = list, bases = bases })
    -- the paths this spawn looked up by name, kept from being replaced (paths.Found:anchor)
    for _, p in ipairs({ workspace, cwd, os.getenv("TMPDIR"), home }) do found:anchor(p) end
    for _, p in ipairs(root_list) do found:anchor(p) end
    local keep_visible = { cwd and realpath(cwd) or nil }
    for _, r in ipairs(roots) do keep_visible[#keep_visible + 1] = r end
    for _, r in ipairs(bases) do keep_visible[#keep_visible + 1] = r end
    masks = deny_read.masks(deny_defaults, deny, keep_visible, home, found)
    found:settle() -- (with the directories on the way the host could not read)
    for _, p in ipairs(found.reserved) do reserved[#reserved + 1] = p end
    if mode == "workspace-write" then
      for _, p in ipairs(deny_read.reserved(deny_defaults, deny, roots, home)) do
        reserved[#reserved + 1] = p
      end
    end
  end
  -- resource limits: checked apart (luxec.sandbox.limits), whatever the mode
  local lim = limits.resolve(policy.limits)
  return {
    limits = lim,
    mode = mode,
    network = network,
    net = by_name, -- (the proxy's policy; the core sees only its port)
    proxy_port = by_name and netpolicy.PORT or nil,
    best_effort = policy.best_effort == true,
    evidence_net = ev_net,
    evidence_files = ev_files,
    roots = roots,
    unix_sockets = unix_sockets,
    ro_paths = found.ro,
    reserved = reserved,
    masks = masks,
    unprotected = found.unprotected,
    git_repos = found.repos,
    git_scanned = found.dirs,
    resolve_us = math.floor((uv.hrtime() - t0) / 1000), -- (the report's setup_us.resolve)
  }
end

--- Check a policy; returns the core's spec, or raises an error naming the key. The spec's
--- ro_paths (kept read-only in the writable roots) and masks (deny_read) are found on the
--- host now: a spawn sees the repositories and secrets that exist when it starts. The same
--- policy again is answered from the last resolution while nothing it looked at changed
--- (luxec.sandbox.deps); the lists in the spec are shared with it: read them, never change them.
---@param policy luxec.SandboxPolicy
---@param cwd string  the session's working directory (absolute)
---@param home string|nil  the session's HOME for `~/` in deny_read (default: the host's)
---@param search boolean|nil  false: skip looking for repositories and secrets (only the roots
---  are wanted, as for the server's instructions)
function M.resolve(policy, cwd, home, search)
  -- what a resolution reads besides its arguments and the file system
  local s, getenv = paths.DEFAULT_SCAN, os.getenv
  local env = (getenv("TMPDIR") or "") .. "\0" .. (getenv("HOME") or "") .. "\0"
    .. (getenv("XDG_CONFIG_HOME") or "") .. "\0" .. tostring(s.depth) .. " " .. tostring(s.dirs)
    .. " " .. tostring(s.repos) .. " " .. tostring(paths.SCAN_RACY_SECS)
  return deps.resolve(resolve, { paths.DEFAULT_PROTECT, deny_read.DEFAULT_DENY_READ }, env,
    policy, cwd, home, search)
end

--- A session's environment ("K=V" list) with every client's proxy variables set to the
--- session's proxy (network by name), replacing any it had.
---@param env string[]
---@param spec table  from resolve
function M.proxy_env(env, spec)
  local vars, out = netpolicy.env(spec.proxy_port), {}
  for _, kv in ipairs(env) do
    if not vars[kv:match("^([^=]*)")] then out[#out + 1] = kv end
  end
  local names = {}
  for k in pairs(vars) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do out[#out + 1] = k .. "=" .. vars[k] end
  return out
end

--- Serve the proxy of a session whose network goes by name (luxec.sandbox.proxy), on the
--- listener the core made in its network namespace. The proxy holds the session's handle
--- weakly; the second value, a guard the session keeps, closes the proxy when it is collected
--- (a session dropped without a close).
---@param h userdata  the core's handle
---@param spec table  from resolve
---@return luxec.Proxy, table
function M.start_proxy(h, spec)
  local server = assert(h:sandbox_proxy(), "the session has no proxy listener")
  local weak = setmetatable({ h = h }, { __mode = "v" })
  local p
  p = require("luxec.sandbox.proxy").start(server, spec.net, function(port, to)
    local hh = weak.h
    if not hh then return nil end
    local ok, pid, comm = pcall(hh.sandbox_peer, hh, port, to)
    if ok then return pid, comm end
  end)
  local tls, http, dns = h:sandbox_transparent(function(q) return p:dns(q) end)
  if tls then
    p:transparent(tls, http)
    p._extra[#p._extra + 1] = dns
  end
  return p, setmetatable({}, { __gc = function() pcall(p.close, p) end })
end

--- The network of a policy or a report in a few words: "deny", "allow", or "by name:
--- registry.npmjs.org, *.pythonhosted.org".
---@param net string|table|nil
---@return string
function M.network_text(net)
  if type(net) ~= "table" then return tostring(net or "deny") end
  local names = {}
  for i, e in ipairs(type(net.allow) == "table" and net.allow or {}) do
    names[i] = type(e) == "table" and e.text or tostring(e)
  end
  return "by name: " .. table.concat(names, ", ")
    .. (net.allow_private == true and " (private addresses too)" or "")
end

--- The HOME a session sees: its env's ("K=V" list), else the host's.
M.home_of = paths.home_of

--- Add to a session's sandbox report (status().sandbox) what its mount namespace changed:
--- `protected` (kept read-only), `masked` (deny_read: reads as empty), `reserved` (names
--- and missing paths the supervisor refuses to make in a writable root), and `unprotected`
--- (paths that could not be kept read-only, with the reason). Without a mount namespace
--- (best_effort) none of it was applied: the lists are empty and `unprotected` says so.
---@param report table  from the core
---@param spec table  from resolve
---@param proxy luxec.Proxy|nil  network by name: `network` becomes {allow, deny, proxy,
---  allowed = {[host] = requests}, refused = {records}, failed = {records}, over = the
---  connections closed at once, past network.defaults.max_connections open}
function M.annotate(report, spec, proxy)
  if proxy then
    local net = proxy:report()
    local function texts(rules)
      local out = {}
      for i, r in ipairs(rules) do out[i] = r.text end
      return out
    end
    net.allow, net.deny = texts(spec.net.allow), texts(spec.net.deny)
    net.proxy = ("http://127.0.0.1:%d"):format(spec.proxy_port)
    report.network = net
    for _, d in ipairs(report.denials or {}) do -- (past the proxy: the core's records)
      if d.addr and d.op ~= "bind" then d.reason = "only the proxy leads out (network by name)" end
    end
  end
  if report.setup_us then report.setup_us.resolve = spec.resolve_us end
  local applied = report.layers and report.layers.mountns
  -- (copies: the spec's lists are kept for the next spawn of the policy)
  local function copy(list) return table.move(list, 1, #list, 1, {}) end
  report.protected = applied and copy(spec.ro_paths) or {}
  report.masked = applied and copy(spec.masks) or {}
  -- names the supervisor refuses to make (its listener is there in the restricted modes)
  report.reserved = report.layers and report.layers.notify and copy(spec.reserved) or {}
  local un = {}
  for i, u in ipairs(spec.unprotected or {}) do un[i] = { path = u.path, reason = u.reason } end
  if not applied then
    for _, p in ipairs(spec.ro_paths) do
      un[#un + 1] = { path = p, reason = "no mount namespace" }
    end
    for _, p in ipairs(spec.masks) do
      un[#un + 1] = { path = p, reason = "no mount namespace: not masked" }
    end
  end
  report.unprotected = un
  return report
end

-- Bytes that may not reach a terminal or a model as they are: C0 and C1 controls, DEL, the
-- backslash (so an escape cannot be forged), bidirectional overrides, and bytes that are
-- no UTF-8. Each becomes \n, \t, \\ or \xNN (every byte of a bad sequence).
-- Code points that show nothing (or reorder what follows) but a model reads: bidi controls,
-- zero-width characters, line and paragraph separators, and the tag characters (U+E0000-
-- E007F, which can spell a whole hidden text)
local BIDI = { [0x061C] = true, [0x200B] = true, [0x200C] = true, [0x200D] = true,
  [0x200E] = true, [0x200F] = true, [0x2028] = true, [0x2029] = true, [0x202A] = true,
  [0x202B] = true, [0x202C] = true, [0x202D] = true, [0x202E] = true, [0x2060] = true,
  [0x2061] = true, [0x2062] = true, [0x2063] = true, [0x2064] = true, [0x2066] = true,
  [0x2067] = true, [0x2068] = true, [0x2069] = true, [0x206A] = true, [0x206B] = true,
  [0x206C] = true, [0x206D] = true, [0x206E] = true, [0x206F] = true, [0xFEFF] = true,
  [0xFFF9] = true, [0xFFFA] = true, [0xFFFB] = true, [0x180E] = true, [0x00AD] = true }
local NAMED = { ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r", ["\\"] = "\\\\" }

local function hex(s)
  return (s:gsub(".", function(c) return ("\\x%02x"):format(c:byte()) end))
end

--- A path, command name or address as printable text: nothing in it can move a cursor,
--- end a line, pass for an escape or hide (zero-width, bidi and tag characters are shown as
--- their bytes). Other valid UTF-8 text is kept as it is.
---@param s string
---@return string
function M.escape(s)
  s = tostring(s)
  local out, i, n = {}, 1, #s
  while i <= n do
    local b = s:byte(i)
    local len = b < 0x80 and 1 or b >= 0xC2 and b <= 0xDF and 2 or b >= 0xE0 and b <= 0xEF and 3
      or b >= 0xF0 and b <= 0xF4 and 4 or 0
    local ch = len > 0 and s:sub(i, i + len - 1) or s:sub(i, i)
    local cp = len > 0 and #ch == len and utf8.len(ch) == 1 and utf8.codepoint(ch) or nil
    if not cp then
      out[#out + 1], i = hex(s:sub(i, i)), i + 1
    else
      if NAMED[ch] then
        out[#out + 1] = NAMED[ch]
      elseif cp < 0x20 or cp == 0x7F or (cp >= 0x80 and cp <= 0x9F) or BIDI[cp]
        or (cp >= 0xE0000 and cp <= 0xE007F) then
        out[#out + 1] = hex(ch)
      else
        out[#out + 1] = ch
      end
      i = i + len
    end
  end
  return table.concat(out)
end

--- Every refusal of a report (status().sandbox): the network proxy's records (refused, then
--- failed: network by name) before the core's denials, and how many refusals in all.
---@param report table|nil
---@return table[]|nil, integer
function M.evidence(report)
  if not report then return nil, 0 end
  local net = type(report.network) == "table" and report.network or nil
  if not net then return report.denials, math.tointeger(report.denials_total) or 0 end
  local list, total = {}, math.tointeger(report.denials_total) or 0
  for _, key in ipairs({ "refused", "failed" }) do
    for _, r in ipairs(net[key] or {}) do
      list[#list + 1] = r
      total = total + (math.tointeger(r.count) or 1)
    end
  end
  for _, d in ipairs(report.denials or {}) do list[#list + 1] = d end
  return list, total
end

local PROTOCOLS = { [6] = "tcp", [17] = "udp", [1] = "icmp", [58] = "icmpv6", [132] = "sctp",
  [262] = "mptcp", [0] = "raw" }

--- "/tcp", "/udp", "/icmp", ... of a network record whose socket is known, or "".
local function transport(d)
  local p = math.tointeger(d.protocol)
  if d.op == "socket" or not p then return "" end
  return "/" .. (PROTOCOLS[p] or ("protocol " .. p))
end

--- One line a model or a person reads for a denial, e.g.
--- "connect 93.184.216.34:443 (pid 12 curl)", "open /etc/passwd: EROFS (pid 7 sh, 3 times)"
--- or "rename /w/a -> /etc/a: EXDEV (pid 9 mv)". Every path and name in it is escaped.
---@param d table  a record of status().sandbox.denials
---@return string
function M.describe(d)
  local e = M.escape
  local what
  if d.host then -- a request the network-by-name proxy refused or could not forward
    local host = d.host:find(":", 1, true) and ("[" .. e(d.host) .. "]") or e(d.host)
    what = ("%s %s:%d %s: %s"):format(e(d.op), host, math.tointeger(d.port) or 0,
      d.failed and "failed" or "refused", e(d.reason or "?"))
    if not d.pid then -- (it was gone, or closed the connection, before it was looked for)
      local n = math.tointeger(d.count)
      return ("%s (process not found%s)"):format(what, n and n > 1 and (", %d times"):format(n)
        or "")
    end
  elseif d.addr then
    local addr = d.family == "AF_INET6" and ("[" .. e(d.addr) .. "]") or e(d.addr)
    what = ("%s %s:%d%s"):format(e(d.op), addr, math.tointeger(d.port) or 0, transport(d))
    if d.reason then what = what .. " refused: " .. e(d.reason) end
  elseif d.path then
    what = ("%s %s"):format(e(d.op), e(d.path))
    if d.to then what = what .. " -> " .. e(d.to) end
  elseif d.family then
    what = ("%s %s"):format(e(d.op), e(d.family))
  else
    what = e(d.op)
  end
  if d.error and d.path then what = what .. ": " .. e(d.error) end
  local count = math.tointeger(d.count)
  local times = count and count > 1 and (", %d times"):format(count) or ""
  return ("%s (pid %d %s%s)"):format(what, math.tointeger(d.pid) or 0, e(d.comm or "?"), times)
end

return M
