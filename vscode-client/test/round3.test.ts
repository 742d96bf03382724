/**
 * The editor, round 3 (VS Code side): no speed claim for interpreter times, review first
 * and decide after (no modal), a found CPU variant one click away, and no internal text.
 * The event streams are the ones a real engine wrote under the Triton interpreter
 * (tests/data/events at the repository root).
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';

import { ClientCommands, PROPOSAL_SCHEME, ServerCommands } from '../src/constants';
import { Controller, ControllerDeps, LaunchSpec, ServerHandle, ServerHooks } from '../src/controller';
import { Disposable, evidenceMarkdown, ExecuteOptions, REVIEW, WorkDoneValue } from '../src/flows';
import { Interpreter, ProbeOutcome } from '../src/interpreter';
import {
  describeEvent,
  finishedStatusText,
  formatLogLine,
  JobEventParams,
  JobTracker,
  resultSummary,
  statusBarText,
  statusBarTooltip,
} from '../src/jobs';
import { flush } from './fakes';
import { makeContext, stub, Uri } from './stubs/vscode';

const REPO = path.join(__dirname, '..', '..', '..');
const EVENTS = path.join(REPO, 'tests', 'data', 'events');
const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
/** A ratio ("48.23×", "1.5x") or a before -> after pair of times. */
const SPEED_CLAIM = /\d(?:\.\d+)?\s*[x×](?![a-z])|(?:ms|µs|\d s)\s*(?:→|->)/;
const DOC_URI = 'file:///ws/add_scale.py';
const DOC = 'import triton\n\n@triton.jit\ndef axpy_kernel(x_ptr, n):\n    pass\n';

