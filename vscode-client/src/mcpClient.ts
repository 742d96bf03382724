/**
 * A Model Context Protocol client for one server over stdio (newline-delimited JSON-RPC):
 * the `initialize` handshake, `tools/call` with progress notifications, and cancellation
 * (`notifications/cancelled`, which makes `kernelband mcp` kill the job's process tree).
 * Only what the agent tools need; no VS Code imports (the unit tests drive it with a fake
 * server process).
 */
import { ChildProcess } from 'child_process';

import { CancelToken, Disposable } from './flows';

/** The handshake revision asked for: one every MCP SDK still negotiates. */
export const PROTOCOL_VERSION = '2025-06-18';

export interface ToolContent {
  type: string;
  text?: string;
}

/** A `tools/call` result. */
export interface ToolCallResult {
  content: ToolContent[];
  structuredContent?: Record<string, unknown>;
  isError?: boolean;
}

export interface ProgressUpdate {
  progress: number;
  total?: number;
  message?: string;
}

export interface CallOptions {
  onProgress?: (p: ProgressUpdate) => void;
  cancel?: CancelToken;
}

/** The request was cancelled by the caller (the server was told). */
export class McpCancelled extends Error {
  constructor() {
    super('cancelled');
  }
}

interface Pending {
  resolve(v: unknown): void;
  reject(e: unknown): void;
  progressToken?: string;
  onProgress?: (p: ProgressUpdate) => void;
}

interface Message {
  jsonrpc?: string;
  id?: number | string | null;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: { code: number; message: string };
}

export class McpClient implements Disposable {
  private nextId = 1;
  private buffer = '';
  private readonly pending = new Map<number, Pending>();
  private exited: string | undefined;
  private stderrTail: string[] = [];
  private initialized: Promise<void> | undefined;

  /** @param proc the server, spawned with piped stdin/stdout/stderr. */
  constructor(
    private readonly proc: ChildProcess,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    proc.stdout?.setEncoding('utf8');
    proc.stdout?.on('data', (chunk: string) => this.onData(chunk));
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (chunk: string) => {
      for (const line of chunk.split('\n').filter((l) => l.trim())) {
        this.stderrTail = [...this.stderrTail, line].slice(-20);
        this.log(`[kernelband mcp] ${line}`);
      }
    });
    proc.on('error', (err) => this.fail(`could not start: ${err.message}`));
    proc.on('exit', (code, signal) => this.fail(`exited (${signal ?? `code ${code}`})`));
  }

  /** Whether the server process is still there. */
  get alive(): boolean {
    return this.exited === undefined;
  }

  /** The handshake (once). */
  initialize(clientVersion: string): Promise<void> {
    if (!this.initialized) {
      this.initialized = this.request('initialize', {
        protocolVersion: PROTOCOL_VERSION,
        capabilities: {},
        clientInfo: { name: 'kernelband-vscode', version: clientVersion },
      }).then(() => this.notify('notifications/initialized', {}));
    }
    return this.initialized;
  }

  /** `tools/call`; rejects with McpCancelled when `cancel` fires (the server is told). */
  callTool(name: string, args: Record<string, unknown>, opts: CallOptions = {}): Promise<ToolCallResult> {
    return this.request('tools/call', { name, arguments: args }, opts) as Promise<ToolCallResult>;
  }

  dispose(): void {
    this.fail('closed by the client');
    try {
      this.proc.stdin?.end();
    } catch {
      // already gone
    }
    // the server ends its jobs when its stdin closes; a server that hangs is killed
    const timer = setTimeout(() => this.proc.kill('SIGTERM'), 3000);
    timer.unref?.();
  }

  private request(method: string, params: Record<string, unknown>, opts: CallOptions = {}): Promise<unknown> {
    if (this.exited !== undefined) {
      return Promise.reject(new Error(`kernelband mcp ${this.exited}`));
    }
    if (opts.cancel?.isCancellationRequested) {
      return Promise.reject(new McpCancelled());
    }
    const id = this.nextId++;
    const pending: Pending = { resolve: () => undefined, reject: () => undefined, onProgress: opts.onProgress };
    if (opts.onProgress) {
      pending.progressToken = `kb-${id}`;
      params = { ...params, _meta: { progressToken: pending.progressToken } };
    }
    const promise = new Promise<unknown>((resolve, reject) => {
      pending.resolve = resolve;
      pending.reject = reject;
    });
    this.pending.set(id, pending);
    const sub = opts.cancel?.onCancellationRequested(() => {
      if (this.pending.delete(id)) {
        this.notify('notifications/cancelled', { requestId: id, reason: 'cancelled in the editor' });
        pending.reject(new McpCancelled());
      }
    });
    this.send({ jsonrpc: '2.0', id, method, params });
    return promise.finally(() => sub?.dispose());
  }

  private notify(method: string, params: Record<string, unknown>): void {
    this.send({ jsonrpc: '2.0', method, params });
  }

  private send(message: Message): void {
    if (this.exited !== undefined) {
      return;
    }
    this.proc.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  private onData(chunk: string): void {
    this.buffer += chunk;
    let nl: number;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (!line) {
        continue;
      }
      let message: Message;
      try {
        message = JSON.parse(line) as Message;
      } catch {
        this.log(`[kernelband mcp] not JSON-RPC: ${line.slice(0, 200)}`);
        continue;
      }
      this.dispatch(message);
    }
  }

  private dispatch(m: Message): void {
    if (m.method !== undefined && m.id !== undefined && m.id !== null) {
      // a request of the server's (ping, roots, elicitation...): ping answered, the rest declined
      if (m.method === 'ping') {
        this.send({ jsonrpc: '2.0', id: m.id, result: {} });
      } else {
        this.send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: `not supported: ${m.method}` } });
      }
      return;
    }
    if (m.method === 'notifications/progress') {
      const p = m.params ?? {};
      for (const pending of this.pending.values()) {
        if (pending.progressToken !== undefined && pending.progressToken === p.progressToken) {
          pending.onProgress?.({
            progress: Number(p.progress),
            total: typeof p.total === 'number' ? p.total : undefined,
            message: typeof p.message === 'string' ? p.message : undefined,
          });
        }
      }
      return;
    }
    if (m.method !== undefined) {
      return; // other notifications (logging, list changes) are not needed here
    }
    const pending = typeof m.id === 'number' ? this.pending.get(m.id) : undefined;
    if (!pending || typeof m.id !== 'number') {
      return;
    }
    this.pending.delete(m.id);
    if (m.error) {
      pending.reject(new Error(m.error.message));
    } else {
      pending.resolve(m.result);
    }
  }

  private fail(why: string): void {
    if (this.exited !== undefined) {
      return;
    }
    this.exited = why;
    const tail = this.stderrTail.length ? `: ${this.stderrTail[this.stderrTail.length - 1]}` : '';
    for (const pending of this.pending.values()) {
      pending.reject(new Error(`kernelband mcp ${why}${tail}`));
    }
    this.pending.clear();
  }
}
