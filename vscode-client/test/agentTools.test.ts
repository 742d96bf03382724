/** The agent tools: their registration against the package.json contributions, the
 * confirmation before a job, and calls through the MCP client to a stand-in server
 * process (a real child process speaking newline-delimited JSON-RPC). */
import * as assert from 'assert';
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import { AGENT_TOOLS, McpLaunch, mcpLaunch, prepare, registerAgentTools, REVIEW } from '../src/agentTools';
import { ClientCommands } from '../src/constants';
import { CancelSource } from '../src/flows';
import { McpCancelled, McpClient } from '../src/mcpClient';
import { flush } from './fakes';
import { CancellationError, lmTools, MarkdownString, stub } from './stubs/vscode';

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));

// A stand-in for `kernelband mcp`: logs what it receives, answers initialize and tools/call.
const FAKE_SERVER = `
const fs = require('fs');
let buf = '';
const send = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
process.stdin.setEncoding('utf8');
process.stdin.on('end', () => process.exit(0));
process.stdin.on('data', (chunk) => {
  buf += chunk;
  let i;
  while ((i = buf.indexOf('\\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (!line.trim()) continue;
    fs.appendFileSync(process.env.FAKE_LOG, line + '\\n');
    const m = JSON.parse(line);
    if (m.method === 'initialize') {
      send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: m.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'fake', version: '0' } } });
    } else if (m.method === 'tools/call') {
      const { name, arguments: args } = m.params;
      const token = m.params._meta && m.params._meta.progressToken;
      if (token) send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2, message: 'half way' } });
      if (args.file === 'slow.py') continue;
      if (args.file === 'bad.py') {
        send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'file bad.py: outside the workspace root; refused' }], isError: true } });
        continue;
      }
      if (args.file === 'die.py') { process.stderr.write('fatal: something broke\\n'); process.exit(3); }
      const structured = name === 'optimize_kernel'
        ? { status: 'verified_correct', kernel: 'axpy_kernel', file: 'add_scale.py', diff: '--- a/add_scale.py\\n+++ b/add_scale.py\\n' }
        : { tool: name, args };
      send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: JSON.stringify({ tool: name, args }) }], structuredContent: structured } });
    }
  }
});
`;

