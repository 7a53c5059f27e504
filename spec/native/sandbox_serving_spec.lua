-- The threads that serve sandboxed sessions' seccomp listeners outlive their sessions: one done
-- with a session waits for the next (at most four wait), so sessions in turn make no thread
-- each. What must hold whatever thread serves a session: each session's records are its own,
-- sessions that run at once are served at once, and a session closed while one of its calls
-- waits leaves nothing behind. Refusals are decided from outside (the file does not exist).
local H = require("helper")
local uv = require("luv")
local luxec = require("luxec")

local EV = H.fixture("evidence")

local function threads()
  return tonumber(H.read_file("/proc/self/status"):match("\nThreads:%s*(%d+)"))
end

local function paths(report)
  local out = {}
  for _, d in ipairs(report.denials) do out[#out + 1] = d.op .. " " .. tostring(d.path) end
  table.sort(out)
  return out
end

describe("the sandbox's serving threads", function()
  if H.skip_without_sandbox() then return end

  local root, outside
  before_each(function()
    root, outside = H.workspace_and_outside()
  end)
  after_each(function()
    H.rmtree(root)
    H.rm_outside(outside)
    H.assert_clean()
  end)

  local function opts()
    return { cwd = root, sandbox = { mode = "workspace-write", network = "deny",
      workspace = root } }
  end

  it("serve sessions in turn with the same threads, each session's records its own", function()
    local function one(i)
      local p = assert(luxec.spawn({ EV, "open", outside .. "/made-" .. i, "wc" }, opts()))
      local st = assert(p:wait({ timeout = 20 }))
      local out = p:read()
      p:close()
      assert.equals("EROFS\n", out)
      assert.same({ "open " .. outside .. "/made-" .. i }, paths(st.sandbox))
      assert.equals(1, st.sandbox.denials_total)
    end
    one(0)
    local before = threads()
    for i = 1, 15 do one(i) end
    -- a thread let go by a session may still be on its way to the idle list: none is made
    -- for each session, and no more than four wait
    assert.is_true(threads() <= before + 4,
      ("threads: %d before, %d after 15 sessions"):format(before, threads()))
    for i = 0, 15 do assert.is_nil(uv.fs_lstat(outside .. "/made-" .. i)) end
  end)

  it("serve sessions that run at once at once", function()
    -- Three sessions each wait on their input between two refused calls: all three are alive
    -- with their listeners open, and each one's calls are answered while the others wait.
    local script = "$0 open %s/a-%d wc; read line; $0 open %s/b-%d wc; echo done"
    local procs = {}
    for i = 1, 3 do
      procs[i] = assert(luxec.spawn({ "sh", "-c", script:format(outside, i, outside, i), EV },
        opts()))
    end
    for i = 1, 3 do
      assert(procs[i]:_wait_until(function()
        return #procs[i]:status().sandbox.denials == 1
      end, 20000), "session " .. i .. "'s first call was not answered")
    end
    for i = 3, 1, -1 do -- the last one started goes first
      procs[i]:write("go\n")
      local st = assert(procs[i]:wait({ timeout = 20 }))
      assert.equals(0, st.code)
      assert.equals("EROFS\nEROFS\ndone\n", procs[i]:read())
      assert.same({ "open " .. outside .. "/a-" .. i, "open " .. outside .. "/b-" .. i },
        paths(st.sandbox))
    end
    for i = 1, 3 do procs[i]:close() end
    for i = 1, 3 do
      assert.is_nil(uv.fs_lstat(outside .. "/a-" .. i))
      assert.is_nil(uv.fs_lstat(outside .. "/b-" .. i))
    end
  end)

  it("keep nothing of a session: no thread stays in a directory of one", function()
    -- a bind of a unix socket is made by the serving thread itself, from the socket's
    -- directory in the session's mount namespace
    local p = assert(luxec.spawn({ "python3", "-c",
      "import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock'); print('bound')" },
      opts()))
    local st = assert(p:wait({ timeout = 20 }))
    assert.same({ 0, "bound\n" }, { st.code, (p:read()) })
    p:close()
    assert.is_truthy(uv.fs_lstat(root .. "/sock"))
    -- (a directory in another mount namespace reads as a path of that namespace's mount, so
    -- each thread's is compared with the two a thread of the host may have). The serving
    -- thread lets go of the session after close() returned, at its own pace: waited for.
    local host_cwd = assert(uv.cwd())
    local stuck
    local function none_stays()
      stuck = nil
      local req = assert(uv.fs_scandir("/proc/self/task"))
      for tid in function() return uv.fs_scandir_next(req) end do
        local cwd = uv.fs_readlink("/proc/self/task/" .. tid .. "/cwd")
        if not (cwd == nil or cwd == host_cwd or cwd == "/") then
          stuck = ("thread %s in %s"):format(tid, cwd)
        end
      end
      return stuck == nil
    end
    local ok = pcall(H.wait_for, none_stays, 10000)
    assert(ok, ("a thread stayed in a directory of the session for 10 s: %s"):format(stuck))
  end)

  it("let go of a session closed while one of its calls waits on a thread of its own",
    function()
      -- a FIFO opened for writing waits for a reader on its own thread; the session is closed
      -- meanwhile, and the next session is served as any other
      assert(os.execute("mkfifo '" .. root .. "/fifo'"))
      local p = assert(luxec.spawn({ "sh", "-c", "echo started; echo x > fifo" }, opts()))
      H.wait_output(p, "started", 20000)
      -- the shell waits in the open (openat, 257), answered by nobody until a reader comes
      H.wait_for(function()
        return (H.read_file("/proc/" .. p.pid .. "/syscall") or ""):match("^257 ") ~= nil
      end, 20000, "the shell waiting in its open of the fifo")
      p:close()
      local q = assert(luxec.spawn({ EV, "open", outside .. "/after", "wc" }, opts()))
      local st = assert(q:wait({ timeout = 20 }))
      assert.equals("EROFS\n", q:read())
      q:close()
      assert.same({ "open " .. outside .. "/after" }, paths(st.sandbox))
      assert.is_nil(uv.fs_lstat(outside .. "/after"))
    end)

  it("wait on at most 32 threads for a session; the rest in turn, none lost", function()
    -- 100 threads of the program each open a fifo of its own for writing before any reader
    local N = 100
    local prog = ([[
import os, sys, threading
os.chdir(sys.argv[1])
for i in range(%d): os.mkfifo("f%%d" %% i)
def w(i):
    with open("f%%d" %% i, "w") as f: f.write("w%%d\n" %% i)
ts = [threading.Thread(target=w, args=(i,)) for i in range(%d)]
for t in ts: t.start()
print("started", flush=True)
for t in ts: t.join()
print("all written", flush=True)
]]):format(N, N)
    assert(uv.fs_mkdir(root .. "/ff", 493))
    -- (a session before: its serving thread waits in the pool for the next, and the
    -- network namespaces are made ahead again)
    local w = assert(luxec.spawn({ "true" }, opts()))
    assert(w:wait({ timeout = 20 }))
    w:close()
    local before = threads()
    local p = assert(luxec.spawn({ "python3", "-c", prog, root .. "/ff" }, opts()))
    H.wait_output(p, "started", 20000)
    -- the program's threads wait in their opens: 32 on threads of the host, one more on the
    -- session's serving thread, the rest queued behind it
    local function in_open()
      local n = 0
      local d = uv.fs_scandir("/proc/" .. p.pid .. "/task")
      for t in function() return d and uv.fs_scandir_next(d) end do
        local sc = H.read_file(("/proc/%d/task/%s/syscall"):format(p.pid, t)) or ""
        if sc:match("^257 ") then n = n + 1 end
      end
      return n
    end
    H.wait_for(function() return in_open() == N end, 20000, "the writers in their opens")
    H.wait_for(function() return threads() >= before + 32 end, 20000, "32 waiting threads")
    -- (a hand-off past the bound would take a thread at once: none does within half a second;
    -- the thread that makes network namespaces ahead may be one more)
    local most = threads()
    local t0 = uv.hrtime()
    while uv.hrtime() - t0 < 5e8 do
      most = math.max(most, threads())
      luxec.sleep(0.01)
    end
    assert.is_true(most <= before + 33, ("%d threads, %d before"):format(most, before))
    -- another session is served meanwhile
    local q = assert(luxec.spawn({ EV, "open", outside .. "/meanwhile", "wc" }, opts()))
    assert(q:wait({ timeout = 20 }))
    assert.equals("EROFS\n", q:read())
    q:close()
    -- a reader for each fifo: every writer gets through, each line read once
    local got = {}
    for i = 0, N - 1 do
      local f = assert(io.open(("%s/ff/f%d"):format(root, i), "r"))
      got[#got + 1] = f:read("a")
      f:close()
    end
    local st = assert(p:wait({ timeout = 60 }))
    assert.equals(0, st.code)
    assert.matches("all written\n", p:read())
    p:close()
    for i = 0, N - 1 do assert.equals(("w%d\n"):format(i), got[i + 1]) end
    H.wait_for(function() return threads() <= before + 1 end, 20000, "the waits' threads gone")
  end)
end)
