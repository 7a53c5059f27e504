// tools/call round trip of `echo hi` from the same MCP SDK client, in the same run: luxec mcp's
// exec_command against @wonderwhy-er/desktop-commander's start_process. Both servers run with
// the same environment (a scratch HOME, so a login shell reads the same profile; telemetry and
// remote feature flags of desktop-commander off) and in the same working directory; calls
// alternate between them (the order flips every round) and medians are compared.
//   node bench.mjs [ROUNDS] [LUXEC]
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = dirname(fileURLToPath(import.meta.url));
const rounds = Number(process.argv[2] ?? 40);
const luxec = process.argv[3] ?? join(here, '../../build/bin/luxec');
const pause = Number(process.env.BENCH_PAUSE_MS ?? 100);
const require = createRequire(import.meta.url);
const dcEntry = join(dirname(require.resolve('@wonderwhy-er/desktop-commander/package.json')),
  'dist/index.js');

const scratch = mkdtempSync(join(tmpdir(), 'luxec-mcp-bench-'));
const home = join(scratch, 'home');
const work = join(scratch, 'work');
mkdirSync(join(home, '.claude-server-commander'), { recursive: true });
mkdirSync(work);
// an existing config: no first-run onboarding (no browser), no telemetry
writeFileSync(join(home, '.claude-server-commander', 'config.json'), JSON.stringify({
  telemetryEnabled: false, welcomeOnboardingEligible: false, pendingWelcomeOnboarding: false,
}));
const env = {
  HOME: home, PATH: process.env.PATH, SHELL: '/bin/bash', USER: process.env.USER ?? 'root',
  LANG: 'C.UTF-8', TMPDIR: process.env.TMPDIR ?? '/tmp',
  DESKTOP_COMMANDER_DISABLE_TELEMETRY: '1',
  DC_FLAG_URL: 'http://127.0.0.1:9/flags.json', // refused at once: no request leaves the host
};

async function connect(name, command, args) {
  const transport = new StdioClientTransport({ command, args, env, cwd: work, stderr: 'pipe' });
  transport.stderr.on('data', () => {});
  const client = new Client({ name: 'luxec-bench', version: '1.0.0' });
  await client.connect(transport);
  return { name, client };
}

const servers = {
  luxec: await connect('luxec', luxec, ['mcp']),
  dc: await connect('desktop-commander', process.execPath, [dcEntry]),
};

const calls = {
  luxec: c => c.callTool({ name: 'exec_command', arguments: { cmd: 'echo hi' } }),
  dc: c => c.callTool({ name: 'start_process',
    arguments: { command: 'echo hi', timeout_ms: 10000 } }),
};

async function once(key) {
  const t0 = process.hrtime.bigint();
  const r = await calls[key](servers[key].client);
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const text = r.content?.[0]?.text ?? '';
  if (r.isError || !/\bhi\b/.test(text)) {
    throw new Error(`${key}: unexpected result: ${JSON.stringify(r).slice(0, 400)}`);
  }
  return ms;
}

const samples = { luxec: [], dc: [] };
try {
  for (const key of ['luxec', 'dc']) for (let i = 0; i < 3; i++) await once(key); // warm up
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? ['dc', 'luxec'] : ['luxec', 'dc'];
    for (const key of order) {
      // let whatever the previous call left running (either server's bookkeeping) settle
      await new Promise(resolve => setTimeout(resolve, pause));
      samples[key].push(await once(key));
    }
  }
} finally {
  for (const s of Object.values(servers)) await s.client.close().catch(() => {});
  rmSync(scratch, { recursive: true, force: true });
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  const i = (s.length - 1) * q;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.ceil(i)] - s[lo]) * (i - lo);
};
const row = (name, xs) => `${name.padEnd(34)} ${quantile(xs, 0.5).toFixed(2).padStart(9)} ms` +
  `   p10 ${quantile(xs, 0.1).toFixed(2).padStart(8)}   p90 ${quantile(xs, 0.9).toFixed(2)
    .padStart(8)}`;
const ratio = quantile(samples.luxec, 0.5) / quantile(samples.dc, 0.5);
console.log(`bench: tools/call round trip of \`echo hi\`, ${rounds} rounds each, alternating`);
console.log(row('luxec exec_command', samples.luxec));
console.log(row('desktop-commander start_process', samples.dc));
console.log(`ratio luxec/desktop-commander (medians): ${ratio.toFixed(3)}x   target <= 0.25x   ` +
  (ratio <= 0.25 ? 'PASS' : 'MISS'));
console.log(`luxec_ms=${quantile(samples.luxec, 0.5).toFixed(3)} ` +
  `dc_ms=${quantile(samples.dc, 0.5).toFixed(3)} ratio=${ratio.toFixed(4)}`);
