// The real MCP client (@modelcontextprotocol/sdk: Client + StreamableHTTPClientTransport)
// against `luxec mcp --listen http://…`, one scenario per run:
//   node http.mjs SCENARIO
// Environment: LUXEC_URL (the server's endpoint), LUXEC_CWD (its workspace, for the files a
// scenario uses to order its steps). Prints one JSON object (what the scenario saw) on
// stdout; the Lua spec (spec/mcp/http_spec.lua) makes the assertions. Exits 1 with {error} on
// a failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from
  '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import fs from 'node:fs';

const scenario = process.argv[2];
const url = new URL(process.env.LUXEC_URL);

async function connect() {
  const transport = new StreamableHTTPClientTransport(url);
  const client = new Client({ name: 'luxec-http-spec', version: '1.0.0' });
  const errors = [];
  client.onerror = e => errors.push(String(e));
  await client.connect(transport);
  return { client, transport, errors };
}

const text = r => r.structuredContent?.output ?? '';
const exec = (client, args) => client.callTool({ name: 'exec_command', arguments: args });
const write = (client, args) => client.callTool({ name: 'write_stdin', arguments: args });

const scenarios = {};

// The handshake, the tools, a command, and an interactive one driven with write_stdin.
scenarios.basic = async () => {
  const { client, transport, errors } = await connect();
  const tools = (await client.listTools()).tools.map(t => t.name);
  const echo = await exec(client, { cmd: 'echo over-http' });
  const cat = await exec(client, { cmd: 'cat', tty: true, yield_time_ms: 300 });
  const sid = cat.structuredContent?.session_id;
  const back = await write(client, { session_id: sid, chars: 'typed\n', yield_time_ms: 500 });
  const end = await write(client, { session_id: sid, chars: '\u0004', yield_time_ms: 2000 });
  const out = {
    sessionId: transport.sessionId, protocol: transport.protocolVersion,
    capabilities: client.getServerCapabilities(), tools, echo: text(echo),
    echoExit: echo.structuredContent?.exit_code, sid, back: back.structuredContent?.output,
    endExit: end.structuredContent?.exit_code, errors,
  };
  await transport.terminateSession();
  await client.close();
  return out;
};

// Two sessions whose calls wait for each other: A's command marks that it runs, then waits
// for a file that only B's command makes, and B's waits for A's mark; so both answers come
// only if B's call was served while A's was running. B sees none of A's processes.
scenarios.concurrent = async () => {
  const a = await connect();
  const b = await connect();
  const bg = await exec(a.client, { cmd: 'exec sleep 1000', yield_time_ms: 100 });
  const long = exec(a.client, {
    cmd: 'touch started; while [ ! -e flag ]; do sleep 0.05; done; echo A-done',
    yield_time_ms: 60000,
  });
  const bList = await b.client.callTool({ name: 'list_sessions', arguments: {} });
  const bCall = await exec(b.client, {
    cmd: 'while [ ! -e started ]; do sleep 0.05; done; touch flag && echo B-done',
    yield_time_ms: 60000,
  });
  const aCall = await long;
  const aList = await a.client.callTool({ name: 'list_sessions', arguments: {} });
  const out = {
    ids: [a.transport.sessionId, b.transport.sessionId], a: text(aCall), b: text(bCall),
    bgSession: bg.structuredContent?.session_id,
    aSessions: (aList.structuredContent?.sessions ?? []).map(s => s.session_id),
    bSessions: (bList.structuredContent?.sessions ?? []).map(s => s.session_id),
    errors: [...a.errors, ...b.errors],
  };
  await a.transport.terminateSession();
  await b.transport.terminateSession();
  await a.client.close();
  await b.client.close();
  return out;
};

// logging/setLevel, then a call: the server's log lines arrive as notifications/message.
scenarios.logging = async () => {
  const { client, transport, errors } = await connect();
  const logs = [];
  client.setNotificationHandler(LoggingMessageNotificationSchema, n => logs.push(n.params));
  const caps = client.getServerCapabilities();
  await client.setLoggingLevel('debug');
  await exec(client, { cmd: 'true' });
  let bad;
  try {
    await client.setLoggingLevel('loud');
  } catch (e) {
    bad = { code: e.code, message: e.message };
  }
  await transport.terminateSession();
  await client.close();
  return { logging: caps.logging, logs, bad, errors };
};

// A call with a progress token: its notifications/progress come on its POST's stream; the
// command waits for a file the client makes when the first one arrives.
scenarios.progress = async () => {
  const { client, transport, errors } = await connect();
  const progress = [];
  const r = await client.callTool(
    { name: 'exec_command', arguments: {
      cmd: 'while [ ! -e go ]; do sleep 0.05; done; echo went', yield_time_ms: 60000 } },
    undefined,
    { onprogress: p => {
      progress.push(p);
      if (progress.length === 1) fs.writeFileSync(`${process.env.LUXEC_CWD}/go`, '');
    }, timeout: 60000 });
  await transport.terminateSession();
  await client.close();
  return { output: text(r), progress: progress.length, first: progress[0], errors };
};

// A session with a process running; the client then ends the session (DELETE) or just goes
// away (LEAVE=1), and says the process's pid and the session id.
scenarios.start = async () => {
  const { client, transport, errors } = await connect();
  const r = await exec(client, { cmd: 'echo pid=$$; exec sleep 1000', yield_time_ms: 300 });
  const out = { sessionId: transport.sessionId, output: text(r), errors };
  if (!process.env.LEAVE) await transport.terminateSession();
  await client.close();
  return out;
};

const fn = scenarios[scenario];
if (!fn) {
  console.log(JSON.stringify({ error: `no scenario ${scenario}` }));
  process.exit(1);
}
try {
  console.log(JSON.stringify(await fn()));
  process.exit(0);
} catch (e) {
  console.log(JSON.stringify({ error: String(e && e.stack || e) }));
  process.exit(1);
}
