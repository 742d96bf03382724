/**
 * Wires the pure modules to VS Code: commands, the output channel, the status bar, the
 * proposal documents, settings, the API key and the server's lifecycle. The language
 * client itself is behind `ServerHandle` (server.ts), so this is testable with a stub of
 * the `vscode` module and a fake server.
 */
import * as os from 'os';
import * as vscode from 'vscode';

import { API_KEY_ENV, ClientCommands, CONFIG_SECTION, PROPOSAL_SCHEME, SECRET_API_KEY, SERVER_MODULE, ServerCommands } from './constants';
import {
  APPLY,
  CancelToken,
  DISCARD,
  Disposable,
  ExecuteOptions,
  FlowDeps,
  FlowName,
  ReviewDecision,
  runCancel,
  runOptimize,
  runProfile,
  runReverify,
  runReview,
  serverCommandFlow,
  SHOW_OUTPUT,
  WorkDoneValue,
} from './flows';
import { errorText, formatCommandLine, Interpreter, launchProblem, ProbeOutcome, PythonExtensionApi, resolveInterpreter } from './interpreter';
import { finishedStatusText, formatLogLine, JobEventParams, JobTracker, sameUri, statusBarText, statusBarTooltip } from './jobs';
import { chooseKernel, CodeActionLike, Target, targetFromArgs, variantQuickFix } from './kernels';
import { evidenceTitle, parseProposalQuery, ProposalStore } from './proposals';
import { buildServerEnv, needsRestart, readSettings, redact, toInitializationOptions } from './settings';

/** Everything needed to spawn the server. */
export interface LaunchSpec {
  interpreter: Interpreter;
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  initializationOptions: Record<string, unknown>;
}

/** The running language server, as the controller sees it. */
export interface ServerHandle {
  readonly running: boolean;
  start(): Promise<void>;
  stop(): Promise<void>;
  execute(command: string, args: Record<string, unknown>, opts?: ExecuteOptions): Promise<unknown>;
  onJobEvent(listener: (p: JobEventParams) => void): Disposable;
  onWorkDoneProgress(token: string, listener: (v: WorkDoneValue) => void): Disposable;
}

/** How the server hands commands invoked from lenses/code actions back to the client. */
export type CommandInterceptor = (command: string, args: unknown[], next: (command: string, args: unknown[]) => Promise<unknown>) => Promise<unknown>;

/** Hooks the language client calls (vscode-languageclient middleware). */
export interface ServerHooks {
  /** Server commands run from code lenses / code actions. */
  intercept: CommandInterceptor;
  /** Rewrites the server's code actions for VS Code (found-variant quick fix -> diff review). */
  codeActions<T>(actions: T[], documentUri: string): T[];
}

export interface ControllerDeps {
  createServer(spec: LaunchSpec, output: vscode.OutputChannel, hooks: ServerHooks): ServerHandle;
  /** Checks that the interpreter runs and has the server module (see interpreter.CHECK_SERVER_SNIPPET). */
  probe(interp: Interpreter, env: Record<string, string>, cwd?: string): Promise<ProbeOutcome>;
  env?: Record<string, string | undefined>;
  platform?: string;
  homeDir?: string;
  /** How long a finished job stays in the status bar (ms). */
  finishedStatusMs?: number;
}

const OPEN_SETTINGS = 'Open Settings';
const RESTART_NOW = 'Restart Now';