function received(log: string): { method?: string; params?: Record<string, unknown>; id?: number }[] {
  return fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) {
      throw new Error('timed out waiting');
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('agent tools', () => {
  let dir: string;
  let log: string;
  let lines: string[];
  let launches: McpLaunch[];
  let registration: { dispose(): void } | undefined;

  const spawnFake = (launch: McpLaunch) => {
    launches.push(launch);
    return spawn(process.execPath, [path.join(dir, 'fake.js')], { env: { ...process.env, FAKE_LOG: log }, stdio: ['pipe', 'pipe', 'pipe'] });
  };

  beforeEach(() => {
    stub.reset();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kb-agent-'));
    fs.writeFileSync(path.join(dir, 'fake.js'), FAKE_SERVER);
    log = path.join(dir, 'received.jsonl');
    lines = [];
    launches = [];
    registration = registerAgentTools({
      launch: async () => ({ command: 'python3', args: ['-m', 'kernelband'], env: {}, root: '/ws' }),
      log: (l) => lines.push(l),
      version: '0.1.0',
      spawn: spawnFake,
    });
  });

  afterEach(() => {
    registration?.dispose();
    registration = undefined;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const invoke = (name: string, input: Record<string, unknown>, token = new CancelSource().token) =>
    lmTools.get(name).invoke({ input, toolInvocationToken: undefined }, token);

  it('registers exactly the tools package.json contributes, and unregisters them on dispose', () => {
    const contributed = pkg.contributes.languageModelTools.map((t: { name: string }) => t.name).sort();
    assert.deepStrictEqual([...lmTools.keys()].sort(), contributed);
    assert.deepStrictEqual(AGENT_TOOLS.map((t) => t.name).sort(), contributed);
    for (const t of pkg.contributes.languageModelTools) {
      assert.ok(t.modelDescription && t.inputSchema && t.inputSchema.type === 'object', t.name);
    }
    assert.ok(/^\^1\.(9[5-9]|\d{3})/.test(pkg.engines.vscode), 'languageModelTools need VS Code 1.95');
    registration?.dispose();
    registration = undefined;
    assert.strictEqual(lmTools.size, 0);
  });

  it('asks before a job runs (check, profile, optimize), not before a listing', () => {
    for (const spec of AGENT_TOOLS) {
      const p = prepare(spec, { file: 'add_scale.py', kernel: 'axpy_kernel', budget: 4 });
      assert.match(String(p.invocationMessage), /axpy_kernel/);
      if (spec.job) {
        assert.ok(p.confirmationMessages, spec.name);
        const message = (p.confirmationMessages!.message as unknown as MarkdownString).value;
        assert.match(message, /GPU/);
        assert.match(message, /Nothing is written to your files/);
        assert.match(p.confirmationMessages!.title, /axpy_kernel/);
      } else {
        assert.strictEqual(p.confirmationMessages, undefined, spec.name);
      }
    }
    const optimize = AGENT_TOOLS.find((t) => t.mcpTool === 'optimize_kernel')!;
    assert.match((prepare(optimize, { file: 'a.py', budget: 4 }).confirmationMessages!.message as unknown as MarkdownString).value, /budget of 4/);
  });

  it('calls the MCP server: handshake once, the arguments as given, progress to the output', async () => {
    const result = await invoke('kernelband_check_variant', { file: 'add_scale.py', variant_path: 'v.py' });
    assert.deepStrictEqual(JSON.parse(result.content[0].value), { tool: 'check_variant', args: { file: 'add_scale.py', variant_path: 'v.py' } });
    await invoke('kernelband_list_kernels', { path: '.' });
    const msgs = received(log);
    assert.deepStrictEqual(msgs.map((m) => m.method), ['initialize', 'notifications/initialized', 'tools/call', 'tools/call']);
    assert.strictEqual(launches.length, 1, 'one server for every call');
    assert.ok(lines.some((l) => l.includes('check_variant: half way (1/2)')), lines.join('\n'));
  });

  it('a tool error reaches the model as an error with the server\'s reason', async () => {
    await assert.rejects(invoke('kernelband_profile_kernel', { file: 'bad.py' }), /outside the workspace root/);
  });

  it('cancelling the chat request cancels the MCP request (the server is told)', async () => {
    const source = new CancelSource();
    const call = invoke('kernelband_optimize_kernel', { file: 'slow.py' }, source.token);
    await until(() => received(log).some((m) => m.method === 'tools/call'));
    source.cancel();
    await assert.rejects(call, (e: unknown) => e instanceof CancellationError);
    await until(() => received(log).some((m) => m.method === 'notifications/cancelled'));
    const calls = received(log).filter((m) => m.method === 'tools/call');
    const cancel = received(log).find((m) => m.method === 'notifications/cancelled')!;
    assert.strictEqual(cancel.params!.requestId, calls[0].id);
  });

  it('a variant found by optimize links to the review (evidence) view', async () => {
    stub.messageResponder = (call) => (call.items.includes(REVIEW) ? REVIEW : undefined);
    const result = await invoke('kernelband_optimize_kernel', { file: 'add_scale.py', budget: 2 });
    assert.match(result.content[0].value, /KernelBand: Apply found variant/);
    await until(() => stub.executed.some((e) => e.command === ClientCommands.applyVariant));
    const review = stub.executed.find((e) => e.command === ClientCommands.applyVariant)!;
    assert.deepStrictEqual(review.args, [{ uri: 'file:///ws/add_scale.py', kernel: 'axpy_kernel' }]);
    const offer = stub.messages.find((m) => m.items.includes(REVIEW))!;
    assert.match(offer.message, /correct variant \(speed needs a GPU\) of axpy_kernel/);
  });

  it('a server that dies fails the call with its last words, and the next call starts a new one', async () => {
    await assert.rejects(invoke('kernelband_check_variant', { file: 'die.py' }), /fatal: something broke|exited/);
    await flush();
    await invoke('kernelband_list_kernels', { path: '.' });
    assert.strictEqual(launches.length, 2);
  });

  it('starts kernelband mcp with the language server\'s interpreter, in the workspace folder', () => {
    const launch = mcpLaunch({ command: '/venv/bin/python', interpreter: { args: ['-X', 'utf8'] }, env: { A: '1' }, cwd: '/ws' });
    assert.deepStrictEqual(launch, { command: '/venv/bin/python', args: ['-X', 'utf8', '-m', 'kernelband'], env: { A: '1' }, root: '/ws' });
    assert.throws(() => mcpLaunch({ command: 'python3', interpreter: { args: [] }, env: {} }), /open workspace folder/);
  });

  it('the MCP client rejects a call cancelled before it was sent, without sending it', async () => {
    const proc = spawnFake({ command: '', args: [], env: {}, root: '/ws' });
    const client = new McpClient(proc);
    try {
      await client.initialize('0');
      const source = new CancelSource();
      source.cancel();
      await assert.rejects(client.callTool('list_kernels', {}, { cancel: source.token }), (e: unknown) => e instanceof McpCancelled);
      assert.ok(!received(log).some((m) => m.method === 'tools/call'));
    } finally {
      client.dispose();
    }
  });
});
