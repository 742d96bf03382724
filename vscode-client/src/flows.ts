/**
 * The user-facing flows (optimize, profile, review-and-apply, cancel) as orchestration
 * over injected dependencies: the controller wires them to VS Code and the language
 * client; tests wire them to fakes. No VS Code imports.
 */
import { ServerCommands } from './constants';
import { errorText } from './interpreter';
import {
  claimsSpeed,
  diffStats,
  eventView,
  formatSpeedup,
  JobEventParams,
  JobState,
  normalizeResult,
  OptimizeResult,
  profileSummary,
  ProgressAccumulator,
  ProgressView,
  resultSummary,
  sameUri,
} from './jobs';
import { Target } from './kernels';

export interface Disposable {
  dispose(): void;
}

/** Structurally compatible with vscode.CancellationToken. */
export interface CancelToken {
  readonly isCancellationRequested: boolean;
  onCancellationRequested(listener: () => void): Disposable;
}

export class CancelSource {
  private listeners: (() => void)[] = [];
  private cancelled = false;
  readonly token: CancelToken;

  constructor() {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const self = this;
    this.token = {
      get isCancellationRequested(): boolean {
        return self.cancelled;
      },
      onCancellationRequested(listener: () => void): Disposable {
        if (self.cancelled) {
          listener();
          return { dispose: () => undefined };
        }
        self.listeners.push(listener);
        return {
          dispose: () => {
            self.listeners = self.listeners.filter((l) => l !== listener);
          },
        };
      },
    };
  }

  cancel(): void {
    if (this.cancelled) {
      return;
    }
    this.cancelled = true;
    const ls = this.listeners;
    this.listeners = [];
    for (const l of ls) {
      l();
    }
  }
}

export interface ExecuteOptions {
  /** workDoneToken for the request: the server reports `$/progress` on it instead of creating its own. */
  workDoneToken?: string;
  /** Cancels the LSP request itself (`$/cancelRequest`). */
  cancel?: CancelToken;
}

export interface WorkDoneValue {
  kind: 'begin' | 'report' | 'end';
  title?: string;
  message?: string;
  percentage?: number;
}

export interface ProgressReporter {
  report(value: { message?: string; increment?: number }): void;
}

/** The {original, proposed, diff, version} answer of kernelband.proposedEdit. */
export interface EvidenceRow {
  label: string;
  value: string;
}

export interface Proposal {
  original: string;
  proposed: string;
  diff?: string;
  version?: number | null;
  speedup?: number;
  speedup_ci?: [number, number];
  /** Timed under the CPU interpreter: correct, but no speed claim. */
  interpreted?: boolean;
  /** What was verified behind the edit (kernelband.proposedEdit's `evidence`). */
  evidence?: EvidenceRow[];
  /** The server's words: "1.43x (95% CI …) faster" or "correct; speed needs a GPU", and a one-line summary. */
  what?: string;
  summary?: string;
}

/** How a review ended: Apply or Discard (the notification or the diff's title bar), or the diff was closed. */
export type ReviewDecision = 'apply' | 'discard' | 'closed';

/** What an interpreted result may claim (never a speedup). */
export const INTERPRETED_NOTE = 'correct; speed needs a GPU';

export interface FlowDeps {
  /** workspace/executeCommand on the server with one JSON object argument. */
  execute(command: string, args: Record<string, unknown>, opts?: ExecuteOptions): Promise<unknown>;
  onJobEvent(listener: (p: JobEventParams) => void): Disposable;
  onWorkDoneProgress?(token: string, listener: (v: WorkDoneValue) => void): Disposable;
  /** A cancellable progress notification. */
  withProgress<R>(title: string, task: (progress: ProgressReporter, token: CancelToken) => Promise<R>): Promise<R>;
  newProgressToken(): string;
  log(line: string): void;
  info(message: string, ...actions: string[]): Promise<string | undefined>;
  warn(message: string, ...actions: string[]): Promise<string | undefined>;
  error(message: string, ...actions: string[]): Promise<string | undefined>;
  /**
   * Waits for the user's decision on a review shown with showDiff, without a modal: Apply
   * or Discard from a notification or from the diff editor's title bar; closing the diff
   * is 'closed' (never an Apply). Dismissing the notification decides nothing.
   */
  decide(target: Target, message: string): Promise<ReviewDecision>;
  /** Quick pick; resolves to the index of the chosen item or undefined. */
  pick?(items: { label: string; description?: string }[], placeHolder: string): Promise<number | undefined>;
  /** Opens the diff (current ↔ proposed) and the evidence (markdown) beside it. */
  showDiff(target: Target, proposal: Proposal, title: string, evidence: string): Promise<void>;
  closeDiff(target: Target): Promise<void>;
  showOutput(): void;
  /** Ids of the jobs already known (e.g. background jobs) when a command starts. */
  knownJobIds?(): ReadonlySet<string>;
  /** Tells the job tracker the command returned (a crashed job sends no final event). */
  jobFinished?(jobId: string, status: string): void;
}

