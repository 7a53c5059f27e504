--- The fenced code blocks of a Markdown file, as the doc tests take them (docs/README's
--- conventions, spelled out in docs/reliability.md "Documentation that runs"):
---   ```lua / ```sh            run (a script for luxec / for bash), must exit 0
---   ```output                 right after a run block: that block's exact stdout
---   ```LANG no-run            not run; its first line is a comment
---                             "not run by the doc tests: REASON"
---   ```LANG needs=a,b         run only where the commands a and b are on PATH
---   ```json / ```toml         parsed
---   ```prompt                 a session at luxec's prompt: each line "> CODE" is typed, the
---                             lines after it are what the terminal shows (the banner apart)
---   ```lua mcp-config         a `luxec mcp` configuration: checked with --check-config
---   ```text                   not code (a layout, a transcript): counted, not run
local M = {}

M.RUN = { lua = true, sh = true }
M.PARSE = { json = true, toml = true }

--- Every block of `text` (the contents of `file`), in order: {file, line, lang, attrs,
--- code, output (the following output block's text, if any), reason (no-run's)}.
---@return table[] blocks
---@return string|nil error  a malformed block, naming its line
function M.parse(text, file)
  local blocks, n, open = {}, 0, nil
  local last -- the last run block, while only blank lines follow it
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("([^\n]*)\n") do
    n = n + 1
    if open then
      if line:match("^```%s*$") then
        local b = open
        open = nil
        b.code = table.concat(b.lines, "\n") .. (#b.lines > 0 and "\n" or "")
        b.lines = nil
        if b.lang == "output" then
          if not last then
            return nil, ("%s:%d: an output block that follows no lua or sh block"):format(file,
              b.line)
          end
          last.output = b.code
          last = nil
        else
          blocks[#blocks + 1] = b
          last = M.RUN[b.lang] and not b.attrs["no-run"] and b or nil
        end
      else
        open.lines[#open.lines + 1] = line
      end
    elseif line:match("^%s*```") then
      local info = line:match("^```(.*)$")
      if not info then
        return nil, ("%s:%d: an indented fence (the doc tests take fences at column 1)")
          :format(file, n)
      end
      local words = {}
      for w in info:gmatch("%S+") do words[#words + 1] = w end
      local lang = table.remove(words, 1)
      if not lang then
        return nil, ("%s:%d: a block without a language (```text for what is not code)")
          :format(file, n)
      end
      local attrs = {}
      for _, w in ipairs(words) do
        local k, v = w:match("^([%w-]+)=(.*)$")
        if k then attrs[k] = v else attrs[w] = true end
      end
      open = { file = file, line = n, lang = lang, attrs = attrs, lines = {} }
    elseif not line:match("^%s*$") then
      last = nil
    end
  end
  if open then return nil, ("%s:%d: a block that is never closed"):format(file, open.line) end
  for _, b in ipairs(blocks) do
    if b.attrs["no-run"] then
      local first = b.code:match("^[^\n]*")
      b.reason = first:match("^%s*[-#/]+%s*not run by the doc tests: (.+)$")
      if not b.reason then
        return nil, ("%s:%d: a no-run block must say why on its first line: "
          .. "'-- not run by the doc tests: REASON' (or '# ...')"):format(file, b.line)
      end
    elseif not (M.RUN[b.lang] or M.PARSE[b.lang] or b.lang == "text" or b.lang == "prompt") then
      return nil, ("%s:%d: a %s block is neither run nor parsed: mark it no-run with the "
        .. "reason, or make it ```text"):format(file, b.line, b.lang)
    end
  end
  return blocks
end

return M
