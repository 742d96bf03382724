import * as assert from 'assert';

import {
  describeEvent,
  diffStats,
  finishedStatusText,
  formatLogLine,
  formatMs,
  JobEventParams,
  JobTracker,
  normalizeResult,
  parseJobEventParams,
  profileSummary,
  ProgressAccumulator,
  resultSummary,
  sameUri,
  statusBarText,
  statusBarTooltip,
} from '../src/jobs';

const URI = 'file:///ws/add.py';

function ev(jobId: string, event: Record<string, unknown>, kernel = 'add_kernel'): JobEventParams {
  const p = parseJobEventParams({ jobId, uri: URI, kernel, event });
  assert.ok(p);
  return p;
}

describe('job events', () => {
  it('parses flat events (events.py to_json) and {type, data} events', () => {
    const flat = parseJobEventParams({ jobId: 'j1', uri: URI, kernel: 'k', event: { type: 'progress', t: 1.5, done: 3, total: 8 } });
    assert.deepStrictEqual(flat, { jobId: 'j1', uri: URI, kernel: 'k', event: { type: 'progress', t: 1.5, done: 3, total: 8 } });
    const nested = parseJobEventParams({ jobId: 7, uri: URI, kernel: 'k', event: { type: 'progress', t: 1, data: { done: 2, total: 4 } } });
    assert.strictEqual(nested?.jobId, '7');
    assert.strictEqual(nested?.event.done, 2);
    assert.strictEqual(parseJobEventParams({ jobId: 'j', event: { t: 1 } }), undefined);
    assert.strictEqual(parseJobEventParams({ uri: URI, event: { type: 'log' } }), undefined);
    assert.strictEqual(parseJobEventParams(null), undefined);
    // the server's payload carries kind/background/pid too
    const server = parseJobEventParams({ jobId: 'j', uri: URI, kernel: 'k', kind: 'optimize', background: true, pid: 12, event: { type: 'log' } });
    assert.strictEqual(server?.kind, 'optimize');
    assert.strictEqual(server?.background, true);
  });

  it('describes each event type as a progress message', () => {
    assert.deepStrictEqual(
      describeEvent({ type: 'started', generator: 'rules', search: 'kernelband', budget: { evaluations: 16 }, interpreted: true }),
      { message: 'starting (rules, kernelband, 16 evaluations, Triton interpreter: CPU times)', percent: 0 },
    );
    assert.strictEqual(describeEvent({ type: 'baseline', time_ms: 0.4213, clock: 'gpu' }).message, 'baseline 0.421 ms');
    // CPU-interpreter times: labelled, never a GPU time
    assert.match(describeEvent({ type: 'baseline', time_ms: 12.5, clock: 'cpu', weak_harness: true }).message ?? '', /^original checked \(12\.5 ms of CPU-interpreter time, not a GPU time\) — warning: the harness/);
    assert.strictEqual(
      describeEvent({ type: 'candidate', index: 3, strategy: 'tiling', status: 'ok', time_ms: 0.3, speedup: 1.4 }).message,
      '#3 tiling: ok 0.300 ms (1.40×)',
    );
    assert.strictEqual(describeEvent({ type: 'candidate', index: 4, strategy: 'fusion', status: 'mismatch', time_ms: 0.1 }).message, '#4 fusion: mismatch');
    assert.deepStrictEqual(describeEvent({ type: 'progress', done: 4, total: 16, best_ms: 0.3, best_speedup: 1.4, message: '' }), {
      message: '4/16 evaluated · best 1.40× (0.300 ms)',
      percent: 25,
    });
    assert.strictEqual(describeEvent({ type: 'profile', profile: { diagnosis: { bottleneck: 'memory-bound' } } }).message, 'profiled: memory-bound');
    assert.deepStrictEqual(describeEvent({ type: 'result', result: { status: 'improved' } }), { message: 'finished: improved', percent: 100 });
    assert.strictEqual(describeEvent({ type: 'error', message: 'no harness', kind: 'harness' }).message, 'error: no harness');
    assert.strictEqual(describeEvent({ type: 'log', level: 'info', message: 'worker restarted' }).message, 'worker restarted');
    assert.deepStrictEqual(describeEvent({ type: 'mystery' }), {});
  });

  it('formats output lines with the kernel, job and result summary', () => {
    const line = formatLogLine(
      ev('j9', { type: 'result', result: { status: 'improved', speedup: 1.5, speedup_ci: [1.4, 1.6], baseline_ms: 0.9, best_ms: 0.6, evaluations: 16 } }),
      new Date(2024, 0, 1, 9, 5, 7),
    );
    assert.strictEqual(line, '[09:05:07] add_kernel (job j9) add_kernel: 1.50× faster (95% CI 1.40×–1.60×), 0.900 ms → 0.600 ms, 16 evaluations');
    assert.match(formatLogLine(ev('j9', { type: 'log', level: 'warning', message: 'slow' })), /\(job j9\) warning: slow$/);
  });

  it('turns absolute percentages into monotonic increments', () => {
    const acc = new ProgressAccumulator();
    assert.strictEqual(acc.increment(undefined), undefined);
    assert.strictEqual(acc.increment(25), 25);
    assert.strictEqual(acc.increment(20), undefined, 'never backwards');
    assert.strictEqual(acc.increment(50), 25);
    assert.strictEqual(acc.increment(250), 50, 'capped at 100');
    assert.strictEqual(acc.total, 100);
  });

  it('tracks jobs from started to result, and the status bar follows', () => {
    const t = new JobTracker();
    assert.strictEqual(statusBarText(t.running()), undefined);
    t.update(ev('a', { type: 'started', budget: { evaluations: 16 } }));
    assert.strictEqual(statusBarText(t.running()), '$(loading~spin) KernelBand: add_kernel');
    t.update(ev('a', { type: 'progress', done: 5, total: 16, best_speedup: 1.21, best_ms: 0.3 }));
    assert.strictEqual(statusBarText(t.running()), '$(loading~spin) KernelBand: add_kernel 5/16 · 1.21×');
    t.update(ev('b', { type: 'started' }, 'softmax_kernel'));
    assert.strictEqual(statusBarText(t.running()), '$(loading~spin) KernelBand: 2 jobs');
    assert.match(statusBarTooltip(t.running()), /add_kernel \(job a\) 5\/16 · 1.21× — 5\/16 evaluated/);
    const done = t.update(ev('a', { type: 'result', result: { status: 'improved', speedup: 1.3 } }));
    assert.strictEqual(done.phase, 'finished');
    assert.strictEqual(finishedStatusText(done), '$(check) KernelBand: add_kernel 1.30×');
    t.update(ev('b', { type: 'error', message: 'crashed' }, 'softmax_kernel'));
    assert.strictEqual(t.running().length, 0);
    assert.strictEqual(finishedStatusText(t.get('b')!), '$(error) KernelBand: softmax_kernel failed');
    t.update(ev('d', { type: 'error', message: 'cancelled by the user', kind: 'cancelled' }));
    assert.strictEqual(t.get('d')?.phase, 'cancelled');
    t.update(parseJobEventParams({ jobId: 'e', uri: URI, kernel: 'k2', kind: 'optimize', background: true, event: { type: 'started' } })!);
    assert.match(statusBarTooltip(t.running()), /k2 \(background optimize job e\)/);
    t.update(ev('e', { type: 'result', result: { status: 'no_improvement' } }));
    const correct = t.update(ev('f', { type: 'result', result: { status: 'verified_correct', interpreted: true } }));
    assert.strictEqual(finishedStatusText(correct), '$(check) KernelBand: add_kernel correct variant');
    t.update(ev('c', { type: 'started' }));
    t.finish('c', 'cancelled');
    assert.strictEqual(finishedStatusText(t.get('c')!), '$(circle-slash) KernelBand: add_kernel cancelled');
    t.prune();
    assert.strictEqual(t.get('a'), undefined);
  });

  it('normalises the optimize reply', () => {
    assert.deepStrictEqual(normalizeResult({ jobId: 'j', status: 'improved', speedup: 2 }), { jobId: 'j', status: 'improved', speedup: 2 });
    assert.deepStrictEqual(normalizeResult({ jobId: 'j', result: { status: 'no_improvement' } }), { jobId: 'j', status: 'no_improvement' });
    assert.strictEqual(normalizeResult(null).status, 'failed');
    assert.strictEqual(normalizeResult({ jobId: 'j' }).status, 'failed');
  });

  it('summarises results and profiles', () => {
    assert.strictEqual(
      resultSummary({ status: 'improved', speedup: 1.34, speedup_ci: [1.3, 1.38], baseline_ms: 0.42, best_ms: 0.313, strategy_path: ['tiling', 'pipeline'], interpreted: false }, 'k'),
      'k: 1.34× faster (95% CI 1.30×–1.38×), 0.420 ms → 0.313 ms via tiling → pipeline',
    );
    // --cpu-tuning: "improved" on CPU-interpreter times is no speed claim
    assert.strictEqual(
      resultSummary({ status: 'improved', speedup: 1.34, speedup_ci: [1.3, 1.38], baseline_ms: 0.42, best_ms: 0.313, strategy_path: ['tiling', 'pipeline'], interpreted: true }, 'k'),
      'k: found a variant that is correct; speed needs a GPU via tiling → pipeline',
    );
    assert.strictEqual(resultSummary({ status: 'no_improvement', speedup: 1.01, evaluations: 1 }, 'k'), 'k: no faster variant found (best 1.01×), 1 evaluation');
    assert.strictEqual(resultSummary({ status: 'failed', message: 'no harness' }, 'k'), 'k: failed: no harness');
    assert.strictEqual(
      profileSummary({
        kernel: 'add_kernel',
        tiers: { timing: { time_ms: 0.42 } },
        diagnosis: { bottleneck: 'memory-bound', evidence: '83% of DRAM peak', strategies: ['vectorization', 'access_layout'] },
        unavailable: { counters: 'ncu not found' },
      }),
      'add_kernel: 0.420 ms, memory-bound — 83% of DRAM peak (suggested: vectorization, access_layout) [not available: counters: ncu not found]',
    );
    assert.strictEqual(profileSummary(undefined, 'k'), 'k: no profile');
  });

  it('counts diff lines, compares uris and formats times', () => {
    assert.deepStrictEqual(diffStats('--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n+b\n+c\n d'), { added: 2, removed: 1 });
    assert.deepStrictEqual(diffStats(undefined), { added: 0, removed: 0 });
    assert.ok(sameUri('file:///C%3A/x/a.py', 'file:///c:/x/a.py'));
    assert.ok(!sameUri('file:///x/a.py', 'file:///x/b.py'));
    assert.strictEqual(formatMs(0.0042), '4.2 µs');
    assert.strictEqual(formatMs(2500), '2.50 s');
    assert.strictEqual(formatMs(null), '?');
  });

  it('issue 14 #6: a profile with no diagnosis does not read "unknown — unknown"', () => {
    const text = profileSummary({ kernel: 'k', tiers: { timing: { time_per_launch_ms: 0.42 } }, diagnosis: { bottleneck: 'unknown', evidence: 'unknown' } });
    assert.ok(!/unknown — unknown/.test(text), text);
    assert.match(text, /k: 0\.420 ms, bottleneck not diagnosed/);
  });
});