export const SHOW_OUTPUT = 'Show Output';
export const APPLY = 'Apply';
export const DISCARD = 'Discard';
export const REVIEW = 'Review variant';
export const ALL_JOBS = 'All jobs';

export interface JobRun {
  jobId?: string;
  /** The command's reply (undefined when it threw). */
  reply?: unknown;
  /** What the command threw, if it did. */
  error?: unknown;
  /** The user pressed Cancel on the notification. */
  cancelled: boolean;
}

function basename(uri: string): string {
  const path = uri.split('?')[0].split('#')[0];
  const last = path.split('/').pop() ?? path;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

function offerOutput(deps: FlowDeps, shown: Promise<string | undefined>): void {
  void shown.then((choice) => {
    if (choice === SHOW_OUTPUT) {
      deps.showOutput();
    }
  });
}

/** The server's job kind of a job command (the `kind` of kernelband.cancel). */
function jobKind(command: string): 'optimize' | 'profile' | 'check' {
  return command === ServerCommands.profile ? 'profile' : command === ServerCommands.reverify ? 'check' : 'optimize';
}

/**
 * Runs a long server command (optimize, profile) under a cancellable progress notification.
 * The job id is learnt from the first event for this uri+kernel of a job that was not
 * already known when the command started (not an older background job); Cancel sends
 * `kernelband.cancel {jobId}`. Before the id is known, Cancel cancels the request itself
 * (the server answers -32800 at once, which ends this flow) and sends
 * `kernelband.cancel {uri, kernel, kind}`, so a queued or starting job cannot outlive it;
 * an id that still arrives before the reply gets its own kernelband.cancel.
 */
export async function runJob(deps: FlowDeps, command: string, target: Target, title: string): Promise<JobRun> {
  const workDoneToken = deps.newProgressToken();
  return deps.withProgress(title, async (progress, token) => {
    const acc = new ProgressAccumulator();
    const requestCancel = new CancelSource();
    const run: JobRun = { cancelled: false };
    let cancelSent = false;
    const preexisting = deps.knownJobIds?.() ?? new Set<string>();

    const report = (view: ProgressView): void => {
      const increment = acc.increment(view.percent);
      if (view.message !== undefined || increment !== undefined) {
        progress.report({ message: view.message, increment });
      }
    };
    const executeCancel = (args: Record<string, unknown>): void => {
      deps.execute(ServerCommands.cancel, args).catch((err) => deps.log(`kernelband.cancel failed: ${errorText(err)}`));
    };
    const sendCancel = (): void => {
      if (cancelSent || run.jobId === undefined) {
        return;
      }
      cancelSent = true;
      deps.log(`Cancelling job ${run.jobId} (${target.kernel})`);
      executeCancel({ jobId: run.jobId });
    };
    // The id is unknown: the job may be queued or starting, and the request's -32800
    // reply ends this flow (and its listeners) before the id can arrive.
    const sendCancelByKernel = (): void => {
      deps.log(`Cancelling the ${jobKind(command)} job(s) of ${target.kernel} (job id not known yet)`);
      executeCancel({ uri: target.uri, kernel: target.kernel, kind: jobKind(command) });
    };

    // The server words the progress (its $/progress on our workDoneToken: the same text
    // every editor shows, with the phase and elapsed time while no event comes); job
    // events claim the job id, and stand in only while no $/progress arrived.
    let sawServerProgress = false;
    const subs: Disposable[] = [];
    subs.push(
      deps.onJobEvent((p) => {
        if (run.jobId === undefined) {
          // Claim the new job for this kernel (not an older background job).
          if (preexisting.has(p.jobId) || p.kernel !== target.kernel || !sameUri(p.uri, target.uri)) {
            return;
          }
          run.jobId = p.jobId;
          if (run.cancelled) {
            sendCancel();
          }
        } else if (p.jobId !== run.jobId) {
          return;
        }
        if (!sawServerProgress) {
          report(eventView(p));
        }
      }),
    );
    if (deps.onWorkDoneProgress) {
      subs.push(
        deps.onWorkDoneProgress(workDoneToken, (v) => {
          if (v.kind !== 'end' && (v.message !== undefined || v.percentage !== undefined)) {
            sawServerProgress = true;
            report({ message: v.message, percent: v.percentage });
          }
        }),
      );
    }
    subs.push(
      token.onCancellationRequested(() => {
        run.cancelled = true;
        progress.report({ message: 'cancelling…' });
        if (run.jobId !== undefined) {
          sendCancel();
        } else {
          requestCancel.cancel();
          sendCancelByKernel();
        }
      }),
    );
    try {
      run.reply = await deps.execute(command, { uri: target.uri, kernel: target.kernel }, { workDoneToken, cancel: requestCancel.token });
      const replyId = (run.reply as { jobId?: unknown } | undefined)?.jobId;
      if (run.jobId === undefined && (typeof replyId === 'string' || typeof replyId === 'number')) {
        run.jobId = String(replyId);
      }
    } catch (err) {
      run.error = err;
    } finally {
      for (const s of subs) {
        s.dispose();
      }
    }
    return run;
  });
}

export interface OptimizeOutcome {
  result: OptimizeResult;
  review?: ReviewOutcome;
}

/** Optimize a kernel; an improvement goes straight to the diff review. */
export async function runOptimize(deps: FlowDeps, target: Target): Promise<OptimizeOutcome> {
  deps.log(`Optimizing ${target.kernel} in ${target.uri}`);
  const run = await runJob(deps, ServerCommands.optimize, target, `KernelBand: optimizing ${target.kernel}`);
  let result: OptimizeResult;
  if (run.error !== undefined) {
    result = run.cancelled
      ? { status: 'cancelled', kernel: target.kernel }
      : { status: 'failed', kernel: target.kernel, message: errorText(run.error) };
  } else {
    result = normalizeResult(run.reply);
    if (run.cancelled && result.status !== 'improved') {
      result.status = 'cancelled';
    }
  }
  if (result.jobId === undefined && run.jobId !== undefined) {
    result.jobId = run.jobId;
  }
  if (result.jobId !== undefined) {
    deps.jobFinished?.(String(result.jobId), result.status);
  }
  const summary = serverText(run.reply, 'summary') ?? resultSummary(result, target.kernel);
  deps.log(summary);
  for (const w of result.warnings ?? []) {
    deps.log(`  warning: ${w}`);
  }
  if (result.status === 'verified_correct' || (result.status === 'improved' && !claimsSpeed(result))) {
    // measured under the CPU interpreter: correct, no speed claim, so not offered as a
    // speedup; its diff is one click away (the notification's button, the lens, Ctrl+.)
    void deps.info(`KernelBand: ${summary}.`, REVIEW).then((choice) => {
      if (choice === REVIEW) {
        void runReview(deps, target, result);
      }
    });
    return { result };
  }
  switch (result.status) {
    case 'improved':
      return { result, review: await runReview(deps, target, result) };
    case 'no_improvement':
      void deps.info(`KernelBand: ${summary}.${result.message ? ` ${result.message}` : ''}`);
      break;
    case 'cancelled':
      void deps.info(`KernelBand: optimization of ${target.kernel} cancelled.`);
      break;
    default:
      offerOutput(deps, deps.error(`KernelBand: optimizing ${target.kernel} failed: ${result.message ?? 'see the output'}`, SHOW_OUTPUT));
      break;
  }
  return { result };
}

/** A string the server worded in its reply (`summary`, `what`...). */
function serverText(reply: unknown, key: string): string | undefined {
  const v = typeof reply === 'object' && reply !== null ? (reply as Record<string, unknown>)[key] : undefined;
  return typeof v === 'string' && v.trim() !== '' ? v : undefined;
}

export type ReviewOutcome = 'applied' | 'discarded' | 'refused' | 'none' | 'failed';

/** A non-trivial message string of a server reply ("applied" says nothing new). */
function serverMessage(reply: unknown, key: 'message' | 'error'): string | undefined {
  const v = typeof reply === 'object' && reply !== null ? (reply as Record<string, unknown>)[key] : undefined;
  return typeof v === 'string' && v.trim() !== '' && v !== 'applied' ? v : undefined;
}

function asProposal(raw: unknown): Proposal | undefined {
  if (typeof raw !== 'object' || raw === null) {
    return undefined;
  }
  const o = raw as Record<string, unknown>;
  if (typeof o.original !== 'string' || typeof o.proposed !== 'string') {
    return undefined;
  }
  const ci = Array.isArray(o.speedup_ci) && o.speedup_ci.length === 2 && o.speedup_ci.every((x) => typeof x === 'number')
    ? (o.speedup_ci as [number, number])
    : undefined;
  const evidence = Array.isArray(o.evidence)
    ? o.evidence.filter((r): r is EvidenceRow => typeof r === 'object' && r !== null && typeof (r as EvidenceRow).label === 'string' && typeof (r as EvidenceRow).value === 'string')
    : undefined;
  const p: Proposal = {
    original: o.original,
    proposed: o.proposed,
    diff: typeof o.diff === 'string' ? o.diff : undefined,
    version: typeof o.version === 'number' ? o.version : null,
  };
  // only what the server sent (the proposal is also compared as a whole in tests)
  if (typeof o.speedup === 'number') {
    p.speedup = o.speedup;
  }
  if (ci) {
    p.speedup_ci = ci;
  }
  if (o.interpreted === true) {
    p.interpreted = true;
  }
  if (evidence && evidence.length) {
    p.evidence = evidence;
  }
  if (o.speedClaim === false) {
    p.interpreted = true;
  }
  for (const key of ['what', 'summary'] as const) {
    if (typeof o[key] === 'string' && o[key] !== '') {
      p[key] = o[key] as string;
    }
  }
  return p;
}

/** " (1.50×)" from the optimize result, else from the proposal (a stored variant);
 * never a speedup for an interpreted result. */
function speedText(result: OptimizeResult | undefined, proposal: Proposal): string {
  if (proposal.interpreted || (result !== undefined && !claimsSpeed(result))) {
    return ` (${INTERPRETED_NOTE})`;
  }
  if (result?.status === 'improved' && typeof result.speedup === 'number') {
    return ` (${formatSpeedup(result.speedup)})`;
  }
  if (typeof proposal.speedup === 'number') {
    const ci = proposal.speedup_ci ? `, 95% CI ${formatSpeedup(proposal.speedup_ci[0])}–${formatSpeedup(proposal.speedup_ci[1])}` : '';
    return ` (${formatSpeedup(proposal.speedup)}${ci})`;
  }
  return '';
}

/**
 * The evidence shown beside the diff (a markdown document): what the variant claims, the
 * server's evidence rows, the size of the change, and how to decide.
 */
export function evidenceMarkdown(target: Target, proposal: Proposal, result?: OptimizeResult): string {
  const what = proposal.what ?? speedText(result, proposal).replace(/^ \((.*)\)$/, '$1');
  const stats = diffStats(proposal.diff);
  const lines = [`# KernelBand: variant of \`${target.kernel}\``, '', `**${what || 'found variant'}**`, ''];
  if (proposal.summary) {
    lines.push(proposal.summary, '');
  }
  if (proposal.interpreted) {
    lines.push(`Verified correct under Triton's interpreter on the CPU; measuring its speed needs a GPU.`, '');
  }
  const rows = proposal.evidence ?? [];
  if (rows.length) {
    lines.push('| Evidence | |', '| --- | --- |', ...rows.map((r) => `| ${r.label} | ${r.value.replace(/\|/g, '/')} |`), '');
  }
  if (proposal.diff !== undefined) {
    lines.push(`Changes: +${stats.added} −${stats.removed} lines (the diff on the left).`, '');
  }
  lines.push(
    '**Apply** or **Discard**: the ✓ and ✕ buttons in the diff editor\'s title bar, or the notification.',
    'Apply edits the open document (undo restores it); nothing is saved. Closing the diff applies nothing.',
  );
  return lines.join('\n') + '\n';
}

/**
 * Review first, decide after: shows the found variant as a diff (kernelband.proposedEdit)
 * with its evidence beside it, then waits, without a modal, for Apply or Discard (a
 * notification and the diff's title bar); Apply goes through the server
 * (kernelband.applyVariant: a versioned edit). Closing the diff never applies.
 */
export async function runReview(deps: FlowDeps, target: Target, result?: OptimizeResult): Promise<ReviewOutcome> {
  let raw: unknown;
  try {
    raw = await deps.execute(ServerCommands.proposedEdit, { uri: target.uri, kernel: target.kernel });
  } catch (err) {
    offerOutput(deps, deps.error(`KernelBand: could not get the found variant of ${target.kernel}: ${errorText(err)}`, SHOW_OUTPUT));
    return 'failed';
  }
  const proposal = asProposal(raw);
  if (!proposal) {
    // {error} = nothing found, or the found variant no longer fits the current text
    const why = serverMessage(raw, 'error');
    if (why && typeof (raw as { original?: unknown }).original === 'string') {
      deps.log(`The variant of ${target.kernel} cannot be applied: ${why}`);
      void deps.warn(`KernelBand: the found variant of ${target.kernel} cannot be applied: ${why}`);
      return 'refused';
    }
    void deps.info(why ? `KernelBand: ${why}` : `KernelBand: no found variant of ${target.kernel} to apply. Run "KernelBand: Optimize kernel" first.`);
    return 'none';
  }
  if (proposal.original === proposal.proposed) {
    void deps.info(`KernelBand: the found variant of ${target.kernel} is identical to the current code.`);
    return 'none';
  }
  const speed = speedText(result, proposal);
  const title = `${basename(target.uri)} · ${target.kernel}: current ↔ KernelBand${speed}`;
  try {
    await deps.showDiff(target, proposal, title, evidenceMarkdown(target, proposal, result));
  } catch (err) {
    deps.log(`Could not open the diff: ${errorText(err)}`);
  }
  const decision = await deps.decide(
    target,
    `KernelBand: review the variant of ${target.kernel}${speed}, then Apply or Discard (here or in the diff's title bar).`,
  );
  if (decision !== 'apply') {
    await deps.closeDiff(target);
    if (decision === 'closed') {
      deps.log(`The diff of ${target.kernel} was closed: nothing applied.`);
    } else {
      deps.log(`Discarded the variant of ${target.kernel}.`);
      void deps.info(`KernelBand: variant discarded. "KernelBand: Apply found variant" shows it again.`);
    }
    return 'discarded';
  }
  let reply: { applied?: unknown; message?: unknown } | undefined;
  try {
    reply = (await deps.execute(ServerCommands.applyVariant, { uri: target.uri, kernel: target.kernel })) as typeof reply;
  } catch (err) {
    offerOutput(deps, deps.error(`KernelBand: applying the variant of ${target.kernel} failed: ${errorText(err)}`, SHOW_OUTPUT));
    return 'failed';
  }
  const message = serverMessage(reply, 'message');
  if (reply?.applied === true) {
    await deps.closeDiff(target);
    deps.log(`Applied the variant of ${target.kernel}.${message ? ` ${message}` : ''}`);
    void deps.info(`KernelBand: applied the variant of ${target.kernel}${speed}.${message ? ` ${message}` : ''}`);
    return 'applied';
  }
  deps.log(`Variant of ${target.kernel} not applied: ${message ?? 'refused'}`);
  void deps.warn(`KernelBand: the variant of ${target.kernel} was not applied: ${message ?? 'the edit was refused'}.`);
  return 'refused';
}

/** Profile a kernel and show the diagnosis. */
export async function runProfile(deps: FlowDeps, target: Target): Promise<unknown> {
  deps.log(`Profiling ${target.kernel} in ${target.uri}`);
  const run = await runJob(deps, ServerCommands.profile, target, `KernelBand: profiling ${target.kernel}`);
  if (run.jobId !== undefined) {
    deps.jobFinished?.(run.jobId, run.error !== undefined ? (run.cancelled ? 'cancelled' : 'failed') : 'finished');
  }
  if (run.error !== undefined || run.cancelled) {
    if (run.cancelled) {
      void deps.info(`KernelBand: profiling ${target.kernel} cancelled.`);
    } else {
      deps.log(`Profiling ${target.kernel} failed: ${errorText(run.error)}`);
      offerOutput(deps, deps.error(`KernelBand: profiling ${target.kernel} failed: ${errorText(run.error)}`, SHOW_OUTPUT));
    }
    return undefined;
  }
  const reply = run.reply as { profile?: unknown } | undefined;
  const profile = reply && typeof reply === 'object' && 'profile' in reply ? reply.profile : reply;
  if (profile === null || profile === undefined) {
    const why = serverMessage(reply, 'message') ?? 'no profile was produced';
    deps.log(`Profiling ${target.kernel} failed: ${why}`);
    offerOutput(deps, deps.error(`KernelBand: profiling ${target.kernel} failed: ${why}`, SHOW_OUTPUT));
    return undefined;
  }
  const summary = profileSummary(profile, target.kernel);
  deps.log(summary);
  deps.log(JSON.stringify(profile, null, 2));
  offerOutput(deps, deps.info(`KernelBand: ${summary}`, SHOW_OUTPUT));
  return profile;
}

/** kernelband.reverify's answer. */
export interface ReverifyOutcome {
  verified: boolean;
  summary: string;
}

/**
 * Re-verify an applied variant (the lens after Apply): the server runs `kernelband check`
 * of the code as it stands against the original it replaced; the verdict is shown as
 * information when it still passes and as a warning when it does not.
 */
export async function runReverify(deps: FlowDeps, target: Target): Promise<ReverifyOutcome | undefined> {
  deps.log(`Re-verifying the applied variant of ${target.kernel} in ${target.uri}`);
  const run = await runJob(deps, ServerCommands.reverify, target, `KernelBand: re-verifying ${target.kernel}`);
  if (run.jobId !== undefined) {
    deps.jobFinished?.(run.jobId, run.error !== undefined ? (run.cancelled ? 'cancelled' : 'failed') : 'finished');
  }
  if (run.error !== undefined || run.cancelled) {
    if (run.cancelled) {
      void deps.info(`KernelBand: re-verification of ${target.kernel} cancelled.`);
    } else {
      deps.log(`Re-verifying ${target.kernel} failed: ${errorText(run.error)}`);
      offerOutput(deps, deps.error(`KernelBand: re-verifying ${target.kernel} failed: ${errorText(run.error)}`, SHOW_OUTPUT));
    }
    return undefined;
  }
  const reply = (typeof run.reply === 'object' && run.reply !== null ? run.reply : {}) as Record<string, unknown>;
  const summary = serverMessage(reply, 'message') ?? (typeof reply.summary === 'string' ? reply.summary : 'no verdict');
  const verified = reply.verified === true;
  deps.log(`${target.kernel}: ${summary}`);
  if (reply.jobId === null || reply.jobId === undefined) {
    // nothing ran: no applied variant here, an unsaved file...
    void deps.info(`KernelBand: ${summary}`);
  } else if (verified) {
    void deps.info(`KernelBand: ${target.kernel}: ${summary}.`);
  } else {
    offerOutput(deps, deps.warn(`KernelBand: ${target.kernel}: ${summary}.`, SHOW_OUTPUT));
  }
  return { verified, summary };
}

/** Cancel: the only running job, or the one the user picks (or all). */
export async function runCancel(deps: FlowDeps, running: readonly JobState[]): Promise<string[]> {
  let args: Record<string, unknown> = {};
  if (running.length === 1) {
    args = { jobId: running[0].jobId };
  } else if (running.length > 1) {
    if (!deps.pick) {
      return [];
    }
    const items = running.map((j) => ({ label: j.kernel, description: `job ${j.jobId}${j.lastMessage ? ` — ${j.lastMessage}` : ''}` }));
    items.push({ label: ALL_JOBS, description: `${running.length} jobs` });
    const picked = await deps.pick(items, 'Cancel which KernelBand job?');
    if (picked === undefined) {
      return [];
    }
    if (picked < running.length) {
      args = { jobId: running[picked].jobId };
    }
  }
  let reply: unknown;
  try {
    reply = await deps.execute(ServerCommands.cancel, args);
  } catch (err) {
    offerOutput(deps, deps.error(`KernelBand: cancel failed: ${errorText(err)}`, SHOW_OUTPUT));
    return [];
  }
  const raw = (reply as { cancelled?: unknown } | undefined)?.cancelled;
  const cancelled = Array.isArray(raw) ? raw.map(String) : [];
  deps.log(cancelled.length ? `Cancelled job(s): ${cancelled.join(', ')}` : 'No job to cancel.');
  void deps.info(
    cancelled.length ? `KernelBand: cancelled ${cancelled.length} job${cancelled.length === 1 ? '' : 's'}.` : 'KernelBand: no job is running.',
  );
  return cancelled;
}

export type FlowName = 'optimize' | 'profile' | 'review' | 'reverify';

/**
 * Server commands invoked from code lenses / code actions that the client takes over to
 * give them its UI (progress notification, diff review). Others go to the server as is.
 */
export function serverCommandFlow(command: string): FlowName | undefined {
  switch (command) {
    case ServerCommands.optimize:
      return 'optimize';
    case ServerCommands.profile:
      return 'profile';
    case ServerCommands.applyVariant:
    case ServerCommands.reviewVariant:
      return 'review';
    case ServerCommands.reverify:
      return 'reverify';
    default:
      return undefined;
  }
}
