/**
 * Job events from the server (`kernelband/jobEvent` {jobId, uri, kernel, event}) ->
 * progress messages, output lines, status bar text; and the final Result -> messages.
 * Pure: no VS Code imports.
 *
 * An event is the job's JSON line (kernelband/events.py): {type, t, ...data} with type
 * one of started, baseline, candidate, progress, profile, result, error, log.
 */

export interface JobEvent {
  type: string;
  t?: number;
  [key: string]: unknown;
}

export interface JobEventParams {
  jobId: string;
  uri: string;
  kernel: string;
  event: JobEvent;
  /** "optimize" | "profile", when the server says. */
  kind?: string;
  /** A background (on save) job. */
  background?: boolean;
  /**
   * The server's words (server/kernelband_lsp/display.py): this event's progress line
   * (null: the event is no progress line), the job's lens line, whether the job's numbers
   * may be read as a speedup (false under the Triton interpreter), and for a result event
   * its one-line summary. Absent from an older server: the client words them itself.
   */
  text?: string | null;
  line?: string;
  speedClaim?: boolean;
  summary?: string;
}

/**
 * The optimize Result (kernelband/model.py `Result`), as returned with the job id. Every
 * field of the Python dataclass is here with a compatible type, and nothing else but the
 * server's `jobId` (tests/test_result_contract.py checks both ways). Fields are optional:
 * an older engine's stored Result, or a cancelled job's, may lack some.
 */
