import * as assert from 'assert';

import { REVIEW, runCancel, runOptimize, runProfile, runReverify, runReview, serverCommandFlow, SHOW_OUTPUT } from '../src/flows';
import { JobState } from '../src/jobs';
import { deferred, FakeDeps, flush } from './fakes';

const target = { uri: 'file:///ws/add_scale.py', kernel: 'axpy_kernel' };
const PROPOSAL = {
  original: 'BLOCK_SIZE=128\n',
  proposed: 'BLOCK_SIZE=1024\n',
  diff: '--- a/add_scale.py\n+++ b/add_scale.py\n@@ -1 +1 @@\n-BLOCK_SIZE=128\n+BLOCK_SIZE=1024\n',
  version: 3,
};
const IMPROVED = {
  jobId: 'j1',
  status: 'improved',
  kernel: 'axpy_kernel',
  baseline_ms: 0.9,
  best_ms: 0.6,
  speedup: 1.5,
  speedup_ci: [1.45, 1.55],
  evaluations: 16,
  strategy_path: ['tiling'],
};

function running(...ids: [string, string][]): JobState[] {
  return ids.map(([jobId, kernel]) => ({ jobId, kernel, uri: target.uri, phase: 'running' as const }));
}

describe('optimize flow', () => {
  it('shows job events of its own job as progress, then reviews and applies the improvement', async () => {
    const deps = new FakeDeps();
    const reply = deferred<unknown>();
    deps.replies['kernelband.optimize'] = () => reply.promise;
    deps.replies['kernelband.proposedEdit'] = PROPOSAL;
    deps.replies['kernelband.applyVariant'] = { applied: true, message: 'applied' };
    deps.decision = 'apply';
    deps.known.add('bg');

    const outcome = runOptimize(deps, target);
    await flush();
    assert.deepStrictEqual(deps.progressTitles, ['KernelBand: optimizing axpy_kernel']);
    const call = deps.calls[0];
    assert.strictEqual(call.command, 'kernelband.optimize');
    assert.deepStrictEqual(call.args, { uri: target.uri, kernel: 'axpy_kernel' });
    assert.strictEqual(call.opts?.workDoneToken, 'tok-1', 'a workDoneToken so the server does not open a second progress UI');

    deps.emit('bg', { type: 'progress', done: 1, total: 2 }, target); // an older background job: not ours
    deps.emit('j1', { type: 'started', generator: 'rules', search: 'kernelband', budget: { evaluations: 16 } }, target);
    deps.emit('j1', { type: 'progress', done: 8, total: 16, best_speedup: 1.3, best_ms: 0.7 }, target);
    deps.emit('j2', { type: 'progress', done: 9, total: 10 }, { uri: target.uri, kernel: 'other' });
    deps.emit('j1', { type: 'candidate', index: 9, strategy: 'tiling', status: 'ok', time_ms: 0.6, speedup: 1.5 }, target);
    assert.deepStrictEqual(deps.reports, [
      { message: 'starting (rules, kernelband, 16 evaluations)', increment: undefined },
      { message: '8/16 evaluated · best 1.30× (0.700 ms)', increment: 50 },
      { message: '#9 tiling: ok 0.600 ms (1.50×)', increment: undefined },
    ]);

    reply.resolve(IMPROVED);
    const result = await outcome;
    assert.strictEqual(result.result.status, 'improved');
    assert.strictEqual(result.review, 'applied');
    assert.deepStrictEqual(deps.commandsSent(), ['kernelband.optimize', 'kernelband.proposedEdit', 'kernelband.applyVariant']);
    assert.deepStrictEqual(deps.calls[2].args, { uri: target.uri, kernel: 'axpy_kernel' });
    assert.strictEqual(deps.diffs.length, 1);
    assert.deepStrictEqual(deps.diffs[0].proposal, PROPOSAL);
    assert.strictEqual(deps.diffs[0].title, 'add_scale.py · axpy_kernel: current ↔ KernelBand (1.50×)');
    // review first, decide after: the diff and its evidence are shown, then the decision is awaited
    assert.deepStrictEqual(deps.decisions.map((d) => d.message), [
      "KernelBand: review the variant of axpy_kernel (1.50×), then Apply or Discard (here or in the diff's title bar).",
    ]);
    assert.match(deps.diffs[0].evidence, /\*\*1\.50×\*\*/);
    assert.match(deps.diffs[0].evidence, /\+1 −1 lines/);
    assert.match(deps.diffs[0].evidence, /Closing the diff applies nothing/);
    assert.deepStrictEqual(deps.closedDiffs, [target]);
    assert.deepStrictEqual(deps.finished, [['j1', 'improved']]);
    assert.strictEqual(deps.jobListenerCount, 0, 'listeners are disposed');
    assert.ok(deps.messages.some((m) => m.level === 'info' && m.message === 'KernelBand: applied the variant of axpy_kernel (1.50×).'));
  });

  it('Discard, or closing the diff, applies nothing', async () => {
    for (const answer of ['discard', 'closed'] as const) {
      const deps = new FakeDeps();
      deps.replies['kernelband.optimize'] = IMPROVED;
      deps.replies['kernelband.proposedEdit'] = PROPOSAL;
      deps.decision = answer;
      const outcome = await runOptimize(deps, target);
      assert.strictEqual(outcome.review, 'discarded');
      assert.ok(!deps.commandsSent().includes('kernelband.applyVariant'));
      assert.deepStrictEqual(deps.closedDiffs, [target]);
    }
  });

  it('Cancel after the job started sends kernelband.cancel with its id, once', async () => {
    const deps = new FakeDeps();
    const reply = deferred<unknown>();
    deps.replies['kernelband.optimize'] = () => reply.promise;
    deps.replies['kernelband.cancel'] = { cancelled: ['j1'] };
    const outcome = runOptimize(deps, target);
    await flush();
    deps.emit('j1', { type: 'started' }, target);
    deps.cancelProgress();
    deps.cancelProgress();
    await flush();
    const cancels = deps.calls.filter((c) => c.command === 'kernelband.cancel');
    assert.deepStrictEqual(
      cancels.map((c) => c.args),
      [{ jobId: 'j1' }],
    );
    assert.strictEqual(deps.calls[0].opts?.cancel?.isCancellationRequested, false, 'the request itself stays open for the final result');
    assert.ok(deps.reports.some((r) => r.message === 'cancelling…'));
    reply.resolve({ jobId: 'j1', status: 'cancelled', evaluations: 3 });
    const { result } = await outcome;
    assert.strictEqual(result.status, 'cancelled');
    assert.ok(deps.messages.some((m) => m.message === 'KernelBand: optimization of axpy_kernel cancelled.'));
    assert.ok(!deps.commandsSent().includes('kernelband.proposedEdit'));
  });

  it('Cancel before the job id is known cancels the request and the kernel\'s job on the server', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.optimize'] = () => deferred<unknown>().promise; // only the cancel answers it
    deps.replies['kernelband.cancel'] = { cancelled: ['j7'] };
    const outcome = runOptimize(deps, target);
    await flush();
    deps.cancelProgress();
    assert.strictEqual(deps.calls[0].opts?.cancel?.isCancellationRequested, true, '$/cancelRequest');
    // the id is unknown and the -32800 reply ends the flow: cancel by kernel, or a queued job would survive
    assert.deepStrictEqual(deps.calls[1], {
      command: 'kernelband.cancel',
      args: { uri: target.uri, kernel: 'axpy_kernel', kind: 'optimize' },
      opts: undefined,
    });
    const { result } = await outcome;
    assert.strictEqual(result.status, 'cancelled');
    assert.ok(deps.messages.some((m) => m.message === 'KernelBand: optimization of axpy_kernel cancelled.'));
    assert.strictEqual(deps.jobListenerCount, 0);
    assert.deepStrictEqual(deps.finished, []);
    assert.deepStrictEqual(deps.commandsSent(), ['kernelband.optimize', 'kernelband.cancel']);
  });

  it('an id that arrives between Cancel and the -32800 reply is cancelled by id too', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.optimize'] = () => deferred<unknown>().promise;
    const outcome = runOptimize(deps, target);
    await flush();
    deps.cancelProgress();
    deps.emit('j7', { type: 'log', level: 'info', message: 'queued' }, target); // before the rejection settles
    const cancels = deps.calls.filter((c) => c.command === 'kernelband.cancel').map((c) => c.args);
    assert.deepStrictEqual(cancels, [{ uri: target.uri, kernel: 'axpy_kernel', kind: 'optimize' }, { jobId: 'j7' }]);
    const { result } = await outcome;
    assert.strictEqual(result.status, 'cancelled');
    assert.deepStrictEqual(deps.finished, [['j7', 'cancelled']]);
  });

  it('Cancel of a profile before its id is known cancels the kernel\'s profile job', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.profile'] = () => deferred<unknown>().promise;
    const outcome = runProfile(deps, target);
    await flush();
    deps.cancelProgress();
    assert.strictEqual(await outcome, undefined);
    assert.deepStrictEqual(deps.calls[1].args, { uri: target.uri, kernel: 'axpy_kernel', kind: 'profile' });
    assert.ok(deps.messages.some((m) => m.message === 'KernelBand: profiling axpy_kernel cancelled.'));
  });

  it('a failure shows an error that can open the output', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.optimize'] = () => Promise.reject(new Error('server crashed'));
    deps.messageAnswers.error = SHOW_OUTPUT;
    const { result } = await runOptimize(deps, target);
    assert.strictEqual(result.status, 'failed');
    const err = deps.messages.find((m) => m.level === 'error');
    assert.strictEqual(err?.message, 'KernelBand: optimizing axpy_kernel failed: server crashed');
    assert.deepStrictEqual(err?.actions, [SHOW_OUTPUT]);
    await flush();
    assert.strictEqual(deps.outputShown, 1);
  });

  it('a failed Result reports its message; no improvement is information, not a diff', async () => {
    const failed = new FakeDeps();
    failed.replies['kernelband.optimize'] = { jobId: 'j', status: 'failed', message: 'no harness for axpy_kernel' };
    await runOptimize(failed, target);
    assert.match(failed.messages[0].message, /failed: no harness for axpy_kernel$/);

    const none = new FakeDeps();
    none.replies['kernelband.optimize'] = { jobId: 'j', status: 'no_improvement', speedup: 1.01, evaluations: 16 };
    const { result } = await runOptimize(none, target);
    assert.strictEqual(result.status, 'no_improvement');
    assert.deepStrictEqual(none.commandsSent(), ['kernelband.optimize']);
    assert.strictEqual(none.messages[0].message, 'KernelBand: axpy_kernel: no faster variant found (best 1.01×), 16 evaluations.');
  });

  it("the engine's interpreted status verified_correct is information with a way to the diff, never a speedup", async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.optimize'] = {
      jobId: 'j', status: 'verified_correct', kernel: 'axpy_kernel', interpreted: true, speedup: null, evaluations: 3,
      strategy_path: ['tiling'], edit: null, editMessage: 'correct; speed needs a GPU',
      message: 'a correct variant (via tiling) passed every check; its speed cannot be measured without a GPU',
    };
    const { result, review } = await runOptimize(deps, target);
    assert.strictEqual(result.status, 'verified_correct');
    assert.strictEqual(review, undefined);
    assert.deepStrictEqual(deps.commandsSent(), ['kernelband.optimize']);
    assert.deepStrictEqual(deps.messages.map((m) => [m.level, m.message, m.actions]), [
      ['info', 'KernelBand: axpy_kernel: found a variant that is correct; speed needs a GPU via tiling, 3 evaluations.', [REVIEW]],
    ]);
    assert.ok(deps.logs.includes('axpy_kernel: found a variant that is correct; speed needs a GPU via tiling, 3 evaluations'), deps.logs.join('\n'));
  });

  it("the server's words win over the client's: the reply's summary", async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.optimize'] = { jobId: 'j', status: 'no_improvement', speedup: 1.01, evaluations: 16, summary: 'axpy_kernel: no faster variant found, 16 evaluations' };
    await runOptimize(deps, target);
    assert.deepStrictEqual(deps.messages.map((m) => m.message), ['KernelBand: axpy_kernel: no faster variant found, 16 evaluations.']);
  });

  it("the server's $/progress words the notification; job events stand in only until it comes", async () => {
    const deps = new FakeDeps();
    const reply = deferred<unknown>();
    deps.replies['kernelband.optimize'] = () => reply.promise;
    const outcome = runOptimize(deps, target);
    await flush();
    deps.emit('j1', { type: 'started' }, target, { text: 'started (rules generator, 4 evaluations)' });
    deps.progress('tok-1', { kind: 'begin', title: 'Optimizing', message: 'optimizing: preparing…', percentage: 0 });
    deps.progress('tok-1', { kind: 'report', message: 'starting the engine… (4 s)' });
    deps.emit('j1', { type: 'progress', done: 1, total: 4 }, target, { text: '1/4 evaluated' });
    deps.progress('tok-1', { kind: 'report', message: '1/4 evaluated', percentage: 25 });
    assert.deepStrictEqual(
      deps.reports.map((r) => r.message),
      ['started (rules generator, 4 evaluations)', 'optimizing: preparing…', 'starting the engine… (4 s)', '1/4 evaluated'],
    );
    assert.strictEqual(deps.reports[3].increment, 25);
    reply.resolve({ jobId: 'j1', status: 'cancelled' });
    await outcome;
  });
});

