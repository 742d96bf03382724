/** The controller against the `vscode` stub and a fake language server. */
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';

import { ClientCommands, PROPOSAL_SCHEME, SECRET_API_KEY, ServerCommands } from '../src/constants';
import { Controller, ControllerDeps, LaunchSpec, ServerHandle, ServerHooks } from '../src/controller';
import { Disposable, ExecuteOptions, WorkDoneValue } from '../src/flows';
import { Interpreter, ProbeOutcome } from '../src/interpreter';
import { JobEventParams } from '../src/jobs';
import { flush } from './fakes';
import { FakeOutputChannel, makeContext, stub, Uri, workspace } from './stubs/vscode';

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));

/** The uri of a review's proposal document (what the diff editor's title-bar commands receive). */
function proposalUri(side: 'original' | 'proposed', kernel: string, src = DOC_URI): Uri {
  return Uri.from({ scheme: PROPOSAL_SCHEME, path: '/add_scale.py', query: new URLSearchParams({ side, kernel, src }).toString() });
}
const DOC_URI = 'file:///ws/add_scale.py';
const DOC = `import triton

@triton.jit
def axpy_kernel(x_ptr, n):
    pass


@triton.jit
def other_kernel(x_ptr):
    pass
`;

class FakeServer implements ServerHandle {
  running = false;
  stopped = false;
  calls: { command: string; args: Record<string, unknown>; opts?: ExecuteOptions }[] = [];
  replies: Record<string, unknown> = {};
  startError: Error | undefined;
  private jobListeners: ((p: JobEventParams) => void)[] = [];

  constructor(
    readonly spec: LaunchSpec,
    readonly hooks: ServerHooks,
  ) {}

  async start(): Promise<void> {
    if (this.startError) {
      throw this.startError;
    }
    this.running = true;
  }
  async stop(): Promise<void> {
    this.running = false;
    this.stopped = true;
  }
  async execute(command: string, args: Record<string, unknown>, opts?: ExecuteOptions): Promise<unknown> {
    this.calls.push({ command, args, opts });
    return this.replies[command];
  }
  onJobEvent(listener: (p: JobEventParams) => void): Disposable {
    this.jobListeners.push(listener);
    return { dispose: () => undefined };
  }
  onWorkDoneProgress(_token: string, _listener: (v: WorkDoneValue) => void): Disposable {
    return { dispose: () => undefined };
  }
  notify(jobId: string, kernel: string, event: Record<string, unknown>): void {
    for (const l of this.jobListeners) {
      l({ jobId, uri: DOC_URI, kernel, event: { type: String(event.type), ...event } });
    }
  }
}

interface Harness {
  controller: Controller;
  context: ReturnType<typeof makeContext>;
  servers: FakeServer[];
  probes: Interpreter[];
  output: FakeOutputChannel;
}

async function activate(opts: { probe?: ProbeOutcome; secret?: string; startError?: Error } = {}): Promise<Harness> {
  const context = makeContext();
  if (opts.secret) {
    context.secretValues.set(SECRET_API_KEY, opts.secret);
  }
  const servers: FakeServer[] = [];
  const probes: Interpreter[] = [];
  const deps: ControllerDeps = {
    createServer: (spec, _output, hooks) => {
      const s = new FakeServer(spec, hooks);
      s.startError = opts.startError;
      servers.push(s);
      return s;
    },
    probe: async (interp) => {
      probes.push(interp);
      return opts.probe ?? { code: 0 };
    },
    env: { PATH: '/usr/bin' },
    platform: 'linux',
    homeDir: '/home/me',
    finishedStatusMs: 20,
  };
  const controller = new Controller(context, deps);
  await controller.activate();
  return { controller, context, servers, probes, output: stub.outputChannels[0] };
}

