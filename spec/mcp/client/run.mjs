// The real MCP client (@modelcontextprotocol/sdk: Client + StdioClientTransport) against
// `luxec mcp`, one scenario per run:
//   node run.mjs SCENARIO
// Environment: LUXEC (the binary), LUXEC_CWD (the server's working directory), LUXEC_CONFIG
// (an optional --config file). Prints one JSON object (what the scenario saw) on stdout; the
// Lua spec (spec/mcp/client_spec.lua) makes the assertions. Exits 1 with {error} on a failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ListToolsResultSchema, CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import Ajv from 'ajv';
import fs, { existsSync } from 'node:fs';

const scenario = process.argv[2];
const luxec = process.env.LUXEC;
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

// What the server needs from our environment beyond the SDK's default few variables.
function passed() {
  const env = {};
  for (const k of ['LUXEC_LUA_DIR', 'ASAN_OPTIONS', 'UBSAN_OPTIONS', 'TMPDIR']) {
    if (process.env[k] !== undefined) env[k] = process.env[k];
  }
  return env;
}

async function connect() {
  const args = ['mcp'];
  if (process.env.LUXEC_CONFIG) args.push('--config', process.env.LUXEC_CONFIG);
  const transport = new StdioClientTransport({
    command: luxec,
    args,
    cwd: process.env.LUXEC_CWD,
    env: passed(),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr.on('data', d => { stderr += d; });
  const client = new Client({ name: 'luxec-spec', version: '1.0.0' });
  const errors = [];
  client.onerror = e => errors.push(String(e));
  await client.connect(transport);
  return { client, transport, errors, stderr: () => stderr };
}

function text(result) {
  return result.content?.[0]?.text ?? '';
}

async function exec(client, args, options) {
  const r = await client.callTool({ name: 'exec_command', arguments: args }, undefined, options);
  return r;
}

async function write(client, args, options) {
  return client.callTool({ name: 'write_stdin', arguments: args }, undefined, options);
}

const scenarios = {};

scenarios.handshake = async () => {
  const { client, transport, errors } = await connect();
  const out = {
    server: client.getServerVersion(),
    capabilities: client.getServerCapabilities(),
    instructions: client.getInstructions(),
    ping: await client.ping(),
  };
  await client.close();
  await transport.close();
  return { ...out, errors };
};

// tools/list checked by the SDK's schema and every declared schema compiled by a strict Ajv
// (with its meta-schema check); then each tool called with valid arguments, so the SDK checks
// its structuredContent against the outputSchema, and a sample of arguments against the
// inputSchema.
scenarios.tools = async () => {
  const { client, errors } = await connect();
  const raw = await client.request({ method: 'tools/list', params: {} }, ListToolsResultSchema);
  const ajv = new Ajv({ strict: true, allErrors: true, validateSchema: true,
    strictRequired: false });
  const tools = {};
  for (const tool of raw.tools) {
    const validate = ajv.compile(tool.inputSchema);
    const validateOut = tool.outputSchema ? ajv.compile(tool.outputSchema) : null;
    tools[tool.name] = { validate, validateOut, tool };
  }
  const samples = {
    exec_command: { cmd: 'echo hi', yield_time_ms: 1000, tty: false },
    write_stdin: { session_id: 1000, chars: '' },
    list_sessions: {},
    terminate_session: { session_id: 1000 },
    read_output: { session_id: 1000, offset: 0, length: 10 },
  };
  const inputOk = {};
  for (const [name, args] of Object.entries(samples)) {
    inputOk[name] = tools[name].validate(args);
  }
  const badInput = tools.exec_command.validate({ cmd: 5 });
  const results = {};
  const check = (name, r) => {
    const v = tools[name].validateOut;
    results[name] = {
      isError: r.isError ?? false,
      text: text(r),
      structured: r.structuredContent ?? null,
      valid: r.structuredContent ? v(r.structuredContent) : null,
      validationErrors: v.errors ?? null,
    };
  };
  CallToolResultSchema.parse(await exec(client, samples.exec_command));
  const running = await exec(client, { cmd: 'echo started; exec cat', tty: true,
    yield_time_ms: 3000 });
  check('exec_command', running);
  const id = running.structuredContent.session_id;
  check('write_stdin', await write(client, { session_id: id, chars: 'hello\n',
    yield_time_ms: 3000 }));
  check('list_sessions', await client.callTool({ name: 'list_sessions', arguments: {} }));
  check('read_output', await client.callTool({ name: 'read_output',
    arguments: { session_id: id, offset: 0, length: 7 } }));
  check('terminate_session', await client.callTool({ name: 'terminate_session',
    arguments: { session_id: id } }));
  const finished = await exec(client, { cmd: 'exit 3' });
  check('exec_command', finished);
  const unknown = await write(client, { session_id: id, chars: 'x' });
  await client.close();
  return {
    names: raw.tools.map(t => t.name),
    withOutputSchema: raw.tools.filter(t => t.outputSchema).map(t => t.name),
    inputOk, badInput, results, unknown: { isError: unknown.isError, text: text(unknown) },
    errors,
  };
};

// bash -i on a terminal: a variable exported in one call is read back in a later one.
scenarios.interactive = async () => {
  const { client, errors } = await connect();
  const start = await exec(client, { cmd: 'bash --norc -i', tty: true, login: false,
    yield_time_ms: 5000 });
  const id = start.structuredContent.session_id;
  const set = await write(client, { session_id: id, chars: 'export LUXEC_SPEC_VAR=hello-42\n',
    yield_time_ms: 3000 });
  const other = await exec(client, { cmd: 'echo in-between' });
  const get = await write(client, { session_id: id, chars: 'echo "[$LUXEC_SPEC_VAR]"\n',
    yield_time_ms: 3000 });
  const exit = await write(client, { session_id: id, chars: 'exit 7\n', yield_time_ms: 5000 });
  await client.close();
  return {
    start: start.structuredContent, set: set.structuredContent, other: other.structuredContent,
    get: get.structuredContent, exit: exit.structuredContent, getText: text(get), errors,
  };
};

// Two calls on two sessions at once: the first waits until the second has run. Served one
// after the other, the first would wait out its whole yield (20 s) before the second ran.
scenarios.concurrent = async () => {
  const { client, errors } = await connect();
  const flag = `luxec-spec-flag-${process.pid}`;
  const t0 = Date.now();
  // sent first on the one stdio stream, so the server has the first call before the second
  const first = exec(client, {
    cmd: `while [ ! -e ${flag} ]; do sleep 0.02; done; rm -f ${flag}; echo first-done`,
    yield_time_ms: 20000,
  });
  const second = await exec(client, { cmd: `echo second-done; touch ${flag}` });
  const secondMs = Date.now() - t0;
  const a = await first;
  const firstMs = Date.now() - t0;
  await client.close();
  return { first: a.structuredContent, second: second.structuredContent, firstMs, secondMs,
    errors };
};

// A call cancelled while it waits: the client gets its AbortError at once, the server keeps
// serving, and the command keeps running (or is ended, with server.cancel = "kill").
scenarios.cancel = async () => {
  const { client, errors } = await connect();
  const marker = `${process.env.LUXEC_CWD}/cancel-marker`;
  const controller = new AbortController();
  const t0 = Date.now();
  const started = `${process.env.LUXEC_CWD}/cancel-started`;
  const pending = exec(client, {
    cmd: `touch ${started}; sleep 1; echo ran > ${marker}; echo finished`,
    yield_time_ms: 20000 }, { signal: controller.signal });
  // cancelled once the command runs (its first act makes the file)
  for (let i = 0; i < 600 && !existsSync(started); i++) await sleep(10);
  controller.abort('changed my mind');
  let abortError = null;
  try {
    await pending;
  } catch (e) {
    abortError = String(e);
  }
  const abortedMs = Date.now() - t0;
  const quick = await exec(client, { cmd: 'echo still-serving' });
  const quickMs = Date.now() - t0;
  // the command was not ended: it finishes its sleep and writes the marker (while the server
  // runs: closing the client would end it)
  let markerMs = null;
  for (let i = 0; i < 300 && markerMs === null; i++) {
    if (existsSync(marker)) markerMs = Date.now() - t0;
    else await sleep(50);
  }
  await client.close();
  return { abortError, abortedMs, quick: quick.structuredContent, quickMs, markerMs, errors };
};

// Progress notifications while a call waits (the SDK sends a progressToken with onprogress).
scenarios.progress = async () => {
  const { client, errors } = await connect();
  const progress = [];
  const r = await exec(client, { cmd: 'sleep 1.5; echo slept', yield_time_ms: 10000 },
    { onprogress: p => progress.push(p), resetTimeoutOnProgress: true });
  const quiet = [];
  await exec(client, { cmd: 'echo fast' }, { onprogress: p => quiet.push(p) });
  await client.close();
  return { result: r.structuredContent, progress, quiet, errors };
};

// Shutdown: sessions running (a tree: a background child too) when the client closes stdin;
// the server must exit 0 and leave no process.
scenarios.shutdown = async () => {
  const { client, transport, errors } = await connect();
  const serverPid = transport.pid;
  const exited = new Promise(resolve => {
    transport._process.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const a = await exec(client, { cmd: 'sleep 301 & echo CHILD=$!; echo PID=$$; exec sleep 300',
    yield_time_ms: 500 });
  const b = await exec(client, { cmd: 'bash --norc -i', tty: true, login: false,
    yield_time_ms: 3000 });
  const bList = await client.callTool({ name: 'list_sessions', arguments: {} });
  // every process under the server as the host numbers them (a sandboxed command prints its
  // own pid namespace's numbers)
  const tree = descendants(serverPid);
  const t0 = Date.now();
  await client.close();
  const exit = await exited;
  return { serverPid, a: a.structuredContent, b: b.structuredContent,
    sessions: bList.structuredContent.sessions, tree, exit, closeMs: Date.now() - t0, errors };
};

function descendants(pid) {
  const out = [];
  const queue = [pid];
  while (queue.length) {
    const p = queue.pop();
    let tasks = [];
    try { tasks = fs.readdirSync(`/proc/${p}/task`); } catch { continue; }
    for (const t of tasks) {
      let text = '';
      try { text = fs.readFileSync(`/proc/${p}/task/${t}/children`, 'utf8'); } catch { continue; }
      for (const kid of text.split(/\s+/).filter(Boolean).map(Number)) {
        out.push(kid);
        queue.push(kid);
      }
    }
  }
  return out;
}

try {
  const fn = scenarios[scenario];
  if (!fn) throw new Error(`unknown scenario ${scenario}`);
  const out = await fn();
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
} catch (e) {
  process.stdout.write(JSON.stringify({ error: String(e?.stack ?? e) }) + '\n');
  process.exit(1);
}
