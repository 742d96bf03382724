/** Fakes of the flows' dependencies (no VS Code). */
import { CancelSource, CancelToken, Disposable, ExecuteOptions, FlowDeps, Proposal, ProgressReporter, ReviewDecision, WorkDoneValue } from '../src/flows';
import { JobEventParams } from '../src/jobs';
import { Target } from '../src/kernels';

export interface ExecCall {
  command: string;
  args: Record<string, unknown>;
  opts?: ExecuteOptions;
}

export interface Deferred<T> {
  promise: Promise<T>;
  resolve(v: T): void;
  reject(e: unknown): void;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets pending promise callbacks run. */
export async function flush(times = 5): Promise<void> {
  for (let i = 0; i < times; i++) {
    await new Promise((r) => setImmediate(r));
  }
}

/** The error of a request answered with RequestCancelled (as vscode-jsonrpc's ResponseError). */
export class RequestCancelledError extends Error {
  readonly code = -32800;
  constructor() {
    super('Request cancelled');
  }
}

export class FakeDeps implements FlowDeps {
  calls: ExecCall[] = [];
  /** Per-command replies: a value, or a function of the call (may return a promise). */
  replies: Record<string, unknown | ((call: ExecCall) => unknown)> = {};
  logs: string[] = [];
  messages: { level: string; message: string; actions: string[] }[] = [];
  messageAnswers: Record<string, string | undefined> = {};
  /** Reviews waiting for a decision (the message shown); the answer: a decision, or a promise of one. */
  decisions: { target: Target; message: string }[] = [];
  decision: ReviewDecision | Promise<ReviewDecision> = 'discard';
  pickAnswer: number | undefined = undefined;
  picks: { label: string; description?: string }[][] = [];
  diffs: { target: Target; proposal: Proposal; title: string; evidence: string }[] = [];
  closedDiffs: Target[] = [];
  outputShown = 0;
  finished: [string, string][] = [];
  known = new Set<string>();
  progressTitles: string[] = [];
  reports: { message?: string; increment?: number }[] = [];
  /** Cancels the current progress notification (like the user pressing Cancel). */
  cancelProgress: () => void = () => undefined;
  private jobListeners = new Set<(p: JobEventParams) => void>();
  private progressListeners = new Map<string, (v: WorkDoneValue) => void>();
  private tokenSeq = 0;

  /**
   * Like the language server (pygls): cancelling the request's token answers it at once
   * with RequestCancelled (-32800), whether or not the command's own reply is pending.
   */
  execute = async (command: string, args: Record<string, unknown>, opts?: ExecuteOptions): Promise<unknown> => {
    const call = { command, args, opts };
    this.calls.push(call);
    const reply = this.replies[command];
    const result = typeof reply === 'function' ? (reply as (c: ExecCall) => unknown)(call) : reply;
    const cancel = opts?.cancel;
    if (!cancel) {
      return result;
    }
    return new Promise<unknown>((resolve, reject) => {
      const sub = cancel.onCancellationRequested(() => reject(new RequestCancelledError()));
      Promise.resolve(result).then(
        (v) => {
          sub.dispose();
          resolve(v);
        },
        (e) => {
          sub.dispose();
          reject(e);
        },
      );
    });
  };

  onJobEvent = (listener: (p: JobEventParams) => void): Disposable => {
    this.jobListeners.add(listener);
    return { dispose: () => this.jobListeners.delete(listener) };
  };

  onWorkDoneProgress = (token: string, listener: (v: WorkDoneValue) => void): Disposable => {
    this.progressListeners.set(token, listener);
    return { dispose: () => this.progressListeners.delete(token) };
  };

  withProgress = async <R>(title: string, task: (progress: ProgressReporter, token: CancelToken) => Promise<R>): Promise<R> => {
    this.progressTitles.push(title);
    const source = new CancelSource();
    this.cancelProgress = () => source.cancel();
    return task({ report: (v) => this.reports.push(v) }, source.token);
  };

  newProgressToken = (): string => `tok-${++this.tokenSeq}`;
  log = (line: string): void => {
    this.logs.push(line);
  };
  private say(level: string, message: string, actions: string[]): Promise<string | undefined> {
    this.messages.push({ level, message, actions });
    return Promise.resolve(this.messageAnswers[level]);
  }
  info = (m: string, ...a: string[]) => this.say('info', m, a);
  warn = (m: string, ...a: string[]) => this.say('warn', m, a);
  error = (m: string, ...a: string[]) => this.say('error', m, a);
  decide = async (target: Target, message: string): Promise<ReviewDecision> => {
    this.decisions.push({ target, message });
    return this.decision;
  };
  pick = async (items: { label: string; description?: string }[]) => {
    this.picks.push(items);
    return this.pickAnswer;
  };
  showDiff = async (target: Target, proposal: Proposal, title: string, evidence: string) => {
    this.diffs.push({ target, proposal, title, evidence });
  };
  closeDiff = async (target: Target) => {
    this.closedDiffs.push(target);
  };
  showOutput = () => {
    this.outputShown++;
  };
  knownJobIds = () => new Set(this.known);
  jobFinished = (jobId: string, status: string) => {
    this.finished.push([jobId, status]);
  };

  /** Sends a kernelband/jobEvent notification (`words`: what the server adds: text, line, speedClaim). */
  emit(jobId: string, event: Record<string, unknown>, target: Target, words: Partial<JobEventParams> = {}): void {
    const p: JobEventParams = { jobId, uri: target.uri, kernel: target.kernel, event: { type: String(event.type), ...event }, ...words };
    for (const l of [...this.jobListeners]) {
      l(p);
    }
  }

  progress(token: string, v: WorkDoneValue): void {
    this.progressListeners.get(token)?.(v);
  }

  get jobListenerCount(): number {
    return this.jobListeners.size;
  }

  commandsSent(): string[] {
    return this.calls.map((c) => c.command);
  }
}