describe('review flow', () => {
  it('without a found variant it says so and shows no diff', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.proposedEdit'] = null;
    assert.strictEqual(await runReview(deps, target), 'none');
    assert.strictEqual(deps.diffs.length, 0);
    assert.strictEqual(deps.decisions.length, 0);
    assert.match(deps.messages[0].message, /no found variant of axpy_kernel/);

    const same = new FakeDeps();
    same.replies['kernelband.proposedEdit'] = { original: 'x', proposed: 'x' };
    assert.strictEqual(await runReview(same, target), 'none');
  });

  it('a refused edit (the kernel changed meanwhile) is a warning', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.proposedEdit'] = PROPOSAL;
    deps.replies['kernelband.applyVariant'] = { applied: false, message: 'the kernel changed since the search started' };
    deps.decision = 'apply';
    assert.strictEqual(await runReview(deps, target), 'refused');
    const warn = deps.messages.find((m) => m.level === 'warn');
    assert.match(warn?.message ?? '', /not applied: the kernel changed since the search started/);
    assert.deepStrictEqual(deps.closedDiffs, [], 'the diff stays open to look at');
  });

  it("shows the server's reason when there is no proposal, or when it no longer fits", async () => {
    const none = new FakeDeps();
    none.replies['kernelband.proposedEdit'] = { error: 'no found variant for axpy_kernel: run Optimize first' };
    assert.strictEqual(await runReview(none, target), 'none');
    assert.deepStrictEqual(none.messages.map((m) => [m.level, m.message]), [['info', 'KernelBand: no found variant for axpy_kernel: run Optimize first']]);

    const stale = new FakeDeps();
    stale.replies['kernelband.proposedEdit'] = { error: 'axpy_kernel changed since the search; optimize again', original: 'x', version: 9 };
    assert.strictEqual(await runReview(stale, target), 'refused');
    assert.strictEqual(stale.messages[0].level, 'warn');
    assert.match(stale.messages[0].message, /cannot be applied: axpy_kernel changed since the search/);
    assert.strictEqual(stale.decisions.length, 0);
  });

  it('errors from the server are reported', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.proposedEdit'] = () => Promise.reject(new Error('unknown kernel'));
    assert.strictEqual(await runReview(deps, target), 'failed');
    assert.match(deps.messages[0].message, /could not get the found variant of axpy_kernel: unknown kernel/);
  });
});