export class Controller implements vscode.Disposable {
  readonly output: vscode.OutputChannel;
  readonly statusBar: vscode.StatusBarItem;
  readonly jobs = new JobTracker();
  readonly proposals: ProposalStore;
  private server: ServerHandle | undefined;
  private starting: Promise<void> | undefined;
  private apiKey: string | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly jobListeners = new Set<(p: JobEventParams) => void>();
  private readonly proposalChanged = new vscode.EventEmitter<vscode.Uri>();
  private statusTimer: ReturnType<typeof setTimeout> | undefined;
  private progressSeq = 0;
  private pythonApiSubscribed = false;
  /** Reviews waiting for Apply or Discard, by target (one per kernel): the decision's callback. */
  private readonly reviews = new Map<string, (d: ReviewDecision) => void>();

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly deps: ControllerDeps,
  ) {
    this.output = vscode.window.createOutputChannel('KernelBand');
    this.statusBar = vscode.window.createStatusBarItem('kernelband.job', vscode.StatusBarAlignment.Left, 10);
    this.statusBar.name = 'KernelBand job';
    this.statusBar.command = ClientCommands.showOutput;
    this.proposals = new ProposalStore((ref) => this.proposalChanged.fire(vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: ref.path, query: ref.query })));
    this.disposables.push(this.output, this.statusBar, this.proposalChanged);
  }

  /** Registers everything and starts the server (a failed start is reported, not thrown). */
  async activate(): Promise<void> {
    const provider: vscode.TextDocumentContentProvider = {
      onDidChange: this.proposalChanged.event,
      provideTextDocumentContent: (uri) => this.proposals.text(uri.query) ?? '# This KernelBand proposal is no longer available.\n',
    };
    const reg = (id: string, fn: (...args: unknown[]) => unknown) => vscode.commands.registerCommand(id, fn);
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(PROPOSAL_SCHEME, provider),
      reg(ClientCommands.optimize, (...args) => this.command('optimize', args)),
      reg(ClientCommands.profile, (...args) => this.command('profile', args)),
      reg(ClientCommands.applyVariant, (...args) => this.command('review', args)),
      reg(ClientCommands.applyReviewed, (...args) => this.decideReview('apply', args)),
      reg(ClientCommands.discardReviewed, (...args) => this.decideReview('discard', args)),
      reg(ClientCommands.reverify, (...args) => this.command('reverify', args)),
      reg(ClientCommands.createHarness, (...args) => this.createHarness(args)),
      reg(ClientCommands.cancel, () => this.cancel()),
      reg(ClientCommands.setApiKey, () => this.setApiKey()),
      reg(ClientCommands.showOutput, () => this.output.show(true)),
      reg(ClientCommands.restartServer, () => this.restartServer()),
      ...(vscode.window.tabGroups?.onDidChangeTabs
        ? [vscode.window.tabGroups.onDidChangeTabs((e) => this.onTabsClosed(e.closed))]
        : []),
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (needsRestart((key) => e.affectsConfiguration(key))) {
          this.log('kernelband.pythonPath changed: restarting the server.');
          void this.restartServer();
        }
      }),
    );
    this.context.subscriptions.push(this);
    await this.startServer();
  }

  /** Stops the server and waits for it (deactivate). */
  async shutdown(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.dispose();
    await server?.stop().catch(() => undefined);
  }

  dispose(): void {
    if (this.statusTimer) {
      clearTimeout(this.statusTimer);
    }
    const server = this.server;
    this.server = undefined;
    void server?.stop().catch(() => undefined);
    for (const d of this.disposables.splice(0)) {
      d.dispose();
    }
  }

  log(line: string): void {
    this.output.appendLine(redact(line, this.apiKey));
  }

  get isServerRunning(): boolean {
    return this.server?.running ?? false;
  }

  // ---- server lifecycle -------------------------------------------------------------

  private workspaceFolder(): vscode.WorkspaceFolder | undefined {
    const active = vscode.window.activeTextEditor?.document.uri;
    return (active && vscode.workspace.getWorkspaceFolder(active)) || vscode.workspace.workspaceFolders?.[0];
  }

  private async pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
    const ext = vscode.extensions.getExtension<PythonExtensionApi>('ms-python.python');
    if (!ext) {
      return undefined;
    }
    if (!ext.isActive) {
      await Promise.race([ext.activate(), new Promise((_resolve, reject) => setTimeout(() => reject(new Error('timed out activating ms-python.python')), 15000))]);
    }
    const api = ext.exports;
    this.subscribeToPythonApi(api);
    return api;
  }

  private subscribeToPythonApi(api: PythonExtensionApi | undefined): void {
    const envs = (api as { environments?: { onDidChangeActiveEnvironmentPath?: vscode.Event<unknown> } } | undefined)?.environments;
    if (this.pythonApiSubscribed || typeof envs?.onDidChangeActiveEnvironmentPath !== 'function') {
      return;
    }
    this.pythonApiSubscribed = true;
    this.disposables.push(
      envs.onDidChangeActiveEnvironmentPath(() => {
        if (!vscode.workspace.getConfiguration(CONFIG_SECTION).get<string>('pythonPath')) {
          this.log("The Python extension's interpreter changed: restarting the server.");
          void this.restartServer();
        }
      }),
    );
  }

  /** Interpreter, environment and initialization options for the server. */
  async resolveLaunch(): Promise<LaunchSpec> {
    const folder = this.workspaceFolder();
    const config = vscode.workspace.getConfiguration(CONFIG_SECTION, folder?.uri);
    const interpreter = await resolveInterpreter({
      settingPath: config.get<string>('pythonPath'),
      workspaceFolder: folder?.uri.fsPath,
      homeDir: this.deps.homeDir ?? os.homedir(),
      resource: folder?.uri,
      pythonExtension: () => this.pythonExtensionApi(),
      platform: this.deps.platform ?? process.platform,
      log: (m) => this.log(m),
    });
    this.apiKey = (await this.context.secrets.get(SECRET_API_KEY)) || undefined;
    return {
      interpreter,
      command: interpreter.command,
      args: [...interpreter.args, '-m', SERVER_MODULE],
      env: buildServerEnv(this.deps.env ?? process.env, this.apiKey),
      cwd: folder?.uri.fsPath,
      initializationOptions: toInitializationOptions(readSettings((k) => config.get(k))),
    };
  }

  startServer(): Promise<void> {
    if (!this.starting) {
      this.starting = this.doStart().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  private async doStart(): Promise<void> {
    let spec: LaunchSpec;
    try {
      spec = await this.resolveLaunch();
    } catch (err) {
      this.reportStartFailure(`KernelBand: could not prepare the language server: ${errorText(err)}`);
      return;
    }
    const where = formatCommandLine(spec.command, spec.args);
    const keyNote = spec.env[API_KEY_ENV] ? ` (${API_KEY_ENV} set)` : '';
    this.log(`Starting the language server: ${where} [interpreter from ${spec.interpreter.source}]${keyNote}`);
    const probe = await this.deps.probe(spec.interpreter, spec.env, spec.cwd).catch(
      (err): ProbeOutcome => ({ code: null, errorCode: errorText(err) }),
    );
    const problem = launchProblem(spec.interpreter, probe);
    if (problem) {
      this.reportStartFailure(`KernelBand: ${problem}`);
      return;
    }
    const server = this.deps.createServer(spec, this.output, {
      intercept: (command, args, next) => this.intercept(command, args, next),
      codeActions: (actions, documentUri) => this.rewriteCodeActions(actions, documentUri),
    });
    server.onJobEvent((p) => this.onJobEvent(p));
    this.server = server;
    try {
      await server.start();
      this.log('The language server is running.');
    } catch (err) {
      this.server = undefined;
      await server.stop().catch(() => undefined);
      this.reportStartFailure(`KernelBand: the language server (${where}) failed to start: ${errorText(err)}`);
    }
  }

  private reportStartFailure(message: string): void {
    this.log(message);
    void vscode.window.showErrorMessage(message, OPEN_SETTINGS, SHOW_OUTPUT).then((choice) => {
      if (choice === OPEN_SETTINGS) {
        void vscode.commands.executeCommand('workbench.action.openSettings', 'kernelband.pythonPath');
      } else if (choice === SHOW_OUTPUT) {
        this.output.show(true);
      }
    });
  }

  async restartServer(): Promise<void> {
    await this.starting?.catch(() => undefined);
    const old = this.server;
    this.server = undefined;
    if (old) {
      this.log('Stopping the language server.');
      await old.stop().catch((err) => this.log(`Stopping failed: ${errorText(err)}`));
    }
    for (const job of this.jobs.running()) {
      this.jobs.finish(job.jobId, 'cancelled');
    }
    this.renderStatus();
    await this.startServer();
  }

  // ---- job events and status bar ------------------------------------------------------

  onJobEvent(p: JobEventParams): void {
    const job = this.jobs.update(p);
    this.log(formatLogLine(p));
    for (const listener of [...this.jobListeners]) {
      try {
        listener(p);
      } catch (err) {
        this.log(`job event listener failed: ${errorText(err)}`);
      }
    }
    this.renderStatus(job.phase !== 'running' ? job.jobId : undefined);
  }

  private renderStatus(finishedJobId?: string): void {
    const running = this.jobs.running();
    const text = statusBarText(running);
    if (text) {
      if (this.statusTimer) {
        clearTimeout(this.statusTimer);
        this.statusTimer = undefined;
      }
      this.statusBar.text = text;
      this.statusBar.tooltip = statusBarTooltip(running);
      this.statusBar.show();
      return;
    }
    const finished = finishedJobId ? this.jobs.get(finishedJobId) : undefined;
    if (finished) {
      this.statusBar.text = finishedStatusText(finished);
      this.statusBar.tooltip = finished.lastMessage ? `KernelBand: ${finished.kernel}: ${finished.lastMessage}` : 'KernelBand';
      this.statusBar.show();
      if (this.statusTimer) {
        clearTimeout(this.statusTimer);
      }
      this.statusTimer = setTimeout(() => {
        this.statusTimer = undefined;
        this.jobs.prune();
        if (this.jobs.running().length === 0) {
          this.statusBar.hide();
        }
      }, this.deps.finishedStatusMs ?? 15000);
      return;
    }
    if (!this.statusTimer) {
      this.jobs.prune();
      this.statusBar.hide();
    }
  }

  // ---- commands -------------------------------------------------------------------

  /** Server commands invoked from code lenses / code actions get the client's UI. */
  async intercept(command: string, args: unknown[], next: (command: string, args: unknown[]) => Promise<unknown>): Promise<unknown> {
    const flow = serverCommandFlow(command);
    if (!flow) {
      return next(command, args);
    }
    return this.command(flow, args);
  }

  /**
   * The server's "Apply found variant" quick fix carries its edit; in VS Code it runs the
   * review instead (diff, then Apply/Discard), which applies through kernelband.applyVariant.
   */
  rewriteCodeActions<T>(actions: T[], documentUri: string): T[] {
    for (const action of actions) {
      // a bare vscode.Command (command: string) is not a code action with an edit
      const a = action as unknown as CodeActionLike & { command?: unknown };
      if (typeof action !== 'object' || action === null || typeof a.command === 'string') {
        continue;
      }
      const target = variantQuickFix(a, documentUri);
      if (target) {
        a.edit = undefined;
        a.command = { title: a.title ?? 'Apply found variant', command: ClientCommands.applyVariant, arguments: [target] };
        this.log(`Quick fix for ${target.kernel} opens the diff review before applying.`);
      }
    }
    return actions;
  }

  async command(flow: FlowName, args: unknown[]): Promise<unknown> {
    const target = await this.resolveTarget(args);
    if (!target) {
      return undefined;
    }
    const deps = this.flowDeps();
    switch (flow) {
      case 'optimize':
        return runOptimize(deps, target);
      case 'profile':
        return runProfile(deps, target);
      case 'review':
        return runReview(deps, target);
      case 'reverify':
        return runReverify(deps, target);
    }
  }

  private async createHarness(args: unknown[]): Promise<void> {
    const target = await this.resolveTarget(args);
    if (!target) {
      return;
    }
    try {
      const reply = (await this.requireServer().execute(ServerCommands.createHarness, { uri: target.uri, kernel: target.kernel })) as
        | { applied?: unknown; message?: unknown }
        | undefined;
      if (reply && reply.applied === false) {
        const why = typeof reply.message === 'string' && reply.message ? reply.message : 'the edit was refused';
        this.log(`Create harness for ${target.kernel}: ${why}`);
        void vscode.window.showWarningMessage(`KernelBand: no harness stub inserted for ${target.kernel}: ${why}`);
        return;
      }
      this.log(`Inserted a harness stub for ${target.kernel}.`);
    } catch (err) {
      this.log(`Create harness failed: ${errorText(err)}`);
      void vscode.window.showErrorMessage(`KernelBand: could not create a harness for ${target.kernel}: ${errorText(err)}`);
    }
  }

  private async cancel(): Promise<string[]> {
    return runCancel(this.flowDeps(), this.jobs.running());
  }

  async setApiKey(): Promise<void> {
    const value = await vscode.window.showInputBox({
      title: 'KernelBand: API key',
      prompt: 'API key for the OpenAI-compatible endpoint (kernelband.baseUrl). Stored in VS Code secret storage; leave empty to remove the stored key.',
      password: true,
      ignoreFocusOut: true,
      placeHolder: 'sk-…',
    });
    if (value === undefined) {
      return;
    }
    const key = value.trim();
    if (key === '') {
      await this.context.secrets.delete(SECRET_API_KEY);
      this.log('API key removed from secret storage.');
    } else {
      await this.context.secrets.store(SECRET_API_KEY, key);
      this.log('API key stored in secret storage.');
    }
    const generator = vscode.workspace.getConfiguration(CONFIG_SECTION).get<string>('generator');
    const note = key !== '' && generator !== 'openai' ? ' It is used when kernelband.generator is "openai".' : '';
    if (this.jobs.running().length > 0) {
      const choice = await vscode.window.showInformationMessage(
        `KernelBand: API key ${key === '' ? 'removed' : 'saved'}.${note} The server must restart to use it, which stops the running job.`,
        RESTART_NOW,
      );
      if (choice === RESTART_NOW) {
        await this.restartServer();
      }
      return;
    }
    void vscode.window.showInformationMessage(`KernelBand: API key ${key === '' ? 'removed' : 'saved'}.${note}`);
    await this.restartServer();
  }

  private requireServer(): ServerHandle {
    if (!this.server || !this.server.running) {
      throw new Error('the KernelBand language server is not running (see "KernelBand: Show output", or run "KernelBand: Restart language server")');
    }
    return this.server;
  }

  /** {uri, kernel} from the arguments, else the active editor and the kernel at the cursor. */
  async resolveTarget(args: readonly unknown[]): Promise<Target | undefined> {
    const partial = targetFromArgs(args);
    const editor = vscode.window.activeTextEditor;
    let uri = partial.uri;
    let document: vscode.TextDocument | undefined;
    if (!uri) {
      if (!editor || editor.document.languageId !== 'python') {
        void vscode.window.showErrorMessage('KernelBand: open a Python file with a Triton kernel first.');
        return undefined;
      }
      document = editor.document;
      uri = document.uri.toString();
    }
    if (partial.kernel) {
      return { uri, kernel: partial.kernel };
    }
    if (!document) {
      document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
      if (!document) {
        try {
          document = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
        } catch {
          document = undefined;
        }
      }
    }
    const cursorLine = editor && document && editor.document.uri.toString() === document.uri.toString() ? editor.selection.active.line : undefined;
    const choice = chooseKernel(undefined, document?.getText(), cursorLine);
    if (choice.kernel) {
      return { uri, kernel: choice.kernel };
    }
    if (choice.pick && choice.pick.length > 0) {
      const picked = await vscode.window.showQuickPick(choice.pick, { placeHolder: 'Which Triton kernel?' });
      return picked ? { uri, kernel: picked } : undefined;
    }
    const typed = await vscode.window.showInputBox({
      prompt: 'No @triton.jit function found in this file. Kernel name:',
      ignoreFocusOut: true,
      validateInput: (v) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.trim()) ? undefined : 'A Python identifier'),
    });
    return typed && typed.trim() ? { uri, kernel: typed.trim() } : undefined;
  }

  /** The flows' dependencies, bound to VS Code and the current server. */
  flowDeps(): FlowDeps {
    return {
      execute: (command, args, opts) => {
        try {
          return this.requireServer().execute(command, args, opts);
        } catch (err) {
          return Promise.reject(err);
        }
      },
      onJobEvent: (listener) => {
        this.jobListeners.add(listener);
        return { dispose: () => this.jobListeners.delete(listener) };
      },
      onWorkDoneProgress: (token, listener) => (this.server ? this.server.onWorkDoneProgress(token, listener) : { dispose: () => undefined }),
      withProgress: (title, task) =>
        Promise.resolve(
          vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (progress, token) =>
            task(progress, token as CancelToken),
          ),
        ),
      newProgressToken: () => `kernelband-${process.pid}-${Date.now()}-${++this.progressSeq}`,
      log: (line) => this.log(line),
      info: (message, ...actions) => Promise.resolve(vscode.window.showInformationMessage(message, ...actions)),
      warn: (message, ...actions) => Promise.resolve(vscode.window.showWarningMessage(message, ...actions)),
      error: (message, ...actions) => Promise.resolve(vscode.window.showErrorMessage(message, ...actions)),
      decide: (target, message) => this.waitForDecision(target, message),
      pick: async (items, placeHolder) => {
        const indexed = items.map((it, index) => ({ ...it, index }));
        const picked = await vscode.window.showQuickPick(indexed, { placeHolder });
        return picked?.index;
      },
      showDiff: async (target, proposal, title, evidence) => {
        const refs = this.proposals.put(target, proposal.original, proposal.proposed, evidence);
        const uri = (ref: { path: string; query: string }) => vscode.Uri.from({ scheme: PROPOSAL_SCHEME, path: ref.path, query: ref.query });
        // not a preview: a preview diff replaces the user's preview tab, and closing it
        // would leave the file closed
        await vscode.commands.executeCommand('vscode.diff', uri(refs.original), uri(refs.proposed), title, { preview: false });
        await this.showEvidence(uri(refs.evidence));
      },
      closeDiff: async (target) => {
        await this.closeProposalTabs(target);
        this.proposals.delete(target);
        await this.revealDocument(target.uri);
      },
      showOutput: () => this.output.show(true),
      knownJobIds: () => new Set(this.jobs.running().map((j) => j.jobId)),
      jobFinished: (jobId, status) => {
        this.jobs.finish(jobId, status);
        this.renderStatus(jobId);
      },
    };
  }

  // ---- review decisions -------------------------------------------------------------

  /**
   * Resolves when the user decides a review: Apply or Discard in a (non-modal)
   * notification or the diff editor's title bar, or the diff tab is closed ('closed').
   * Dismissing the notification decides nothing: the title bar still can.
   */
  private waitForDecision(target: Target, message: string): Promise<ReviewDecision> {
    return new Promise((resolve) => {
      const key = reviewKey(target);
      this.reviews.get(key)?.('closed'); // a newer review of the same kernel replaces an older one
      let done = false;
      const finish = (d: ReviewDecision): void => {
        if (done) {
          return;
        }
        done = true;
        if (this.reviews.get(key) === finish) {
          this.reviews.delete(key);
        }
        void vscode.commands.executeCommand('setContext', 'kernelband.reviewing', this.reviews.size > 0);
        resolve(d);
      };
      this.reviews.set(key, finish);
      void vscode.commands.executeCommand('setContext', 'kernelband.reviewing', true);
      void Promise.resolve(vscode.window.showInformationMessage(message, APPLY, DISCARD)).then((choice) => {
        if (choice === APPLY) {
          finish('apply');
        } else if (choice === DISCARD) {
          finish('discard');
        }
      });
    });
  }

  /** The diff editor's title-bar buttons: args[0] is the diff's resource (a proposal document). */
  private async decideReview(decision: 'apply' | 'discard', args: unknown[]): Promise<void> {
    const target = this.reviewTargetOf(args[0]) ?? this.reviewTargetOf(this.activeProposalUri());
    const finish = target ? this.reviews.get(reviewKey(target)) : undefined;
    if (!finish) {
      void vscode.window.showInformationMessage('KernelBand: no variant is waiting for review here. "KernelBand: Apply found variant" opens one.');
      return;
    }
    finish(decision);
  }

  private reviewTargetOf(v: unknown): Target | undefined {
    const uri = v as { scheme?: string; query?: string } | undefined;
    if (!uri || uri.scheme !== PROPOSAL_SCHEME || typeof uri.query !== 'string') {
      return undefined;
    }
    return parseProposalQuery(uri.query)?.target;
  }

  private activeProposalUri(): vscode.Uri | undefined {
    const tab = vscode.window.tabGroups?.activeTabGroup?.activeTab;
    const input = tab?.input as { modified?: vscode.Uri; uri?: vscode.Uri } | undefined;
    return input?.modified ?? input?.uri ?? vscode.window.activeTextEditor?.document.uri;
  }

  /** Closing a review's diff decides it: nothing is applied. */
  private onTabsClosed(tabs: readonly vscode.Tab[]): void {
    for (const tab of tabs) {
      const input = tab.input as { modified?: vscode.Uri } | undefined;
      const target = this.reviewTargetOf(input?.modified);
      if (target) {
        this.reviews.get(reviewKey(target))?.('closed');
      }
    }
  }

  /**
   * The evidence beside the diff (a markdown document), without taking the focus: the diff
   * stays the active editor, so its title bar shows the review's Apply and Discard.
   */
  private async showEvidence(uri: vscode.Uri): Promise<void> {
    try {
      const doc = await vscode.workspace.openTextDocument(uri);
      await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true, preview: true });
    } catch (err) {
      this.log(`Could not show the evidence: ${errorText(err)}`);
    }
  }

  /** Brings the kernel's file back to the front once the diff is gone. */
  private async revealDocument(uri: string): Promise<void> {
    const doc = vscode.workspace.textDocuments.find((d) => sameUri(d.uri.toString(), uri));
    try {
      const opts = { preview: false, preserveFocus: false };
      await (doc ? vscode.window.showTextDocument(doc, opts) : vscode.window.showTextDocument(vscode.Uri.parse(uri), opts));
    } catch (err) {
      this.log(`Could not show ${uri} again: ${errorText(err)}`);
    }
  }

  private async closeProposalTabs(target: Target): Promise<void> {
    const groups = vscode.window.tabGroups;
    if (!groups) {
      return;
    }
    const evidenceLabel = evidenceTitle(target);
    const tabs: vscode.Tab[] = [];
    for (const group of groups.all) {
      for (const tab of group.tabs) {
        const input = tab.input as { modified?: vscode.Uri; uri?: vscode.Uri } | undefined;
        const doc = input?.modified ?? input?.uri;
        const parsed = doc && doc.scheme === PROPOSAL_SCHEME ? parseProposalQuery(doc.query) : undefined;
        const ours = parsed && parsed.target.kernel === target.kernel && parsed.target.uri === target.uri;
        // the markdown preview of the evidence is a webview tab: known by its label
        if (ours || (typeof tab.label === 'string' && tab.label.includes(evidenceLabel))) {
          tabs.push(tab);
        }
      }
    }
    if (tabs.length) {
      await groups.close(tabs).then(undefined, () => undefined);
    }
  }
}

function reviewKey(target: Target): string {
  return `${target.uri}\u0000${target.kernel}`;
}