describe('controller (vscode stub)', () => {
  beforeEach(() => {
    stub.reset();
    workspace.workspaceFolders = [{ uri: Uri.file('/ws'), name: 'ws', index: 0 }];
  });

  it('registers every contributed command, none of them a server command id', async () => {
    const { controller, servers } = await activate();
    const contributed: string[] = pkg.contributes.commands.map((c: { command: string }) => c.command);
    assert.deepStrictEqual([...contributed].sort(), Object.values(ClientCommands).sort());
    for (const id of contributed) {
      assert.ok(stub.commands.has(id), `${id} is not registered`);
      assert.ok(!(Object.values(ServerCommands) as string[]).includes(id), `${id} would collide with the server's command`);
    }
    assert.ok(stub.contentProviders.has(PROPOSAL_SCHEME));
    await controller.shutdown();
    assert.strictEqual(stub.commands.size, 0, 'shutdown unregisters the commands');
    assert.strictEqual(servers[0].stopped, true, 'and stops the server');
  });

  it('starts `python -m kernelband_lsp` from kernelband.pythonPath with settings and the stored key in the env only', async () => {
    stub.configuration = { pythonPath: '${workspaceFolder}/.venv/bin/python', 'budget.evaluations': 32, generator: 'openai' };
    const { servers, probes, output } = await activate({ secret: 'sk-secret-123' });
    assert.strictEqual(servers.length, 1);
    const spec = servers[0].spec;
    assert.strictEqual(spec.command, '/ws/.venv/bin/python');
    assert.deepStrictEqual(spec.args, ['-m', 'kernelband_lsp']);
    assert.strictEqual(spec.cwd, '/ws');
    assert.strictEqual(spec.env.KERNELBAND_API_KEY, 'sk-secret-123');
    assert.strictEqual(spec.env.PATH, '/usr/bin');
    assert.deepStrictEqual((spec.initializationOptions.budget as { evaluations: number }).evaluations, 32);
    assert.strictEqual(spec.initializationOptions.generator, 'openai');
    assert.ok(!JSON.stringify(spec.initializationOptions).includes('sk-secret'), 'the key is not in initializationOptions');
    assert.strictEqual(probes[0].command, '/ws/.venv/bin/python');
    assert.ok(servers[0].running);
    assert.match(output.text, /Starting the language server: \/ws\/.venv\/bin\/python -m kernelband_lsp \[interpreter from setting\] \(KERNELBAND_API_KEY set\)/);
    assert.ok(!output.text.includes('sk-secret-123'), 'the key never reaches the output');
  });

  it("asks the Python extension when pythonPath is empty", async () => {
    stub.extensions.set('ms-python.python', {
      isActive: true,
      exports: { settings: { getExecutionDetails: () => ({ execCommand: ['/conda/envs/t/bin/python'] }) } },
    });
    const { servers } = await activate();
    assert.strictEqual(servers[0].spec.command, '/conda/envs/t/bin/python');
    assert.strictEqual(servers[0].spec.interpreter.source, 'python-extension');
  });

  it('a missing server module is reported with a fix, and no client is started', async () => {
    const { servers } = await activate({ probe: { code: 3 } });
    assert.strictEqual(servers.length, 0);
    const err = stub.messages.find((m) => m.level === 'error');
    assert.match(err?.message ?? '', /not installed in "python3".*pip install "kernelband\[lsp\]"/);
    assert.deepStrictEqual(err?.items, ['Open Settings', 'Show Output']);
  });

  it('a failed start is reported and commands then explain that the server is down', async () => {
    const { controller } = await activate({ startError: new Error('initialize failed') });
    assert.strictEqual(controller.isServerRunning, false);
    assert.ok(stub.messages.some((m) => m.level === 'error' && /failed to start: initialize failed/.test(m.message)));
    stub.messages = [];
    stub.openEditor(DOC_URI, DOC, 3);
    await stub.commands.get(ClientCommands.optimize)!();
    assert.match(stub.messages.find((m) => m.level === 'error')?.message ?? '', /failed: the KernelBand language server is not running/);
  });

  it('job events drive the output channel and the status bar (including background jobs)', async () => {
    const { servers, output } = await activate();
    const bar = stub.statusBarItems[0];
    assert.strictEqual(bar.visible, false);
    servers[0].notify('bg1', 'axpy_kernel', { type: 'started', budget: { evaluations: 16 } });
    servers[0].notify('bg1', 'axpy_kernel', { type: 'progress', done: 4, total: 16, best_speedup: 1.12 });
    assert.strictEqual(bar.visible, true);
    assert.strictEqual(bar.text, '$(loading~spin) KernelBand: axpy_kernel 4/16 · 1.12×');
    assert.strictEqual(bar.command, ClientCommands.showOutput);
    assert.match(output.text, /axpy_kernel \(job bg1\) 4\/16 evaluated · best 1.12×/);
    servers[0].notify('bg1', 'axpy_kernel', { type: 'result', result: { status: 'improved', speedup: 1.2 } });
    assert.strictEqual(bar.text, '$(check) KernelBand: axpy_kernel 1.20×');
    await new Promise((r) => setTimeout(r, 40));
    assert.strictEqual(bar.visible, false, 'hidden a while after the job ended');
  });

  it('palette Optimize picks the kernel under the cursor and ends in the diff review', async () => {
    const { servers } = await activate();
    const server = servers[0];
    server.replies[ServerCommands.optimize] = { jobId: 'j1', status: 'improved', speedup: 1.5, baseline_ms: 1, best_ms: 0.66 };
    server.replies[ServerCommands.proposedEdit] = { original: 'a\n', proposed: 'b\n', diff: '-a\n+b\n', version: 1 };
    server.replies[ServerCommands.applyVariant] = { applied: true, message: '' };
    stub.messageResponder = (call) => (call.message.startsWith('KernelBand: review the variant') ? 'Apply' : undefined);
    stub.openEditor(DOC_URI, DOC, 9); // inside other_kernel

    await stub.commands.get(ClientCommands.optimize)!();
    assert.deepStrictEqual(
      server.calls.map((c) => [c.command, c.args]),
      [
        [ServerCommands.optimize, { uri: DOC_URI, kernel: 'other_kernel' }],
        [ServerCommands.proposedEdit, { uri: DOC_URI, kernel: 'other_kernel' }],
        [ServerCommands.applyVariant, { uri: DOC_URI, kernel: 'other_kernel' }],
      ],
    );
    assert.strictEqual(stub.progressRuns[0].options.cancellable, true);
    const diff = stub.executed.find((e) => e.command === 'vscode.diff');
    assert.ok(diff, 'vscode.diff was opened');
    const [left, right, title] = diff!.args as [Uri, Uri, string];
    assert.strictEqual(left.scheme, PROPOSAL_SCHEME);
    assert.strictEqual(right.path, '/add_scale.py');
    assert.strictEqual(title, 'add_scale.py · other_kernel: current ↔ KernelBand (1.50×)');
    // no modal over the diff: a notification asks, and the diff stays readable
    assert.ok(!stub.messages.some((m) => m.options?.modal), JSON.stringify(stub.messages));
    const ask = stub.messages.find((m) => m.message.startsWith('KernelBand: review the variant'));
    assert.deepStrictEqual(ask?.items, ['Apply', 'Discard']);
  });

  it('the proposal documents serve the texts while the diff is open', async () => {
    const { controller } = await activate();
    const deps = controller.flowDeps();
    const target = { uri: DOC_URI, kernel: 'axpy_kernel' };
    await deps.showDiff(target, { original: 'old text', proposed: 'new text' }, 't', '# evidence\n');
    const [left, right] = stub.executed.find((e) => e.command === 'vscode.diff')!.args as [Uri, Uri];
    const provider = stub.contentProviders.get(PROPOSAL_SCHEME);
    assert.strictEqual(provider.provideTextDocumentContent(left), 'old text');
    assert.strictEqual(provider.provideTextDocumentContent(right), 'new text');
    // the evidence beside the diff, a markdown document; the diff keeps the focus (its title bar decides)
    const shown = stub.shownDocuments.find((d) => d.uri.startsWith(`${PROPOSAL_SCHEME}:`))!;
    assert.deepStrictEqual(shown.options, { viewColumn: -2, preserveFocus: true, preview: true });
    const evidence = Uri.parse(shown.uri);
    assert.strictEqual(provider.provideTextDocumentContent(evidence), '# evidence\n');
    stub.tabs.push({ input: { original: left, modified: right } }, { input: { uri: Uri.parse(DOC_URI) } },
      { label: 'KernelBand evidence axpy_kernel.md', input: { uri: evidence } }, { label: 'README.md', input: {} });
    await deps.closeDiff(target);
    assert.strictEqual(stub.closedTabs.length, 2, 'the diff and the evidence tabs are closed, not the others');
    assert.match(provider.provideTextDocumentContent(right), /no longer available/);
  });

  it("code lenses' server commands: optimize/applyVariant get the client UI, others pass through", async () => {
    const { servers } = await activate();
    const server = servers[0];
    server.replies[ServerCommands.optimize] = { jobId: 'j', status: 'no_improvement' };
    const passed: string[] = [];
    const next = async (command: string) => {
      passed.push(command);
      return 'server-result';
    };
    await server.hooks.intercept(ServerCommands.optimize, [{ uri: DOC_URI, kernel: 'axpy_kernel' }], next);
    assert.deepStrictEqual(passed, []);
    assert.deepStrictEqual(server.calls[0].args, { uri: DOC_URI, kernel: 'axpy_kernel' });
    assert.strictEqual(stub.progressRuns.length, 1);
    assert.strictEqual(await server.hooks.intercept(ServerCommands.createHarness, [{ uri: DOC_URI, kernel: 'axpy_kernel' }], next), 'server-result');
    assert.strictEqual(await server.hooks.intercept(ServerCommands.cancel, [{ jobId: 'j' }], next), 'server-result');
    assert.deepStrictEqual(passed, [ServerCommands.createHarness, ServerCommands.cancel]);
  });

  it("the found-variant quick fix runs the diff review instead of applying its edit", async () => {
    const { servers } = await activate();
    const fix = { title: 'Apply found variant of axpy_kernel: 1.30× faster (KernelBand)', kind: { value: 'quickfix' }, edit: { changes: {} }, data: { kernel: 'axpy_kernel', uri: DOC_URI } };
    const harness = { title: 'Create harness for axpy_kernel (KernelBand)', kind: { value: 'quickfix' }, edit: { changes: {} } };
    const bare = { title: 'Optimize', command: 'kernelband.optimize', arguments: [] };
    const out = servers[0].hooks.codeActions([fix, harness, bare] as object[], DOC_URI) as Record<string, unknown>[];
    assert.strictEqual(out[0].edit, undefined);
    assert.deepStrictEqual(out[0].command, { title: fix.title, command: ClientCommands.applyVariant, arguments: [{ uri: DOC_URI, kernel: 'axpy_kernel' }] });
    assert.ok(out[1].edit, 'other quick fixes keep their edit');
    assert.strictEqual(out[2].command, 'kernelband.optimize');

    servers[0].replies[ServerCommands.proposedEdit] = { original: 'a', proposed: 'b' };
    stub.messageResponder = () => undefined; // the notification is dismissed: nothing is decided
    const cmd = out[0].command as { command: string; arguments: unknown[] };
    const review = stub.commands.get(cmd.command)!(...cmd.arguments);
    await flush(10);
    assert.deepStrictEqual(servers[0].calls.map((c) => c.command), [ServerCommands.proposedEdit]);
    assert.ok(stub.executed.some((e) => e.command === 'vscode.diff'));
    await stub.commands.get(ClientCommands.discardReviewed)!(proposalUri('proposed', 'axpy_kernel'));
    assert.strictEqual(await review, 'discarded');
    assert.deepStrictEqual(servers[0].calls.map((c) => c.command), [ServerCommands.proposedEdit]);
  });

  it('Set API key stores the secret and restarts the server with it', async () => {
    const { servers, context, output } = await activate();
    assert.strictEqual(servers[0].spec.env.KERNELBAND_API_KEY, undefined);
    stub.inputBoxAnswers = ['  sk-new-key-456 '];
    await stub.commands.get(ClientCommands.setApiKey)!();
    assert.strictEqual(stub.inputBoxOptions[0].password, true);
    assert.strictEqual(context.secretValues.get(SECRET_API_KEY), 'sk-new-key-456');
    assert.strictEqual(servers.length, 2);
    assert.ok(servers[0].stopped);
    assert.strictEqual(servers[1].spec.env.KERNELBAND_API_KEY, 'sk-new-key-456');
    assert.ok(!output.text.includes('sk-new-key-456'));
    assert.ok(stub.messages.some((m) => /API key saved\. It is used when kernelband\.generator is "openai"\./.test(m.message)));

    stub.inputBoxAnswers = [''];
    await stub.commands.get(ClientCommands.setApiKey)!();
    assert.strictEqual(context.secretValues.has(SECRET_API_KEY), false);
    assert.strictEqual(servers[2].spec.env.KERNELBAND_API_KEY, undefined);

    stub.inputBoxAnswers = [undefined];
    await stub.commands.get(ClientCommands.setApiKey)!();
    assert.strictEqual(servers.length, 3, 'Escape changes nothing');
  });

  it('changing kernelband.pythonPath restarts the server; other settings do not', async () => {
    const { servers } = await activate();
    stub.changeConfiguration({ 'budget.evaluations': 4 });
    await flush();
    assert.strictEqual(servers.length, 1);
    stub.changeConfiguration({ pythonPath: '/opt/py/bin/python' });
    await flush(10);
    assert.strictEqual(servers.length, 2);
    assert.strictEqual(servers[1].spec.command, '/opt/py/bin/python');
  });

  it('Cancel job cancels the running job by id', async () => {
    const { servers } = await activate();
    servers[0].replies[ServerCommands.cancel] = { cancelled: ['bg1'] };
    servers[0].notify('bg1', 'axpy_kernel', { type: 'started' });
    await stub.commands.get(ClientCommands.cancel)!();
    assert.deepStrictEqual(servers[0].calls.map((c) => [c.command, c.args]), [[ServerCommands.cancel, { jobId: 'bg1' }]]);
  });

  it('Create harness forwards the kernel under the cursor', async () => {
    const { servers } = await activate();
    stub.openEditor(DOC_URI, DOC, 4);
    await stub.commands.get(ClientCommands.createHarness)!();
    assert.deepStrictEqual(servers[0].calls.map((c) => [c.command, c.args]), [[ServerCommands.createHarness, { uri: DOC_URI, kernel: 'axpy_kernel' }]]);
  });

  it('Create harness reports a refused edit', async () => {
    const { servers } = await activate();
    servers[0].replies[ServerCommands.createHarness] = { applied: false, message: 'the file does not parse' };
    stub.openEditor(DOC_URI, DOC, 4);
    await stub.commands.get(ClientCommands.createHarness)!();
    assert.ok(stub.messages.some((m) => m.level === 'warn' && /no harness stub inserted for axpy_kernel: the file does not parse/.test(m.message)));
  });

  it('asks which kernel when the cursor is on none, and needs a Python editor', async () => {
    const { servers } = await activate();
    servers[0].replies[ServerCommands.profile] = { jobId: 'p', profile: { diagnosis: { bottleneck: 'latency-bound' } } };
    stub.openEditor(DOC_URI, DOC, 0);
    let offered: string[] = [];
    stub.quickPickAnswer = (items) => {
      offered = items;
      return 'axpy_kernel';
    };
    await stub.commands.get(ClientCommands.profile)!();
    assert.deepStrictEqual(offered, ['axpy_kernel', 'other_kernel']);
    assert.deepStrictEqual(servers[0].calls[0].args, { uri: DOC_URI, kernel: 'axpy_kernel' });

    stub.openEditor('file:///ws/notes.md', '# hi', 0, 'markdown');
    await stub.commands.get(ClientCommands.profile)!();
    assert.ok(stub.messages.some((m) => m.level === 'error' && /open a Python file/.test(m.message)));
    assert.strictEqual(servers[0].calls.length, 1);
  });

  it('issue 14 #2: the diff is not a preview tab, and closing it brings the user\'s file back', async () => {
    const { servers } = await activate();
    const server = servers[0];
    server.replies[ServerCommands.proposedEdit] = { original: 'a\n', proposed: 'b\n', diff: '-a\n+b\n', version: 1, speedup: 1.5 };
    stub.messageResponder = (call) => (call.message.startsWith('KernelBand: review the variant') ? 'Discard' : undefined);
    stub.openEditor(DOC_URI, DOC, 3);
    await stub.commands.get(ClientCommands.applyVariant)!();
    const diff = stub.executed.find((e) => e.command === 'vscode.diff');
    assert.ok(diff, 'vscode.diff was opened');
    assert.strictEqual((diff!.args[3] as { preview?: boolean }).preview, false, 'a preview diff replaces the preview tab of the file');
    const files = stub.shownDocuments.filter((d) => !d.uri.startsWith(`${PROPOSAL_SCHEME}:`));
    assert.deepStrictEqual(files.map((d) => d.uri), [DOC_URI], 'the file is shown again after Discard');
    assert.strictEqual(files[0].options.preview, false);
  });

  it('issue 14 #6: the palette Apply of a stored variant shows its speedup and evidence', async () => {
    const { servers } = await activate();
    const server = servers[0];
    server.replies[ServerCommands.proposedEdit] = {
      original: 'a\n', proposed: 'b\n', diff: '-a\n+b\n', version: 1, speedup: 4.14, speedup_ci: [3.9, 4.3], interpreted: false,
      evidence: [{ label: 'GPU', value: 'NVIDIA H100' }, { label: 'Timing (paired re-measurement)', value: '0.64 ms → 0.15 ms' }],
    };
    stub.messageResponder = () => undefined;
    stub.openEditor(DOC_URI, DOC, 3);
    const review = stub.commands.get(ClientCommands.applyVariant)!();
    await flush(10);
    const diff = stub.executed.find((e) => e.command === 'vscode.diff');
    assert.match(diff!.args[2] as string, /KernelBand \(4\.14×, 95% CI 3\.90×–4\.30×\)/);
    const evidence = Uri.parse(stub.shownDocuments.find((d) => d.uri.startsWith(`${PROPOSAL_SCHEME}:`))!.uri);
    const text = stub.contentProviders.get(PROPOSAL_SCHEME).provideTextDocumentContent(evidence) as string;
    assert.match(text, /\| GPU \| NVIDIA H100 \|/);
    assert.ok(!stub.messages.some((m) => m.options?.modal));
    await stub.commands.get(ClientCommands.discardReviewed)!(proposalUri('proposed', 'axpy_kernel'));
    assert.strictEqual(await review, 'discarded');
  });

  it('an interpreted result is never offered as a speedup: no review, "correct; speed needs a GPU"', async () => {
    const { servers } = await activate();
    const server = servers[0];
    server.replies[ServerCommands.optimize] = { jobId: 'j1', status: 'improved', speedup: 1.43, interpreted: true, baseline_ms: 2, best_ms: 1.4 };
    stub.openEditor(DOC_URI, DOC, 3);
    await stub.commands.get(ClientCommands.optimize)!();
    assert.deepStrictEqual(server.calls.map((c) => c.command), [ServerCommands.optimize]);
    assert.ok(!stub.executed.find((e) => e.command === 'vscode.diff'));
    const info = stub.messages.find((m) => /correct; speed needs a GPU/.test(m.message));
    assert.ok(info, JSON.stringify(stub.messages));
    assert.ok(!/1\.43/.test(info!.message));
  });

  it('a stored interpreted variant opened from the palette says "speed needs a GPU", not a speedup', async () => {
    const { servers } = await activate();
    servers[0].replies[ServerCommands.proposedEdit] = { original: 'a\n', proposed: 'b\n', version: 1, speedup: 1.43, interpreted: true };
    stub.messageResponder = (call) => (call.message.startsWith('KernelBand: review the variant') ? 'Discard' : undefined);
    stub.openEditor(DOC_URI, DOC, 3);
    await stub.commands.get(ClientCommands.applyVariant)!();
    const title = stub.executed.find((e) => e.command === 'vscode.diff')!.args[2] as string;
    assert.match(title, /correct; speed needs a GPU/);
    assert.ok(!/1\.43/.test(title));
  });
});
