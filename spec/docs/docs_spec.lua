-- Every fenced code block of README.md and docs/*.md runs (spec/docs/blocks.lua has the
-- conventions): a lua block as a script of the built luxec, a sh block with bash, each in a
-- temporary directory of its own (its cwd and HOME, luxec first on PATH, node_modules of the
-- MCP client beside it for npx) and bounded in time; a following output block is its exact
-- stdout. Config blocks are parsed, a `luxec mcp` config checked with --check-config. The
-- blocks not run are counted and printed with their reasons.
local H = require("helper")
local luxec = require("luxec")
local uv = require("luv")
local cjson = require("cjson")
local blocks = require("docs.blocks")

local TIMEOUT = 120 -- seconds a block may take (npx starts node twice)
local PATH = H.build .. "/bin:" .. os.getenv("PATH")
local NODE_MODULES = H.root .. "/spec/mcp/client/node_modules"

local function doc_files()
  local files = { "README.md" }
  local names = {}
  local scan = uv.fs_scandir(H.root .. "/docs")
  while scan do
    local name, kind = uv.fs_scandir_next(scan)
    if not name then break end
    if kind == "file" and name:match("%.md$") then names[#names + 1] = name end
  end
  table.sort(names)
  for _, n in ipairs(names) do files[#files + 1] = "docs/" .. n end
  return files
end

local all, parse_errors = {}, {}
for _, f in ipairs(doc_files()) do
  local list, err = blocks.parse(assert(H.read_file(H.root .. "/" .. f)), f)
  if list then
    for _, b in ipairs(list) do all[#all + 1] = b end
  else
    parse_errors[#parse_errors + 1] = err
  end
end

local counts = { run = 0, output = 0, parsed = 0, config = 0, text = 0, prompt = 0,
  skipped = {}, no_run = {} }

-- The text of a terminal's screen below its first line (luxec's banner), each line without
-- its trailing spaces, without the prompt waiting at the end.
local function screen_text(p)
  local lines = {}
  for i, line in ipairs(p:screen().lines) do
    if i > 1 then lines[#lines + 1] = (line:gsub("%s+$", "")) end
  end
  while #lines > 0 and (lines[#lines] == "" or lines[#lines] == ">") do lines[#lines] = nil end
  return table.concat(lines, "\n") .. "\n"
end

-- Type each "> " line of a transcript at luxec's prompt on a terminal, waiting for the next
-- prompt each time; what the screen then shows.
local function prompt_session(dir, transcript)
  local p = assert(luxec.spawn({ H.luxec }, { tty = { rows = 60, cols = 100 }, cwd = dir,
    env = { PATH = PATH, HOME = dir, LANG = "C.UTF-8", TERM = "dumb", LUXEC_HISTORY = "",
      LUXEC_LUA_DIR = os.getenv("LUXEC_LUA_DIR"), ASAN_OPTIONS = os.getenv("ASAN_OPTIONS"),
      UBSAN_OPTIONS = os.getenv("UBSAN_OPTIONS") } }))
  -- the screen shows the n-th prompt (or continuation prompt), waiting at the end
  local typed = 0
  local function at_prompt(s)
    local last, prompts = nil, 0
    for _, line in ipairs(s.lines) do
      if line:match("^>") then prompts = prompts + 1 end
      if line:match("%S") then last = line end
    end
    return prompts == typed + 1 and last and last:match("^>>?%s*$") ~= nil
  end
  local ok, err = p:expect_screen(at_prompt, { timeout = 30 })
  for line in transcript:gmatch("[^\n]+") do
    local code = line:match("^>>? (.*)$")
    if code and ok then
      p:sendline(code)
      typed = typed + 1
      ok, err = p:expect_screen(at_prompt, { timeout = 30 })
    end
  end
  local shown = screen_text(p)
  p:close()
  assert(ok, ("the prompt did not come back: %s\nscreen:\n%s"):format(tostring(err), shown))
  return shown
end

local function missing(b)
  for cmd in (b.attrs.needs or ""):gmatch("[^,]+") do
    if not H.have(cmd) then return cmd end
  end
end

-- What a block's environment keeps of the suite's: where luxec's Lua code is, and the
-- sanitizers' options of a --sanitize run.
local PASSED = { "LUXEC_LUA_DIR", "ASAN_OPTIONS", "UBSAN_OPTIONS" }

local function run_in(dir, argv)
  local env = { PATH = PATH, HOME = dir, USER = os.getenv("USER"), LANG = "C.UTF-8",
    TERM = "dumb", npm_config_offline = "true", npm_config_update_notifier = "false" }
  for _, k in ipairs(PASSED) do env[k] = os.getenv(k) end
  return luxec.run(argv, { cwd = dir, timeout = TIMEOUT, stderr = "pipe", env = env })
end

local function where(b) return ("%s:%d"):format(b.file, b.line) end

local function report(r)
  return ("exit %s%s, timed out: %s\nstdout:\n%s\nstderr:\n%s"):format(tostring(r.code),
    r.signal_name and (" (" .. r.signal_name .. ")") or "", tostring(r.timed_out),
    r.output or "", r.stderr or "")
end

local function toml_to_json(dir, code)
  H.write_file(dir .. "/block.toml", code)
  local r = run_in(dir, { "python3", "-c", "import json, sys, tomllib\n"
    .. "print(json.dumps(tomllib.load(open(sys.argv[1], 'rb'))))", dir .. "/block.toml" })
  assert(r.code == 0, "the TOML does not parse: " .. report(r))
  return cjson.decode(r.output)
end

describe("the documentation's code blocks", function()
  local dir
  before_each(function()
    dir = H.tmpdir()
    assert(uv.fs_symlink(NODE_MODULES, dir .. "/node_modules"))
  end)
  after_each(function()
    H.rmtree(dir)
    H.assert_clean()
  end)

  teardown(function()
    local lines = { ("docs: %d blocks run (%d with their output checked), %d prompt sessions "
      .. "checked, %d config blocks parsed (%d checked by luxec mcp --check-config), %d text "
      .. "blocks, %d not run, %d skipped here"):format(counts.run, counts.output,
      counts.prompt, counts.parsed, counts.config, counts.text, #counts.no_run,
      #counts.skipped) }
    for _, s in ipairs(counts.no_run) do lines[#lines + 1] = "  not run: " .. s end
    for _, s in ipairs(counts.skipped) do lines[#lines + 1] = "  skipped: " .. s end
    io.stderr:write(table.concat(lines, "\n"), "\n")
  end)

  it("link to files that exist (every relative link of README.md and docs/)", function()
    local broken = {}
    for _, f in ipairs(doc_files()) do
      local base = f:match("^(.*/)") or ""
      for target in H.read_file(H.root .. "/" .. f):gmatch("%]%(([^)#%s]+)[^)]*%)") do
        if not target:match("^%a[%w+.-]*:") and
            not uv.fs_stat(H.root .. "/" .. base .. target) then
          broken[#broken + 1] = f .. ": " .. target
        end
      end
    end
    assert.same({}, broken)
  end)

  it("are all well formed, each with a language", function()
    assert.same({}, parse_errors)
    assert.is_true(#all > 0)
  end)

  for _, b in ipairs(all) do
    local title = ("%s %s%s"):format(where(b), b.lang,
      b.attrs["no-run"] and " (not run)" or "")
    if b.attrs["no-run"] then
      counts.no_run[#counts.no_run + 1] = where(b) .. ": " .. b.reason
    elseif b.lang == "text" then
      counts.text = counts.text + 1
    elseif blocks.PARSE[b.lang] then
      it(title .. " parses", function()
        local value
        if b.lang == "json" then
          value = cjson.decode(b.code)
        else
          if not H.have("python3") or os.execute("python3 -c 'import tomllib' 2>/dev/null")
              ~= true then
            counts.skipped[#counts.skipped + 1] = where(b) .. ": no python3 with tomllib"
            return pending("no python3 with tomllib to parse TOML")
          end
          value = toml_to_json(dir, b.code)
        end
        assert.equals("table", type(value))
        counts.parsed = counts.parsed + 1
      end)
    elseif b.lang == "prompt" then
      it(title .. " shows what the prompt shows", function()
        local need = missing(b)
        if need then
          counts.skipped[#counts.skipped + 1] = where(b) .. ": no " .. need
          return pending("no " .. need .. " on this machine")
        end
        local shown = prompt_session(dir, b.code)
        assert.equals(b.code, shown)
        counts.prompt = counts.prompt + 1
      end)
    elseif b.lang == "lua" and b.attrs["mcp-config"] then
      it(title .. " is a config luxec mcp accepts", function()
        H.write_file(dir .. "/config.lua", b.code)
        local r = run_in(dir, { H.luxec, "mcp", "--check-config", dir .. "/config.lua" })
        assert(r.code == 0, report(r))
        counts.parsed, counts.config = counts.parsed + 1, counts.config + 1
      end)
    else
      it(title .. " runs" .. (b.output and " and prints what it shows" or ""), function()
        local need = missing(b)
        if need then
          counts.skipped[#counts.skipped + 1] = where(b) .. ": no " .. need
          print(where(b) .. ": skipped, no " .. need)
          return pending("no " .. need .. " on this machine")
        end
        local argv
        if b.lang == "lua" then
          H.write_file(dir .. "/block.lua", b.code)
          argv = { H.luxec, dir .. "/block.lua" }
        else
          H.write_file(dir .. "/block.sh", b.code)
          argv = { "bash", "-eo", "pipefail", dir .. "/block.sh" }
        end
        local r = run_in(dir, argv)
        assert(r.code == 0 and not r.timed_out, where(b) .. ": " .. report(r))
        counts.run = counts.run + 1
        if b.output then
          assert.equals(b.output, r.output)
          counts.output = counts.output + 1
        end
      end)
    end
  end
end)
