/**
 * KernelBand's agent tools in VS Code's agent mode: language-model tools (package.json
 * `languageModelTools`) whose calls go to `kernelband mcp`, the same server Claude Code or
 * Cursor use, so an agent in the editor gets the same verdicts, from the same code path.
 *
 * - A tool that runs a job (check, profile, optimize) asks the user first
 *   (`prepareInvocation`'s confirmation): it runs the workspace's kernel and harness code,
 *   on the GPU when there is one.
 * - Progress goes to the KernelBand output channel; cancelling the chat request cancels
 *   the MCP request, and the server kills the job's process tree.
 * - A variant found by optimize is linked to the editor's evidence view: the existing
 *   review (diff, evidence, Apply or Discard), which reads the stored result.
 */
import * as vscode from 'vscode';

import { ChildProcess, spawn } from 'child_process';

import { ClientCommands } from './constants';
import { errorText } from './interpreter';
import { McpCancelled, McpClient, ToolCallResult } from './mcpClient';

/** How to start `kernelband mcp` (the language server's interpreter and environment). */
export interface McpLaunch {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** The workspace root: the server refuses paths outside it. */
  root: string;
}

export interface AgentToolSpec {
  /** The language-model tool's name (package.json `languageModelTools[].name`). */
  name: string;
  /** The MCP tool it calls. */
  mcpTool: string;
  /** Runs the workspace's code (a job): asks the user first. */
  job: boolean;
  /** What the tool is doing, for the chat ("Checking a variant of `axpy_kernel`..."). */
  doing: string;
  /** The confirmation's question ("Check a variant of axpy_kernel?"). */
  ask: string;
}

export const AGENT_TOOLS: readonly AgentToolSpec[] = [
  { name: 'kernelband_list_kernels', mcpTool: 'list_kernels', job: false, doing: 'Listing the Triton kernels of', ask: 'List' },
  { name: 'kernelband_check_variant', mcpTool: 'check_variant', job: true, doing: 'Checking a variant of', ask: 'Check a variant of' },
  { name: 'kernelband_profile_kernel', mcpTool: 'profile_kernel', job: true, doing: 'Profiling', ask: 'Profile' },
  { name: 'kernelband_optimize_kernel', mcpTool: 'optimize_kernel', job: true, doing: 'Optimizing', ask: 'Optimize' },
];

/** Optimize outcomes that carry a verified variant the evidence view can show. */
const FOUND = new Set(['improved', 'verified_correct']);
export const REVIEW = 'Review';

export interface AgentToolDeps {
  launch(): Promise<McpLaunch>;
  log(line: string): void;
  /** The extension's version (sent in the MCP handshake). */
  version: string;
  spawn?: (launch: McpLaunch) => ChildProcess;
}

type Input = Record<string, unknown>;

/** The one `kernelband mcp` process behind the tools, started on first use and again after it exits. */
export class AgentServer implements vscode.Disposable {
  private client: McpClient | undefined;
  private root = '';

  constructor(private readonly deps: AgentToolDeps) {}

  async call(tool: string, input: Input, token?: vscode.CancellationToken): Promise<ToolCallResult> {
    const client = await this.connect();
    return client.callTool(tool, input, {
      cancel: token,
      onProgress: (p) => this.deps.log(`${tool}: ${p.message ?? ''}${p.total ? ` (${p.progress}/${p.total})` : ''}`),
    });
  }

  /** The workspace root the server was started on (paths are relative to it). */
  get workspaceRoot(): string {
    return this.root;
  }

  private async connect(): Promise<McpClient> {
    if (this.client?.alive) {
      return this.client;
    }
    this.client?.dispose();
    const launch = await this.deps.launch();
    const proc = (this.deps.spawn ?? spawnServer)(launch);
    const client = new McpClient(proc, (line) => this.deps.log(line));
    this.client = client;
    this.root = launch.root;
    this.deps.log(`Started kernelband mcp for the agent tools (root ${launch.root}).`);
    await client.initialize(this.deps.version);
    return client;
  }

  dispose(): void {
    this.client?.dispose();
    this.client = undefined;
  }
}

/** `kernelband mcp` started as the language server is: its interpreter and environment, the
 * workspace folder as the root. */
export function mcpLaunch(spec: { command: string; interpreter: { args: string[] }; env: Record<string, string>; cwd?: string }): McpLaunch {
  if (!spec.cwd) {
    throw new Error('the KernelBand agent tools need an open workspace folder');
  }
  return { command: spec.command, args: [...spec.interpreter.args, '-m', 'kernelband'], env: spec.env, root: spec.cwd };
}