function stream(name: string): Record<string, unknown>[] {
  return fs
    .readFileSync(path.join(EVENTS, name), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('defect 1: interpreter times are never shown as a speedup', () => {
  for (const name of ['interpreter_fresh.jsonl', 'interpreter_warm_start.jsonl']) {
    it(`${name}: progress, output, status bar and summary carry no ratio and no time pair (no server words)`, () => {
      const tracker = new JobTracker();
      const shown: string[] = [];
      for (const event of stream(name)) {
        const p: JobEventParams = { jobId: 'j1', uri: DOC_URI, kernel: 'axpy_kernel', event: { ...event, type: String(event.type) } };
        const job = tracker.update(p);
        shown.push(describeEvent(p.event).message ?? '', formatLogLine(p), statusBarText(tracker.running()) ?? '',
          statusBarTooltip(tracker.running()), finishedStatusText(job));
        if (event.type === 'result') {
          shown.push(resultSummary(event.result as never, 'axpy_kernel'));
        }
      }
      // the streams do carry big ratios (CPU times): they must not surface
      assert.ok(stream(name).some((e) => e.type === 'candidate' && (e.speedup as number) > 10));
      const bad = shown.filter((t) => SPEED_CLAIM.test(t));
      assert.deepStrictEqual(bad, []);
    });
  }

  it("with the server's words: its text and line are shown, and speedClaim false hides the ratio", () => {
    const tracker = new JobTracker();
    const base = { jobId: 'j1', uri: DOC_URI, kernel: 'axpy_kernel' };
    tracker.update({ ...base, event: { type: 'started', budget: { evaluations: 4 } }, text: 'started', line: 'optimizing: preparing…', speedClaim: true });
    const job = tracker.update({
      ...base,
      event: { type: 'progress', done: 3, total: 4, best_speedup: 48.23, best_ms: 10.9 }, // an older engine: no speed_claim on the event
      text: '3/4 evaluated',
      line: 'optimizing 3/4 evaluated',
      speedClaim: false,
    });
    assert.strictEqual(job.lastMessage, '3/4 evaluated');
    assert.strictEqual(statusBarText(tracker.running()), '$(loading~spin) KernelBand: axpy_kernel 3/4');
    const line = formatLogLine({ ...base, event: { type: 'candidate', index: 3, strategy: 'tiling', status: 'ok', time_ms: 29.1, speedup: 24.08 }, text: '#3 tiling: ok', speedClaim: false });
    assert.match(line, /#3 tiling: ok$/);
  });
});

describe('defect 3: review first, decide after', () => {
  it('Apply and Discard live in the diff editor title bar, shown only for a review', () => {
    const titleMenu = pkg.contributes.menus['editor/title'] as { command: string; when: string; group: string }[];
    const byCommand = new Map(titleMenu.map((m) => [m.command, m]));
    for (const id of [ClientCommands.applyReviewed, ClientCommands.discardReviewed]) {
      const entry = byCommand.get(id);
      assert.ok(entry, `${id} in editor/title`);
      assert.match(entry!.when, new RegExp(`resourceScheme == ${PROPOSAL_SCHEME}`));
      assert.match(entry!.group, /^navigation/);
      const cmd = (pkg.contributes.commands as { command: string; icon?: string }[]).find((c) => c.command === id);
      assert.ok(cmd?.icon, `${id} has an icon for the title bar`);
    }
  });

  it('the evidence beside the diff says how to decide and claims nothing for the interpreter', () => {
    const md = evidenceMarkdown(
      { uri: DOC_URI, kernel: 'axpy_kernel' },
      {
        original: 'a', proposed: 'b', diff: '-a\n+b\n', interpreted: true, what: 'correct; speed needs a GPU',
        evidence: [{ label: 'Device', value: "no GPU: Triton's interpreter on the CPU" }],
      },
    );
    assert.match(md, /\*\*correct; speed needs a GPU\*\*/);
    assert.match(md, /title bar/);
    assert.match(md, /Closing the diff applies nothing/);
    assert.ok(!/to measure its speed|GPU: CPU/.test(md), md);
    assert.ok(!SPEED_CLAIM.test(md), md);
  });
});

// ---- the controller against the vscode stub ----------------------------------------

class FakeServer implements ServerHandle {
  running = false;
  calls: { command: string; args: Record<string, unknown> }[] = [];
  replies: Record<string, unknown> = {};
  constructor(readonly hooks: ServerHooks) {}
  async start(): Promise<void> {
    this.running = true;
  }
  async stop(): Promise<void> {
    this.running = false;
  }
  async execute(command: string, args: Record<string, unknown>, _opts?: ExecuteOptions): Promise<unknown> {
    this.calls.push({ command, args });
    return this.replies[command];
  }
  onJobEvent(_listener: (p: JobEventParams) => void): Disposable {
    return { dispose: () => undefined };
  }
  onWorkDoneProgress(_token: string, _listener: (v: WorkDoneValue) => void): Disposable {
    return { dispose: () => undefined };
  }
}

async function activate(): Promise<{ controller: Controller; server: FakeServer }> {
  stub.reset();
  let server: FakeServer | undefined;
  const deps: ControllerDeps = {
    createServer: (_spec: LaunchSpec, _output, hooks: ServerHooks) => (server = new FakeServer(hooks)),
    probe: async (_i: Interpreter): Promise<ProbeOutcome> => ({ code: 0 }),
    env: { PATH: '/usr/bin' },
    platform: 'linux',
    homeDir: '/home/u',
    finishedStatusMs: 20,
  };
  const controller = new Controller(makeContext(), deps);
  await controller.activate();
  return { controller, server: server! };
}

const PROPOSAL = { original: 'a\n', proposed: 'b\n', diff: '-a\n+b\n', version: 1, speedup: 1.5, speedup_ci: [1.4, 1.6] };

function reviewTab(kernel = 'axpy_kernel'): { input: { original: Uri; modified: Uri } } {
  const uri = (side: string) => Uri.from({ scheme: PROPOSAL_SCHEME, path: '/add_scale.py', query: new URLSearchParams({ side, kernel, src: DOC_URI }).toString() });
  return { input: { original: uri('original'), modified: uri('proposed') } };
}

describe('defect 3: the review in VS Code (controller)', () => {
  it('no modal; dismissing the notification decides nothing; the title bar Apply applies', async () => {
    const { server } = await activate();
    server.replies[ServerCommands.proposedEdit] = PROPOSAL;
    server.replies[ServerCommands.applyVariant] = { applied: true, message: 'applied' };
    stub.openEditor(DOC_URI, DOC, 3);
    const review = stub.commands.get(ClientCommands.applyVariant)!();
    await flush(10);
    assert.ok(stub.executed.some((e) => e.command === 'vscode.diff'));
    assert.ok(!stub.messages.some((m) => m.options?.modal), 'nothing covers the diff');
    assert.strictEqual(stub.contextKeys['kernelband.reviewing'], true);
    assert.deepStrictEqual(server.calls.map((c) => c.command), [ServerCommands.proposedEdit], 'not applied while the user reads');
    const tab = reviewTab();
    await stub.commands.get(ClientCommands.applyReviewed)!(tab.input.modified);
    assert.strictEqual(await review, 'applied');
    assert.deepStrictEqual(server.calls.map((c) => c.command), [ServerCommands.proposedEdit, ServerCommands.applyVariant]);
    assert.strictEqual(stub.contextKeys['kernelband.reviewing'], false);
  });

  it('closing the diff never applies', async () => {
    const { server } = await activate();
    server.replies[ServerCommands.proposedEdit] = PROPOSAL;
    stub.openEditor(DOC_URI, DOC, 3);
    const review = stub.commands.get(ClientCommands.applyVariant)!();
    await flush(10);
    const tab = reviewTab();
    stub.tabs.push(tab);
    await stub.tabGroupsClose([tab]);
    assert.strictEqual(await review, 'discarded');
    assert.ok(!server.calls.some((c) => c.command === ServerCommands.applyVariant));
  });

  it("the notification's Discard discards; a title-bar click without a review says so", async () => {
    const { server } = await activate();
    server.replies[ServerCommands.proposedEdit] = PROPOSAL;
    stub.messageResponder = (call) => (call.message.startsWith('KernelBand: review the variant') ? 'Discard' : undefined);
    stub.openEditor(DOC_URI, DOC, 3);
    assert.strictEqual(await stub.commands.get(ClientCommands.applyVariant)!(), 'discarded');
    assert.ok(!server.calls.some((c) => c.command === ServerCommands.applyVariant));
    await stub.commands.get(ClientCommands.applyReviewed)!(reviewTab().input.modified);
    assert.ok(stub.messages.some((m) => /no variant is waiting for review/.test(m.message)));
    assert.ok(!server.calls.some((c) => c.command === ServerCommands.applyVariant));
  });
});

describe('defect 4: a variant found on the CPU is one click away', () => {
  it("the end notification's Review button opens the diff", async () => {
    const { server } = await activate();
    server.replies[ServerCommands.optimize] = {
      jobId: 'j1', status: 'verified_correct', kernel: 'axpy_kernel', interpreted: true, speedup: null, evaluations: 4,
      summary: 'axpy_kernel: found a variant that is correct; speed needs a GPU via tiling, 4 evaluations',
    };
    server.replies[ServerCommands.proposedEdit] = { ...PROPOSAL, speedup: null, interpreted: true, speedClaim: false, what: 'correct; speed needs a GPU' };
    stub.messageResponder = (call) => (call.items.includes(REVIEW) ? REVIEW : call.message.startsWith('KernelBand: review') ? 'Discard' : undefined);
    stub.openEditor(DOC_URI, DOC, 3);
    await stub.commands.get(ClientCommands.optimize)!();
    await flush(20);
    const end = stub.messages.find((m) => m.items.includes(REVIEW));
    assert.strictEqual(end?.message, 'KernelBand: axpy_kernel: found a variant that is correct; speed needs a GPU via tiling, 4 evaluations.');
    assert.deepStrictEqual(server.calls.map((c) => c.command), [ServerCommands.optimize, ServerCommands.proposedEdit]);
    const diff = stub.executed.find((e) => e.command === 'vscode.diff');
    assert.match(diff!.args[2] as string, /KernelBand \(correct; speed needs a GPU\)/);
  });

  it("the lens's and code action's kernelband.reviewVariant opens the client's review", async () => {
    const { server } = await activate();
    server.replies[ServerCommands.proposedEdit] = PROPOSAL;
    stub.messageResponder = (call) => (call.message.startsWith('KernelBand: review') ? 'Discard' : undefined);
    const passed: string[] = [];
    const outcome = await server.hooks.intercept(ServerCommands.reviewVariant, [{ uri: DOC_URI, kernel: 'axpy_kernel' }], async (c) => {
      passed.push(c);
      return undefined;
    });
    assert.deepStrictEqual(passed, [], 'not the server-driven review of other editors');
    assert.strictEqual(outcome, 'discarded');
    assert.ok(stub.executed.some((e) => e.command === 'vscode.diff'));
  });
});
