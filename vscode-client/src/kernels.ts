/**
 * Which kernel a command is about. Commands get {uri, kernel} from the server's code
 * lenses and code actions; from the command palette the client picks the `@triton.jit`
 * function under the cursor (a light scan of the text; the server's AST detection is the
 * authority, this only chooses a name to send it). Pure: no VS Code imports.
 */

export interface KernelLocation {
  name: string;
  /** 0-based line of the first decorator. */
  startLine: number;
  /** 0-based line of `def`. */
  defLine: number;
  /** 0-based last line of the body (trailing blank lines excluded). */
  endLine: number;
}

export interface Target {
  uri: string;
  kernel: string;
}

const DEF_RE = /^(\s*)(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(/;
const DECORATOR_RE = /^(\s*)@\s*(.*)$/;
/** Callee of `@triton.jit`, `@jit`, `@triton.jit(...)` (not `@torch.jit.script`); the server also resolves aliases. */
const JIT_RE = /(^|\.)\s*jit$/;

function stripStringsAndComment(line: string): string {
  return line.replace(/'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"/g, '""').replace(/#.*$/, '');
}

function bracketDelta(line: string): number {
  let d = 0;
  for (const ch of stripStringsAndComment(line)) {
    if (ch === '(' || ch === '[' || ch === '{') {
      d++;
    } else if (ch === ')' || ch === ']' || ch === '}') {
      d--;
    }
  }
  return d;
}

function indentOf(line: string): number {
  const m = /^[ \t]*/.exec(line);
  return m ? m[0].replace(/\t/g, '    ').length : 0;
}

function isBlankOrComment(line: string): boolean {
  const t = line.trim();
  return t === '' || t.startsWith('#');
}

/** Finds the functions decorated with a `jit` decorator (directly or in a stack). */
export function findKernels(text: string): KernelLocation[] {
  const lines = text.split(/\r?\n/);
  const kernels: KernelLocation[] = [];
  let decoratorStart = -1;
  let decoratorText = '';
  let depth = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (depth > 0) {
      // continuation of a multi-line decorator such as @triton.autotune(configs=[...])
      decoratorText += ` ${line.trim()}`;
      depth += bracketDelta(line);
      continue;
    }
    const dec = DECORATOR_RE.exec(line);
    if (dec) {
      if (decoratorStart < 0) {
        decoratorStart = i;
        decoratorText = '';
      }
      decoratorText += ` @${dec[2]}`;
      depth = Math.max(0, bracketDelta(line));
      continue;
    }
    const def = DEF_RE.exec(line);
    if (def) {
      const decorators = decoratorStart >= 0 ? decoratorText : '';
      const isKernel = decorators.split('@').some((d) => JIT_RE.test(d.split('(')[0].trim()));
      if (isKernel) {
        kernels.push({ name: def[2], startLine: decoratorStart, defLine: i, endLine: blockEnd(lines, i, indentOf(line)) });
      }
      decoratorStart = -1;
      decoratorText = '';
      continue;
    }
    if (!isBlankOrComment(line)) {
      decoratorStart = -1;
      decoratorText = '';
    }
  }
  return kernels;
}

function blockEnd(lines: string[], defLine: number, defIndent: number): number {
  // skip the (possibly multi-line) signature
  let i = defLine;
  let depth = bracketDelta(lines[i]);
  while (depth > 0 && i + 1 < lines.length) {
    i++;
    depth += bracketDelta(lines[i]);
  }
  let last = i;
  for (let j = i + 1; j < lines.length; j++) {
    const line = lines[j];
    if (isBlankOrComment(line)) {
      continue;
    }
    if (indentOf(line) <= defIndent) {
      break;
    }
    last = j;
  }
  return last;
}

/** The kernel whose decorators, signature or body contain the line, if any. */
export function kernelAtLine(kernels: readonly KernelLocation[], line: number): KernelLocation | undefined {
  return kernels.find((k) => line >= k.startLine && line <= k.endLine);
}

function uriString(v: unknown): string | undefined {
  if (typeof v === 'string' && v !== '') {
    return v;
  }
  if (typeof v === 'object' && v !== null && 'scheme' in v && typeof (v as { toString: unknown }).toString === 'function') {
    return String(v);
  }
  return undefined;
}

/**
 * Reads a command's arguments: `{uri, kernel}` (server lenses/actions; also nested in an
 * array), a Uri (explorer/editor title menus) or nothing. Returns what is known.
 */
export function targetFromArgs(args: readonly unknown[]): Partial<Target> {
  const first = args.length === 1 && Array.isArray(args[0]) ? (args[0] as unknown[])[0] : args[0];
  if (typeof first === 'object' && first !== null && !('scheme' in first)) {
    const o = first as Record<string, unknown>;
    const out: Partial<Target> = {};
    const uri = uriString(o.uri) ?? uriString(o.textDocument && (o.textDocument as Record<string, unknown>).uri);
    if (uri) {
      out.uri = uri;
    }
    const kernel = typeof o.kernel === 'string' ? o.kernel : typeof o.name === 'string' ? o.name : undefined;
    if (kernel) {
      out.kernel = kernel;
    }
    return out;
  }
  const uri = uriString(first);
  if (uri) {
    const out: Partial<Target> = { uri };
    if (typeof args[1] === 'string' && args[1] !== '') {
      out.kernel = args[1];
    }
    return out;
  }
  return {};
}

export interface KernelChoice {
  /** Chosen without asking (from the arguments, the cursor, or the only kernel). */
  kernel?: string;
  /** Ask the user among these. */
  pick?: string[];
}

/** Chooses the kernel: explicit name > kernel under the cursor > the only one > ask. */
export function chooseKernel(explicit: string | undefined, text: string | undefined, cursorLine: number | undefined): KernelChoice {
  if (explicit) {
    return { kernel: explicit };
  }
  const kernels = text === undefined ? [] : findKernels(text);
  if (cursorLine !== undefined) {
    const here = kernelAtLine(kernels, cursorLine);
    if (here) {
      return { kernel: here.name };
    }
  }
  const names = [...new Set(kernels.map((k) => k.name))];
  if (names.length === 1) {
    return { kernel: names[0] };
  }
  return { pick: names };
}

/** The shape of a code action as far as variantQuickFix looks at it (vscode.CodeAction fits). */
export interface CodeActionLike {
  title?: string;
  kind?: { value: string } | string;
  edit?: unknown;
  data?: unknown;
}

/**
 * The server's "Apply found variant of K..." quick fix carries the edit itself; the VS Code
 * client turns it into its review command (diff first, then Apply/Discard). Returns the
 * target when the action is that quick fix.
 */
export function variantQuickFix(action: CodeActionLike, documentUri: string): Target | undefined {
  const kind = typeof action.kind === 'string' ? action.kind : action.kind?.value;
  if (!kind || !(kind === 'quickfix' || kind.startsWith('quickfix.'))) {
    return undefined;
  }
  if (!action.edit || typeof action.title !== 'string' || !/^Apply found variant\b/i.test(action.title)) {
    return undefined;
  }
  const data = typeof action.data === 'object' && action.data !== null ? (action.data as Record<string, unknown>) : {};
  const kernel = typeof data.kernel === 'string' ? data.kernel : /^Apply found variant of ([A-Za-z_][A-Za-z0-9_]*)/i.exec(action.title)?.[1];
  if (!kernel) {
    return undefined;
  }
  const uri = typeof data.uri === 'string' && data.uri ? data.uri : documentUri;
  return { uri, kernel };
}