describe('re-verify flow (issue 14: rerun the verification of an applied variant from the lens)', () => {
  it('runs kernelband.reverify under a progress notification and shows a passing verdict as information', async () => {
    const deps = new FakeDeps();
    const summary = 're-verified: correct, 1.41x faster, 95% CI 1.30–1.52';
    deps.replies['kernelband.reverify'] = { jobId: 'c1', kernel: 'axpy_kernel', verified: true, summary, message: summary };
    assert.deepStrictEqual(await runReverify(deps, target), { verified: true, summary });
    assert.deepStrictEqual(deps.calls[0].args, { uri: target.uri, kernel: 'axpy_kernel' });
    assert.ok(deps.calls[0].opts?.workDoneToken, 'the server reports $/progress on the request');
    assert.deepStrictEqual(deps.progressTitles, ['KernelBand: re-verifying axpy_kernel']);
    assert.deepStrictEqual(deps.messages.map((m) => [m.level, m.message]), [['info', `KernelBand: axpy_kernel: ${summary}.`]]);
    assert.deepStrictEqual(deps.finished, [['c1', 'finished']]);
  });

  it('a failing verdict is a warning that can open the output; no applied variant is information', async () => {
    const failed = new FakeDeps();
    const summary = 're-verification failed (mismatch): max abs error 2.0 > atol 1e-05';
    failed.replies['kernelband.reverify'] = { jobId: 'c2', verified: false, summary, message: summary };
    assert.deepStrictEqual(await runReverify(failed, target), { verified: false, summary });
    assert.deepStrictEqual(failed.messages.map((m) => [m.level, m.message, m.actions]), [['warn', `KernelBand: axpy_kernel: ${summary}.`, [SHOW_OUTPUT]]]);

    const none = new FakeDeps();
    const why = 'no applied KernelBand variant of axpy_kernel in this text';
    none.replies['kernelband.reverify'] = { jobId: null, verified: false, summary: why, message: why };
    await runReverify(none, target);
    assert.deepStrictEqual(none.messages.map((m) => [m.level, m.message]), [['info', `KernelBand: ${why}`]]);
  });

  it("Cancel before the job id is known cancels the kernel's check job", async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.reverify'] = () => deferred<unknown>().promise;
    deps.replies['kernelband.cancel'] = { cancelled: ['c3'] };
    const done = runReverify(deps, target);
    await flush();
    deps.cancelProgress();
    assert.strictEqual(await done, undefined);
    assert.deepStrictEqual(deps.calls.find((c) => c.command === 'kernelband.cancel')?.args, { uri: target.uri, kernel: 'axpy_kernel', kind: 'check' });
    assert.deepStrictEqual(deps.messages.map((m) => m.message), ['KernelBand: re-verification of axpy_kernel cancelled.']);
  });
});

