/**
 * Contract check against the real Python language server (not part of `npm test`: it
 * needs `python3 -m kernelband_lsp` with torch and triton, and runs real jobs under the
 * Triton interpreter, about a minute). Run: `npm run test:integration -w vscode-client`.
 *
 * The client's flows (flows.ts) drive the server over a real LSP connection; only the
 * UI (progress notification, dialogs, diff editor) is faked.
 */
import * as assert from 'assert';
import { ChildProcess, spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import {
  ApplyWorkspaceEditParams,
  ApplyWorkspaceEditRequest,
  CancellationTokenSource,
  ConfigurationRequest,
  createProtocolConnection,
  ExecuteCommandParams,
  ExecuteCommandRequest,
  InitializeRequest,
  ProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
} from 'vscode-languageclient/node';

import { JOB_EVENT_NOTIFICATION } from '../../src/constants';
import { runOptimize, runProfile, runReverify, runReview } from '../../src/flows';
import { Interpreter } from '../../src/interpreter';
import { JobEventParams, parseJobEventParams } from '../../src/jobs';
import { probeInterpreter } from '../../src/server';
import { buildServerEnv, readSettings, toInitializationOptions } from '../../src/settings';
import { FakeDeps } from '../fakes';

const PYTHON: Interpreter = { command: process.env.KERNELBAND_TEST_PYTHON || 'python3', args: [], source: 'default' };
const EXAMPLE = path.join(__dirname, '..', '..', '..', '..', 'examples', 'add_scale.py');
const KERNEL = 'axpy_kernel';

describe('against the real kernelband_lsp server', function () {
  this.timeout(300_000);
  let proc: ChildProcess | undefined;
  let conn: ProtocolConnection | undefined;
  let uri = '';
  const events: JobEventParams[] = [];
  const jobListeners = new Set<(p: JobEventParams) => void>();
  const edits: ApplyWorkspaceEditParams[] = [];
  const settings = toInitializationOptions(readSettings((k) => ({ 'budget.evaluations': 1, minSpeedup: 1.0 })[k]));

  before(async function () {
    const probe = await probeInterpreter(PYTHON, buildServerEnv(process.env, undefined));
    if (probe.code !== 0 || !fs.existsSync(EXAMPLE)) {
      // A run with 0 tests must not look like a pass: fail and say how to point at a
      // Python that has the server; skipping is an explicit choice.
      const why = probe.code !== 0
        ? `${PYTHON.command} cannot run kernelband_lsp (${probe.errorCode ?? `exit ${probe.code}`}${probe.stderr ? `: ${probe.stderr.trim().split('\n').pop()}` : ''})`
        : `${EXAMPLE} is missing`;
      if (process.env.KERNELBAND_SKIP_INTEGRATION === '1') {
        console.log(`skipped (KERNELBAND_SKIP_INTEGRATION=1): ${why}`);
        this.skip();
      }
      throw new Error(`${why}. Set KERNELBAND_TEST_PYTHON to a Python with the kernelband and kernelband_lsp packages `
        + '(pip install -e . in the repository), or KERNELBAND_SKIP_INTEGRATION=1 to skip on purpose.');
    }
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kb-client-'));
    const file = path.join(dir, 'add_scale.py');
    fs.copyFileSync(EXAMPLE, file);
    uri = `file://${file}`;
    proc = spawn(PYTHON.command, [...PYTHON.args, '-m', 'kernelband_lsp'], { cwd: dir, env: buildServerEnv(process.env, undefined) });
    proc.stderr?.on('data', () => undefined);
    conn = createProtocolConnection(new StreamMessageReader(proc.stdout!), new StreamMessageWriter(proc.stdin!));
    conn.onRequest(ConfigurationRequest.type, (params) => params.items.map(() => settings));
    conn.onRequest(WorkDoneProgressCreateRequest.type, () => null);
    conn.onRequest(ApplyWorkspaceEditRequest.type, (params) => {
      edits.push(params);
      return { applied: true };
    });
    conn.onNotification(JOB_EVENT_NOTIFICATION, (raw: unknown) => {
      const p = parseJobEventParams(raw);
      assert.ok(p, `unparsable jobEvent ${JSON.stringify(raw).slice(0, 300)}`);
      events.push(p);
      for (const l of [...jobListeners]) {
        l(p);
      }
    });
    conn.listen();
    await conn.sendRequest(InitializeRequest.type, {
      processId: process.pid,
      rootUri: `file://${dir}`,
      workspaceFolders: [{ uri: `file://${dir}`, name: 'ws' }],
      initializationOptions: settings,
      capabilities: {
        window: { workDoneProgress: true },
        workspace: { applyEdit: true, configuration: true, workspaceEdit: { documentChanges: true } },
      },
    });
    await conn.sendNotification('initialized', {});
    await conn.sendNotification('textDocument/didOpen', {
      textDocument: { uri, languageId: 'python', version: 1, text: fs.readFileSync(file, 'utf8') },
    });
  });

  after(async () => {
    if (conn) {
      await Promise.race([conn.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 5000))]).catch(() => undefined);
      await conn.sendNotification('exit').catch(() => undefined);
      conn.dispose();
    }
    proc?.kill();
  });

  function deps(): FakeDeps {
    const d = new FakeDeps();
    d.execute = async (command, args, opts) => {
      d.calls.push({ command, args, opts });
      const params: ExecuteCommandParams = { command, arguments: [args] };
      if (opts?.workDoneToken) {
        params.workDoneToken = opts.workDoneToken;
      }
      const source = new CancellationTokenSource();
      opts?.cancel?.onCancellationRequested(() => source.cancel());
      return conn!.sendRequest(ExecuteCommandRequest.type, params, source.token);
    };
    d.onJobEvent = (listener) => {
      jobListeners.add(listener);
      return { dispose: () => jobListeners.delete(listener) };
    };
    d.onWorkDoneProgress = (token, listener) => conn!.onProgress(WorkDoneProgress.type, token, (v) => listener(v as never));
    return d;
  }

  it('optimize: job events become progress, the Result is understood, an improvement is applied through the server', async () => {
    const d = deps();
    d.decision = 'apply';
    events.length = 0;
    const { result, review } = await runOptimize(d, { uri, kernel: KERNEL });
    assert.ok(['improved', 'verified_correct', 'no_improvement'].includes(result.status), `status ${result.status}: ${result.message ?? ''}`);
    const types = events.map((e) => e.event.type);
    for (const t of ['started', 'baseline', 'candidate', 'progress', 'result']) {
      assert.ok(types.includes(t), `no ${t} event in ${types.join(',')}`);
    }
    assert.ok(events.every((e) => e.uri === uri && e.kernel === KERNEL));
    assert.ok(d.reports.some((r) => /1\/1 evaluated/.test(r.message ?? '')), JSON.stringify(d.reports));
    assert.strictEqual(result.jobId, events[0].jobId);
    assert.deepStrictEqual(d.finished, [[events[0].jobId, result.status]]);
    if (result.status === 'verified_correct' || (result.status === 'improved' && result.interpreted === true)) {
      // CPU interpreter: correct, never offered as a speedup
      assert.strictEqual(review, undefined);
      assert.strictEqual(d.diffs.length, 0);
      assert.ok(d.messages.some((m) => /correct; speed needs a GPU/.test(m.message)), JSON.stringify(d.messages));
    } else if (result.status === 'improved') {
      assert.strictEqual(review, 'applied');
      assert.strictEqual(d.diffs.length, 1);
      assert.strictEqual(edits.length, 1);
    } else {
      // nothing found: "Apply found variant" says so with the server's reason
      const again = deps();
      assert.strictEqual(await runReview(again, { uri, kernel: KERNEL }), 'none');
      assert.match(again.messages[0].message, /no found variant/i);
      assert.strictEqual(again.diffs.length, 0);
    }
  });

  it('cancel: pressing Cancel sends kernelband.cancel with the job id and the job ends cancelled', async () => {
    const d = deps();
    let cancelled = false;
    const trigger = (p: JobEventParams) => {
      if (!cancelled && p.event.type === 'baseline') {
        cancelled = true;
        setTimeout(() => d.cancelProgress(), 0);
      }
    };
    jobListeners.add(trigger);
    const started = Date.now();
    try {
      const { result } = await runOptimize(d, { uri, kernel: KERNEL });
      assert.strictEqual(result.status, 'cancelled');
    } finally {
      jobListeners.delete(trigger);
    }
    const cancel = d.calls.find((c) => c.command === 'kernelband.cancel');
    assert.ok(cancel, 'kernelband.cancel sent');
    assert.strictEqual(typeof cancel!.args.jobId, 'string');
    assert.ok(Date.now() - started < 120_000);
  });

  it('re-verify: after Apply, kernelband.reverify checks the applied text against the original', async function () {
    const d = deps();
    d.decision = 'apply';
    const review = await runReview(d, { uri, kernel: KERNEL });
    if (review !== 'applied' || d.diffs.length !== 1) {
      this.skip(); // the optimize test found no variant to apply
    }
    // the editor applies the edit: the document now holds the variant
    await conn!.sendNotification('textDocument/didChange', {
      textDocument: { uri, version: 2 },
      contentChanges: [{ text: d.diffs[0].proposal.proposed }],
    });
    const again = deps();
    const outcome = await runReverify(again, { uri, kernel: KERNEL });
    assert.ok(outcome, JSON.stringify(again.messages));
    assert.strictEqual(outcome!.verified, true, outcome!.summary);
    assert.match(outcome!.summary, /^re-verified: correct/);
    assert.deepStrictEqual(again.progressTitles, [`KernelBand: re-verifying ${KERNEL}`]);
    // undone: nothing is applied, so there is nothing to re-verify
    await conn!.sendNotification('textDocument/didChange', {
      textDocument: { uri, version: 3 },
      contentChanges: [{ text: d.diffs[0].proposal.original }],
    });
    const none = deps();
    assert.strictEqual((await runReverify(none, { uri, kernel: KERNEL }))!.verified, false);
    assert.match(none.messages[0].message, /no applied KernelBand variant/);
  });

  it('profile: the reply carries a profile the client can summarise', async () => {
    const d = deps();
    const profile = await runProfile(d, { uri, kernel: KERNEL });
    assert.ok(profile && typeof profile === 'object', JSON.stringify(d.messages));
    assert.match(d.messages[0].message, /^KernelBand: axpy_kernel: /);
  });
});
