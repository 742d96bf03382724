/**
 * The language server behind `ServerHandle`: `<python> -m kernelband_lsp` over stdio with
 * vscode-languageclient, and the interpreter probe. Only extension.ts imports this.
 */
import { execFile } from 'child_process';
import * as vscode from 'vscode';
import {
  CancellationTokenSource,
  ExecuteCommandParams,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  TransportKind,
  WorkDoneProgress,
} from 'vscode-languageclient/node';

import { CLIENT_ID, CLIENT_NAME, CONFIG_SECTION, JOB_EVENT_NOTIFICATION } from './constants';
import type { LaunchSpec, ServerHandle, ServerHooks } from './controller';
import type { Disposable, ExecuteOptions, WorkDoneValue } from './flows';
import { CHECK_SERVER_SNIPPET, Interpreter, ProbeOutcome } from './interpreter';
import { JobEventParams, parseJobEventParams } from './jobs';

export class LanguageServer implements ServerHandle {
  private readonly client: LanguageClient;
  private readonly jobListeners = new Set<(p: JobEventParams) => void>();

  constructor(spec: LaunchSpec, output: vscode.OutputChannel, hooks: ServerHooks) {
    const serverOptions: ServerOptions = {
      command: spec.command,
      args: spec.args,
      transport: TransportKind.stdio,
      options: { env: spec.env, cwd: spec.cwd },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: 'file', language: 'python' }],
      synchronize: { configurationSection: CONFIG_SECTION },
      initializationOptions: spec.initializationOptions,
      outputChannel: output,
      middleware: {
        // Code lenses and code actions invoke the server's commands through VS Code;
        // optimize/profile/applyVariant get the client's progress and diff UI.
        executeCommand: (command, args, next) => hooks.intercept(command, args, async (c, a) => next(c, a)),
        // The found-variant quick fix opens the diff review instead of applying directly.
        provideCodeActions: async (document, range, context, token, next) => {
          const actions = await next(document, range, context, token);
          return actions ? hooks.codeActions(actions, document.uri.toString()) : actions;
        },
      },
    };
    this.client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    this.client.onNotification(JOB_EVENT_NOTIFICATION, (raw: unknown) => {
      const p = parseJobEventParams(raw);
      if (p) {
        for (const l of [...this.jobListeners]) {
          l(p);
        }
      }
    });
  }

  get running(): boolean {
    return this.client.isRunning();
  }

  start(): Promise<void> {
    return this.client.start();
  }

  async stop(): Promise<void> {
    if (this.client.needsStop()) {
      await this.client.stop(3000);
    }
  }

  async execute(command: string, args: Record<string, unknown>, opts?: ExecuteOptions): Promise<unknown> {
    const params: ExecuteCommandParams = { command, arguments: [args] };
    if (opts?.workDoneToken !== undefined) {
      params.workDoneToken = opts.workDoneToken;
    }
    const source = new CancellationTokenSource();
    const sub = opts?.cancel?.onCancellationRequested(() => source.cancel());
    try {
      return await this.client.sendRequest(ExecuteCommandRequest.type, params, source.token);
    } finally {
      sub?.dispose();
      source.dispose();
    }
  }

  onJobEvent(listener: (p: JobEventParams) => void): Disposable {
    this.jobListeners.add(listener);
    return { dispose: () => this.jobListeners.delete(listener) };
  }

  onWorkDoneProgress(token: string, listener: (v: WorkDoneValue) => void): Disposable {
    return this.client.onProgress(WorkDoneProgress.type, token, (v) => listener(v as WorkDoneValue));
  }
}

/** Runs `<python> -c CHECK_SERVER_SNIPPET`: is the interpreter there, with kernelband_lsp? */
export function probeInterpreter(interp: Interpreter, env: Record<string, string>, cwd?: string): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    execFile(
      interp.command,
      [...interp.args, '-c', CHECK_SERVER_SNIPPET],
      { env, cwd, timeout: 30000, windowsHide: true },
      (error, _stdout, stderr) => {
        if (!error) {
          resolve({ code: 0 });
          return;
        }
        const e = error as NodeJS.ErrnoException & { code?: string | number; killed?: boolean };
        if (typeof e.code === 'string') {
          resolve({ code: null, errorCode: e.code, stderr: String(stderr) });
        } else if (e.killed) {
          // Slow to start (cold disk, network home): let the language client try anyway.
          resolve({ code: 0 });
        } else {
          resolve({ code: typeof e.code === 'number' ? e.code : 1, stderr: String(stderr) });
        }
      },
    );
  });
}
