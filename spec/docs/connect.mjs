// Starts an MCP server as a client configuration says (command, args, env; cwd the
// project's directory) with the MCP SDK's stdio client, lists its tools and runs one
// exec_command, then prints what it saw as one JSON object:
//   node connect.mjs '{"command": ..., "args": [...], "env": {...}, "cwd": ..., "cmd": ...}'
// The SDK comes from spec/mcp/client/node_modules (scripts/setup installs it).
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, '../mcp/client/package.json'));
const load = async m => import(pathToFileURL(require.resolve(m)).href);
const { Client } = await load('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await load('@modelcontextprotocol/sdk/client/stdio.js');

const spec = JSON.parse(process.argv[2]);
try {
  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args ?? [],
    // what a client passes: its own environment, then the configuration's variables
    env: { ...process.env, ...(spec.env ?? {}) },
    cwd: spec.cwd,
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr.on('data', d => { stderr += d; });
  const client = new Client({ name: 'luxec-docs-spec', version: '1.0.0' });
  await client.connect(transport).catch(e => { throw new Error(`${e}; stderr: ${stderr}`); });
  const tools = (await client.listTools()).tools.map(t => t.name);
  const r = await client.callTool({ name: 'exec_command', arguments: { cmd: spec.cmd } });
  const s = r.structuredContent ?? {};
  console.log(JSON.stringify({ tools, exit_code: s.exit_code, output: s.output,
    sandbox: s.sandbox?.mode, isError: r.isError ?? false }));
  await client.close();
} catch (e) {
  console.log(JSON.stringify({ error: String(e) }));
  process.exit(1);
}