function spawnServer(launch: McpLaunch): ChildProcess {
  return spawn(launch.command, [...launch.args, 'mcp', '--root', launch.root], {
    cwd: launch.root,
    env: launch.env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The confirmation and progress message of a call. */
export function prepare(spec: AgentToolSpec, input: Input): vscode.PreparedToolInvocation {
  const file = str(input.file) ?? str(input.path) ?? 'the workspace';
  const kernel = str(input.kernel);
  const what = `${kernel ? `\`${kernel}\` in ` : ''}\`${file}\``;
  const prepared: vscode.PreparedToolInvocation = { invocationMessage: `KernelBand: ${spec.doing} ${what}` };
  if (spec.job) {
    const budget = spec.mcpTool === 'optimize_kernel' ? ` with a budget of ${input.budget ?? 16} evaluations` : '';
    prepared.confirmationMessages = {
      title: `KernelBand: ${spec.ask} ${kernel ?? file}?`,
      message: new vscode.MarkdownString(
        `${spec.doing} ${what}${budget} runs the kernel and its harnesses from this workspace ` +
          '(on the GPU when there is one; one KernelBand job at a time). Nothing is written to your files.',
      ),
    };
  }
  return prepared;
}

/** The text a model reads: the server's compact JSON (and, for a found variant, where the user reviews it). */
export function resultText(spec: AgentToolSpec, result: ToolCallResult): string {
  const text = result.content
    .filter((c) => c.type === 'text' && typeof c.text === 'string')
    .map((c) => c.text as string)
    .join('\n');
  if (result.isError) {
    throw new Error(text || `${spec.mcpTool} failed`);
  }
  if (spec.mcpTool === 'optimize_kernel' && foundVariant(result)) {
    return `${text}\nThe user can review this variant (diff and evidence) in the editor: KernelBand: Apply found variant.`;
  }
  return text;
}

function foundVariant(result: ToolCallResult): boolean {
  const s = result.structuredContent;
  return !!s && FOUND.has(String(s.status)) && typeof s.diff === 'string' && s.diff !== '';
}

/** Offers the evidence view (the existing review flow) for a variant the agent found. */
export async function offerReview(result: ToolCallResult, root: string, log: (l: string) => void): Promise<void> {
  const s = result.structuredContent;
  if (!s || !foundVariant(result)) {
    return;
  }
  const kernel = String(s.kernel);
  const uri = vscode.Uri.file(`${root.replace(/\/$/, '')}/${String(s.file)}`).toString();
  const what = s.status === 'improved' ? 'a faster verified variant' : 'a correct variant (speed needs a GPU)';
  log(`The agent's optimize found ${what} of ${kernel} in ${String(s.file)}.`);
  const choice = await vscode.window.showInformationMessage(`KernelBand: the agent found ${what} of ${kernel}.`, REVIEW);
  if (choice === REVIEW) {
    await vscode.commands.executeCommand(ClientCommands.applyVariant, { uri, kernel });
  }
}

function tool(spec: AgentToolSpec, server: AgentServer, log: (l: string) => void): vscode.LanguageModelTool<Input> {
  return {
    prepareInvocation: (options) => prepare(spec, options.input ?? {}),
    async invoke(options, token) {
      let result: ToolCallResult;
      try {
        result = await server.call(spec.mcpTool, options.input ?? {}, token);
      } catch (err) {
        if (err instanceof McpCancelled) {
          throw new vscode.CancellationError();
        }
        log(`${spec.mcpTool} failed: ${errorText(err)}`);
        throw err;
      }
      const text = resultText(spec, result);
      if (spec.mcpTool === 'optimize_kernel') {
        void offerReview(result, server.workspaceRoot, log);
      }
      return new vscode.LanguageModelToolResult([new vscode.LanguageModelTextPart(text)]);
    },
  };
}

/** Registers the tools (and the server behind them); dispose to unregister and stop it. */
export function registerAgentTools(deps: AgentToolDeps): vscode.Disposable {
  const server = new AgentServer(deps);
  const registrations = AGENT_TOOLS.map((spec) => vscode.lm.registerTool(spec.name, tool(spec, server, deps.log)));
  return new vscode.Disposable(() => {
    for (const r of registrations) {
      r.dispose();
    }
    server.dispose();
  });
}