export interface OptimizeResult {
  jobId?: string;
  status: string;
  kernel?: string;
  file?: string;
  session_id?: string;
  original_hash?: string;
  baseline_ms?: number | null;
  best_ms?: number | null;
  speedup?: number | null;
  speedup_ci?: [number, number] | null;
  speed_claim?: boolean;
  applicable?: boolean;
  min_speedup?: number | null;
  evaluations?: number;
  interpreted?: boolean;
  clock?: string;
  gpu?: string | null;
  triton_version?: string;
  search?: string;
  generator?: string;
  strategy_path?: string[];
  diff?: string;
  best_source?: string;
  best_variant_id?: string | null;
  seconds?: number;
  tokens?: number;
  cost_usd?: number;
  stop_reason?: string;
  message?: string;
  warnings?: string[];
  history?: Record<string, unknown>[];
  phase_seconds?: Record<string, number>;
  worker_restarts?: number;
  baseline_bottleneck?: string | null;
  paired_rounds?: number | null;
  paired_medians_ms?: number[] | null;
  search_best_ms?: number | null;
  search_baseline_ms?: number | null;
  unverified_variant_id?: string | null;
  unverified_diff?: string | null;
  memcheck?: Record<string, unknown> | null;
  applied?: boolean | null;
  /** keys a newer engine adds (Result.extra) */
  [key: string]: unknown;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function n(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function s(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** Validates a jobEvent notification; accepts {type, data: {...}} as well as flat events. */
export function parseJobEventParams(raw: unknown): JobEventParams | undefined {
  if (!isObject(raw) || !isObject(raw.event)) {
    return undefined;
  }
  const jobId = raw.jobId;
  if (typeof jobId !== 'string' && typeof jobId !== 'number') {
    return undefined;
  }
  const ev = raw.event;
  if (typeof ev.type !== 'string') {
    return undefined;
  }
  const { data, ...rest } = ev as Record<string, unknown>;
  const event: JobEvent = { ...(isObject(data) ? data : {}), ...rest, type: ev.type as string };
  const params: JobEventParams = {
    jobId: String(jobId),
    uri: typeof raw.uri === 'string' ? raw.uri : '',
    kernel: typeof raw.kernel === 'string' ? raw.kernel : '',
    event,
  };
  if (typeof raw.kind === 'string') {
    params.kind = raw.kind;
  }
  if (typeof raw.background === 'boolean') {
    params.background = raw.background;
  }
  if (typeof raw.text === 'string' || raw.text === null) {
    params.text = raw.text;
  }
  if (typeof raw.line === 'string') {
    params.line = raw.line;
  }
  if (typeof raw.speedClaim === 'boolean') {
    params.speedClaim = raw.speedClaim;
  }
  if (typeof raw.summary === 'string') {
    params.summary = raw.summary;
  }
  return params;
}

/**
 * May a Result's numbers be read as a speedup? Not for the Triton interpreter's CPU times
 * (the server decides the same way; this reads a Result the server did not word).
 */
export function claimsSpeed(r: { interpreted?: unknown; status?: unknown; clock?: unknown; speed_claim?: unknown }): boolean {
  const clock = typeof r.clock === 'string' ? r.clock.toLowerCase() : '';
  return r.interpreted !== true && r.status !== 'verified_correct' && !clock.includes('interpret') && clock !== 'cpu';
}

/** An event's own say on its times: false for interpreter times, undefined when it does not say. */
function eventClaimsSpeed(event: JobEvent): boolean | undefined {
  if (event.speed_claim === false || event.interpreted === true) {
    return false;
  }
  const clock = typeof event.clock === 'string' ? event.clock.toLowerCase() : '';
  if (clock.includes('interpret') || clock === 'cpu') {
    return false;
  }
  return event.speed_claim === true ? true : undefined;
}

/** Normalises the optimize command's reply ({jobId, ...Result}; {jobId, result} also accepted). */
export function normalizeResult(raw: unknown): OptimizeResult {
  if (!isObject(raw)) {
    return { status: 'failed', message: 'The server returned no result.' };
  }
  let merged: Record<string, unknown> = raw;
  if (isObject(raw.result) && typeof raw.result.status === 'string') {
    merged = { ...raw.result, jobId: raw.jobId ?? raw.result.jobId };
  }
  const status = typeof merged.status === 'string' ? merged.status : 'failed';
  return { ...merged, status } as OptimizeResult;
}

export function sameUri(a: string, b: string): boolean {
  if (a === b) {
    return true;
  }
  const norm = (u: string) => {
    let d = u;
    try {
      d = decodeURIComponent(u);
    } catch {
      /* keep as is */
    }
    // file:///C:/x and file:///c:/x are the same file on Windows.
    return d.replace(/^file:\/\/\/([A-Za-z]):/, (_m, drive: string) => `file:///${drive.toLowerCase()}:`);
  };
  return norm(a) === norm(b);
}

export function formatMs(ms: unknown): string {
  const v = n(ms);
  if (v === undefined) {
    return '?';
  }
  if (v < 0.01) {
    return `${(v * 1000).toFixed(1)} µs`;
  }
  if (v < 10) {
    return `${v.toFixed(3)} ms`;
  }
  if (v < 1000) {
    return `${v.toFixed(1)} ms`;
  }
  return `${(v / 1000).toFixed(2)} s`;
}

export function formatSpeedup(x: unknown): string {
  const v = n(x);
  return v === undefined ? '?' : `${v.toFixed(2)}×`;
}

/** What one event contributes to the progress notification. */
export interface ProgressView {
  message?: string;
  /** 0..100 when the event says how far the job is. */
  percent?: number;
}

export function describeEvent(event: JobEvent, claim = true): ProgressView {
  const speed = claim && eventClaimsSpeed(event) !== false;
  switch (event.type) {
    case 'started': {
      const budget = isObject(event.budget) ? event.budget : {};
      const evals = n(budget.evaluations);
      const parts = [
        s(event.generator),
        s(event.search),
        evals !== undefined ? `${evals} evaluations` : undefined,
        event.interpreted === true ? 'Triton interpreter: CPU times' : undefined,
      ].filter((x): x is string => x !== undefined);
      return { message: parts.length ? `starting (${parts.join(', ')})` : 'starting', percent: 0 };
    }
    case 'baseline': {
      const clock = s(event.clock);
      let msg = speed
        ? `baseline ${formatMs(event.time_ms)}${clock && clock !== 'gpu' ? ` (${clock})` : ''}`
        : `original checked (${formatMs(event.time_ms)} of CPU-interpreter time, not a GPU time)`;
      if (event.weak_harness === true) {
        msg += ' — warning: the harness may not detect a broken kernel';
      }
      return { message: msg };
    }
    case 'candidate': {
      const idx = n(event.index);
      const strategy = s(event.strategy) ?? 'variant';
      const status = s(event.status) ?? '?';
      if (idx === 0 || event.generator === 'stored') {
        return { message: `re-checked the variant an earlier session found: ${status}` };
      }
      const timing = speed && status === 'ok' && n(event.time_ms) !== undefined ? ` ${formatMs(event.time_ms)} (${formatSpeedup(event.speedup)})` : '';
      return { message: `${idx !== undefined ? `#${idx} ` : ''}${strategy}: ${status}${timing}` };
    }
    case 'progress': {
      const done = n(event.done);
      const total = n(event.total);
      const parts: string[] = [];
      if (done !== undefined) {
        parts.push(total !== undefined && total > 0 ? `${done}/${total} evaluated` : `${done} evaluated`);
      }
      if (speed && n(event.best_speedup) !== undefined) {
        parts.push(`best ${formatSpeedup(event.best_speedup)}${n(event.best_ms) !== undefined ? ` (${formatMs(event.best_ms)})` : ''}`);
      }
      if (s(event.message)) {
        parts.push(event.message as string);
      }
      const percent = done !== undefined && total !== undefined && total > 0 ? Math.max(0, Math.min(100, (100 * done) / total)) : undefined;
      return { message: parts.join(' · ') || undefined, percent };
    }
    case 'profile': {
      const profile = isObject(event.profile) ? event.profile : {};
      return { message: `profiled: ${profileBottleneck(profile) ?? 'done'}` };
    }
    case 'result': {
      const result = isObject(event.result) ? event.result : event;
      return { message: `finished: ${s(result.status) ?? 'done'}`, percent: 100 };
    }
    case 'error':
      return { message: `error: ${s(event.message) ?? 'unknown'}` };
    case 'log':
      return { message: s(event.message) };
    default:
      return {};
  }
}

/** One output-channel line per event. */
export function formatLogLine(p: JobEventParams, now: Date = new Date()): string {
  const clock = now.toTimeString().slice(0, 8);
  let text = eventView(p).message ?? describeEvent(p.event, p.speedClaim !== false).message ?? p.event.type;
  if (p.event.type === 'log' && s(p.event.level)) {
    text = `${p.event.level}: ${describeEvent(p.event).message ?? ''}`;
  }
  if (p.event.type === 'result') {
    const result = isObject(p.event.result) ? (p.event.result as OptimizeResult) : undefined;
    if (p.summary) {
      text = p.summary;
    } else if (result) {
      text = resultSummary(result, p.kernel);
    }
  }
  return `[${clock}] ${p.kernel || '?'} (job ${p.jobId}) ${text}`;
}

/** What an event shows in the progress notification: the server's words when it sent them. */
export function eventView(p: JobEventParams): ProgressView {
  const own = describeEvent(p.event, p.speedClaim !== false);
  if (p.text === undefined) {
    return own;
  }
  return { message: p.text ?? undefined, percent: own.percent };
}

/**
 * Turns absolute percentages into the increments vscode.Progress.report expects
 * (never backwards, never past 100).
 */
export class ProgressAccumulator {
  private reported = 0;

  increment(percent: number | undefined): number | undefined {
    if (percent === undefined || !Number.isFinite(percent)) {
      return undefined;
    }
    const target = Math.max(0, Math.min(100, percent));
    if (target <= this.reported) {
      return undefined;
    }
    const inc = target - this.reported;
    this.reported = target;
    return inc;
  }

  get total(): number {
    return this.reported;
  }
}

export type JobPhase = 'running' | 'finished' | 'failed' | 'cancelled';

export interface JobState {
  jobId: string;
  uri: string;
  kernel: string;
  phase: JobPhase;
  kind?: string;
  background?: boolean;
  done?: number;
  total?: number;
  bestSpeedup?: number;
  bestMs?: number;
  baselineMs?: number;
  interpreted?: boolean;
  /** False once the job is known to run under the Triton interpreter: no ratio is shown. */
  speedClaim?: boolean;
  /** The server's lens line of the job ("optimizing 3/4 evaluated"). */
  line?: string;
  lastMessage?: string;
  status?: string;
  speedup?: number;
}

/** Running jobs as seen through their events (includes background jobs started on save). */
export class JobTracker {
  private readonly jobs = new Map<string, JobState>();

  update(p: JobEventParams): JobState {
    let job = this.jobs.get(p.jobId);
    if (!job) {
      job = { jobId: p.jobId, uri: p.uri, kernel: p.kernel, phase: 'running' };
      this.jobs.set(p.jobId, job);
    }
    if (p.kind !== undefined) {
      job.kind = p.kind;
    }
    if (p.background !== undefined) {
      job.background = p.background;
    }
    const e = p.event;
    if (p.speedClaim === false || eventClaimsSpeed(e) === false) {
      job.speedClaim = false; // once known, for the rest of the job
    } else if (job.speedClaim === undefined && p.speedClaim === true) {
      job.speedClaim = true;
    }
    if (p.line !== undefined) {
      job.line = p.line;
    }
    const view = eventView(p);
    if (view.message) {
      job.lastMessage = view.message;
    }
    switch (e.type) {
      case 'started': {
        job.interpreted = e.interpreted === true;
        const budget = isObject(e.budget) ? e.budget : {};
        job.total = n(budget.evaluations) ?? job.total;
        break;
      }
      case 'baseline':
        job.baselineMs = n(e.time_ms) ?? job.baselineMs;
        break;
      case 'progress':
        job.done = n(e.done) ?? job.done;
        job.total = n(e.total) ?? job.total;
        job.bestSpeedup = n(e.best_speedup) ?? job.bestSpeedup;
        job.bestMs = n(e.best_ms) ?? job.bestMs;
        break;
      case 'result': {
        const result = isObject(e.result) ? e.result : {};
        job.status = s(result.status) ?? 'finished';
        job.speedup = n(result.speedup);
        if (!claimsSpeed(result)) {
          job.speedClaim = false;
        }
        job.phase = job.status === 'cancelled' ? 'cancelled' : job.status === 'failed' ? 'failed' : 'finished';
        break;
      }
      case 'error':
        // the server reports a cancelled/superseded job without a result as an error
        job.status = e.kind === 'cancelled' || e.kind === 'superseded' ? 'cancelled' : 'failed';
        job.phase = job.status === 'cancelled' ? 'cancelled' : 'failed';
        break;
      default:
        break;
    }
    return job;
  }

  /** Marks a job over when its command returned without a final event (crash, cancel). */
  finish(jobId: string, status: string): void {
    const job = this.jobs.get(jobId);
    if (job && job.phase === 'running') {
      job.status = status;
      job.phase = status === 'cancelled' ? 'cancelled' : status === 'failed' ? 'failed' : 'finished';
    }
  }

  get(jobId: string): JobState | undefined {
    return this.jobs.get(jobId);
  }

  running(): JobState[] {
    return [...this.jobs.values()].filter((j) => j.phase === 'running');
  }

  /** Forgets jobs that are over. */
  prune(): void {
    for (const [id, job] of this.jobs) {
      if (job.phase !== 'running') {
        this.jobs.delete(id);
      }
    }
  }
}

function jobProgressText(job: JobState): string {
  const parts: string[] = [];
  if (job.done !== undefined && job.total) {
    parts.push(`${job.done}/${job.total}`);
  }
  if (job.bestSpeedup !== undefined && job.bestSpeedup > 1 && job.speedClaim !== false) {
    parts.push(formatSpeedup(job.bestSpeedup));
  }
  return parts.join(' · ');
}

/** Status bar text for the running jobs; undefined = hide the item. */
export function statusBarText(running: readonly JobState[]): string | undefined {
  if (running.length === 0) {
    return undefined;
  }
  if (running.length === 1) {
    const job = running[0];
    const detail = jobProgressText(job);
    return `$(loading~spin) KernelBand: ${job.kernel}${detail ? ` ${detail}` : ''}`;
  }
  return `$(loading~spin) KernelBand: ${running.length} jobs`;
}

export function statusBarTooltip(running: readonly JobState[]): string {
  if (running.length === 0) {
    return 'KernelBand: no job running';
  }
  const lines = running.map((job) => {
    const detail = jobProgressText(job);
    const msg = job.lastMessage ? ` — ${job.lastMessage}` : '';
    const what = [job.background ? 'background' : undefined, job.kind].filter(Boolean).join(' ');
    return `${job.kernel} (${what ? `${what} ` : ''}job ${job.jobId})${detail ? ` ${detail}` : ''}${msg}`;
  });
  return `KernelBand jobs (click for the output):\n${lines.join('\n')}`;
}

/** Status bar text shown for a while after a job ended. */
export function finishedStatusText(job: JobState): string {
  switch (job.phase) {
    case 'finished':
      return job.status === 'improved' && job.speedup !== undefined && job.speedClaim !== false
        ? `$(check) KernelBand: ${job.kernel} ${formatSpeedup(job.speedup)}`
        : `$(check) KernelBand: ${job.kernel} ${job.status === 'no_improvement' ? 'no speedup' : job.status === 'verified_correct' ? 'correct variant' : 'done'}`;
    case 'cancelled':
      return `$(circle-slash) KernelBand: ${job.kernel} cancelled`;
    case 'failed':
      return `$(error) KernelBand: ${job.kernel} failed`;
    default:
      return `$(loading~spin) KernelBand: ${job.kernel}`;
  }
}

/** One-line summary of a Result for messages and the output channel. */
export function resultSummary(r: OptimizeResult, kernel?: string): string {
  const k = r.kernel || kernel || 'the kernel';
  const evals = n(r.evaluations);
  const evalText = evals !== undefined ? `, ${evals} evaluation${evals === 1 ? '' : 's'}` : '';
  const cpu = !claimsSpeed(r) ? ' (Triton interpreter: CPU times)' : '';
  const path = Array.isArray(r.strategy_path) && r.strategy_path.length ? ` via ${r.strategy_path.join(' → ')}` : '';
  if (!claimsSpeed(r) && (r.status === 'improved' || r.status === 'verified_correct')) {
    // the interpreter ran it: correct, and no speed claim (flows.ts INTERPRETED_NOTE)
    return `${k}: found a variant that is correct; speed needs a GPU${path}${evalText}`;
  }
  switch (r.status) {
    case 'improved': {
      const ci = Array.isArray(r.speedup_ci) && r.speedup_ci.length === 2 && n(r.speedup_ci[0]) !== undefined && n(r.speedup_ci[1]) !== undefined
        ? ` (95% CI ${formatSpeedup(r.speedup_ci[0])}–${formatSpeedup(r.speedup_ci[1])})`
        : '';
      return `${k}: ${formatSpeedup(r.speedup)} faster${ci}, ${formatMs(r.baseline_ms)} → ${formatMs(r.best_ms)}${path}${evalText}`;
    }
    case 'no_improvement': {
      const best = n(r.speedup) !== undefined && !cpu ? ` (best ${formatSpeedup(r.speedup)})` : '';
      return `${k}: no faster variant found${best}${evalText}${cpu}`;
    }
    case 'cancelled':
      return `${k}: cancelled${evalText}`;
    default:
      return `${k}: failed${r.message ? `: ${r.message}` : ''}`;
  }
}

function profileBottleneck(profile: Record<string, unknown>): string | undefined {
  const diag = isObject(profile.diagnosis) ? profile.diagnosis : undefined;
  return diag ? s(diag.bottleneck) : undefined;
}

/** One-line summary of a profile dict (docs/ARCHITECTURE.md "Profiles"). */
export function profileSummary(profile: unknown, kernel?: string): string {
  if (!isObject(profile)) {
    return `${kernel ?? 'kernel'}: no profile`;
  }
  const k = s(profile.kernel) ?? kernel ?? 'kernel';
  const diag = isObject(profile.diagnosis) ? profile.diagnosis : {};
  const tiers = isObject(profile.tiers) ? profile.tiers : {};
  const timing = isObject(tiers.timing) ? tiers.timing : {};
  const time = n(timing.time_per_launch_ms) ?? n(timing.time_ms) ?? n(timing.median_ms) ?? n(profile.time_ms);
  const parts = [`${k}:`];
  if (time !== undefined) {
    parts.push(`${formatMs(time)}${profile.interpreted === true ? ' (CPU, interpreter)' : ''},`);
  }
  // "unknown — unknown" says nothing: name the bottleneck only when one was found
  const bottleneck = s(diag.bottleneck);
  const evidence = s(diag.evidence);
  if (bottleneck && bottleneck !== 'unknown') {
    parts.push(evidence && evidence !== 'unknown' && evidence !== bottleneck ? `${bottleneck} — ${evidence}` : bottleneck);
  } else {
    parts.push(evidence && evidence !== 'unknown' ? `bottleneck not diagnosed — ${evidence}` : 'bottleneck not diagnosed');
  }
  const strategies = Array.isArray(diag.strategies) ? diag.strategies.filter((x) => typeof x === 'string') : [];
  if (strategies.length) {
    parts.push(`(suggested: ${strategies.join(', ')})`);
  }
  const unavailable = isObject(profile.unavailable) ? Object.entries(profile.unavailable) : [];
  if (unavailable.length) {
    parts.push(`[not available: ${unavailable.map(([tier, why]) => `${tier}: ${String(why)}`).join('; ')}]`);
  }
  return parts.join(' ');
}

/** +added/-removed line counts of a unified diff. */
export function diffStats(diff: string | undefined): { added: number; removed: number } {
  let added = 0;
  let removed = 0;
  for (const line of (diff ?? '').split(/\r?\n/)) {
    if (line.startsWith('+++') || line.startsWith('---')) {
      continue;
    }
    if (line.startsWith('+')) {
      added++;
    } else if (line.startsWith('-')) {
      removed++;
    }
  }
  return { added, removed };
}