describe('profile and cancel flows', () => {
  it('profile shows the diagnosis and logs the profile', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.profile'] = {
      jobId: 'p1',
      profile: { kernel: 'axpy_kernel', diagnosis: { bottleneck: 'memory-bound', evidence: '83% of DRAM peak' }, tiers: {} },
    };
    const profile = await runProfile(deps, target);
    assert.deepStrictEqual((profile as { diagnosis: unknown }).diagnosis, { bottleneck: 'memory-bound', evidence: '83% of DRAM peak' });
    assert.deepStrictEqual(deps.progressTitles, ['KernelBand: profiling axpy_kernel']);
    assert.strictEqual(deps.messages[0].message, 'KernelBand: axpy_kernel: memory-bound — 83% of DRAM peak');
    assert.ok(deps.logs.some((l) => l.includes('"bottleneck": "memory-bound"')));
    assert.deepStrictEqual(deps.finished, [['p1', 'finished']]);
  });

  it('a profile job without a profile reports the server message', async () => {
    const deps = new FakeDeps();
    deps.replies['kernelband.profile'] = { jobId: null, profile: null, kernel: 'axpy_kernel', message: 'no harness for axpy_kernel: none found' };
    assert.strictEqual(await runProfile(deps, target), undefined);
    assert.deepStrictEqual(deps.messages.map((m) => [m.level, m.message]), [['error', 'KernelBand: profiling axpy_kernel failed: no harness for axpy_kernel: none found']]);
  });

  it('cancel: the only job, a picked one, all, or none', async () => {
    const one = new FakeDeps();
    one.replies['kernelband.cancel'] = { cancelled: ['a'] };
    assert.deepStrictEqual(await runCancel(one, running(['a', 'k1'])), ['a']);
    assert.deepStrictEqual(one.calls[0].args, { jobId: 'a' });
    assert.strictEqual(one.messages[0].message, 'KernelBand: cancelled 1 job.');

    const picked = new FakeDeps();
    picked.pickAnswer = 1;
    picked.replies['kernelband.cancel'] = (c: { args: Record<string, unknown> }) => ({ cancelled: [c.args.jobId] });
    await runCancel(picked, running(['a', 'k1'], ['b', 'k1']));
    assert.deepStrictEqual(picked.calls[0].args, { jobId: 'b' });
    assert.deepStrictEqual(
      picked.picks[0].map((i) => i.label),
      ['k1', 'k1', 'All jobs'],
    );

    const all = new FakeDeps();
    all.pickAnswer = 2;
    all.replies['kernelband.cancel'] = { cancelled: ['a', 'b'] };
    assert.deepStrictEqual(await runCancel(all, running(['a', 'k1'], ['b', 'k2'])), ['a', 'b']);
    assert.deepStrictEqual(all.calls[0].args, {});

    const dismissed = new FakeDeps();
    assert.deepStrictEqual(await runCancel(dismissed, running(['a', 'k1'], ['b', 'k2'])), []);
    assert.strictEqual(dismissed.calls.length, 0);

    const none = new FakeDeps();
    none.replies['kernelband.cancel'] = { cancelled: [] };
    await runCancel(none, []);
    assert.deepStrictEqual(none.calls[0].args, {});
    assert.strictEqual(none.messages[0].message, 'KernelBand: no job is running.');
  });

  it('routes only optimize, profile, applyVariant, reviewVariant and reverify of the server to client flows', () => {
    assert.strictEqual(serverCommandFlow('kernelband.optimize'), 'optimize');
    assert.strictEqual(serverCommandFlow('kernelband.profile'), 'profile');
    assert.strictEqual(serverCommandFlow('kernelband.applyVariant'), 'review');
    assert.strictEqual(serverCommandFlow('kernelband.reviewVariant'), 'review');
    assert.strictEqual(serverCommandFlow('kernelband.reverify'), 'reverify');
    for (const c of ['kernelband.cancel', 'kernelband.createHarness', 'kernelband.proposedEdit', 'other']) {
      assert.strictEqual(serverCommandFlow(c), undefined, c);
    }
  });
});
