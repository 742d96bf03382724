/**
 * Which Python runs the language server. Order:
 *   1. the `kernelband.pythonPath` setting,
 *   2. the Python extension's (ms-python.python) interpreter for the workspace:
 *      `environments.resolveEnvironment(getActiveEnvironmentPath())`, then the older
 *      `settings.getExecutionDetails().execCommand`,
 *   3. `python3` (`python` on Windows) from PATH.
 * Pure: the Python extension's API is passed in, so this is testable without VS Code.
 */

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface Interpreter {
  /** Executable to spawn. */
  command: string;
  /** Arguments that come before `-m kernelband_lsp` (e.g. `conda run -n env python`). */
  args: string[];
  source: InterpreterSource;
}

/** The parts of the ms-python.python extension API that are used (both old and new). */
export interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: unknown): { id?: string; path: string } | undefined;
    resolveEnvironment(
      environment: unknown,
    ): Promise<{ executable?: { uri?: { fsPath: string } | undefined } } | undefined> | undefined;
  };
  settings?: {
    getExecutionDetails?(resource?: unknown): { execCommand: string[] | undefined } | undefined;
  };
}

export interface InterpreterInputs {
  /** Value of `kernelband.pythonPath` (may be empty or undefined). */
  settingPath?: string;
  /** fsPath of the workspace folder, for `${workspaceFolder}` and relative paths. */
  workspaceFolder?: string;
  /** Home directory, for `~`. */
  homeDir?: string;
  /** Resource passed to the Python extension API (the workspace folder's Uri). */
  resource?: unknown;
  /** Loads the Python extension's API; undefined when the extension is not installed. */
  pythonExtension?: () => Promise<PythonExtensionApi | undefined>;
  platform?: string;
  /** Where to report why a source was skipped (never fatal). */
  log?: (message: string) => void;
}

/** Expands `${workspaceFolder}`, `${userHome}`, `~` and a relative path against the folder. */
export function expandPath(raw: string, workspaceFolder?: string, homeDir?: string): string {
  let p = raw.trim();
  if (workspaceFolder) {
    p = p.replace(/\$\{workspaceFolder\}/g, workspaceFolder).replace(/\$\{workspaceRoot\}/g, workspaceFolder);
  }
  if (homeDir) {
    p = p.replace(/\$\{userHome\}/g, homeDir);
    if (p === '~') {
      p = homeDir;
    } else if (p.startsWith('~/') || p.startsWith('~\\')) {
      p = joinPath(homeDir, p.slice(2));
    }
  }
  const looksRelative =
    (p.startsWith('./') || p.startsWith('../') || p.startsWith('.\\') || p.startsWith('..\\')) && !!workspaceFolder;
  if (looksRelative && workspaceFolder) {
    p = joinPath(workspaceFolder, p);
  }
  return p;
}

function joinPath(base: string, rest: string): string {
  const sep = base.includes('\\') && !base.includes('/') ? '\\' : '/';
  const trimmed = base.endsWith('/') || base.endsWith('\\') ? base.slice(0, -1) : base;
  let r = rest;
  while (r.startsWith('./') || r.startsWith('.\\')) {
    r = r.slice(2);
  }
  return `${trimmed}${sep}${r}`;
}

export function defaultPython(platform?: string): string {
  return platform === 'win32' ? 'python' : 'python3';
}

/** Asks the Python extension's API for the interpreter; undefined if it has none. */
export async function interpreterFromPythonApi(
  api: PythonExtensionApi,
  resource?: unknown,
  log?: (message: string) => void,
): Promise<Interpreter | undefined> {
  const envs = api.environments;
  if (envs && typeof envs.getActiveEnvironmentPath === 'function') {
    try {
      const envPath = envs.getActiveEnvironmentPath(resource);
      if (envPath) {
        const resolved = await envs.resolveEnvironment(envPath);
        const exe = resolved?.executable?.uri?.fsPath;
        if (exe) {
          return { command: exe, args: [], source: 'python-extension' };
        }
      }
    } catch (err) {
      log?.(`Python extension environments API failed: ${errorText(err)}`);
    }
  }
  const details = api.settings?.getExecutionDetails;
  if (typeof details === 'function') {
    try {
      const exec = details.call(api.settings, resource)?.execCommand;
      if (Array.isArray(exec) && exec.length > 0 && typeof exec[0] === 'string' && exec[0].trim() !== '') {
        return { command: exec[0], args: exec.slice(1), source: 'python-extension' };
      }
    } catch (err) {
      log?.(`Python extension getExecutionDetails failed: ${errorText(err)}`);
    }
  }
  return undefined;
}

export async function resolveInterpreter(inputs: InterpreterInputs): Promise<Interpreter> {
  const setting = inputs.settingPath?.trim();
  if (setting) {
    return {
      command: expandPath(setting, inputs.workspaceFolder, inputs.homeDir),
      args: [],
      source: 'setting',
    };
  }
  if (inputs.pythonExtension) {
    try {
      const api = await inputs.pythonExtension();
      if (api) {
        const found = await interpreterFromPythonApi(api, inputs.resource, inputs.log);
        if (found) {
          return found;
        }
        inputs.log?.('The Python extension reported no interpreter; using the default.');
      }
    } catch (err) {
      inputs.log?.(`Could not use the Python extension: ${errorText(err)}`);
    }
  }
  return { command: defaultPython(inputs.platform), args: [], source: 'default' };
}

/** A command line for messages (quotes arguments with spaces). */
export function formatCommandLine(command: string, args: readonly string[]): string {
  return [command, ...args].map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a)).join(' ');
}

export function errorText(err: unknown): string {
  if (err instanceof Error) {
    return err.message;
  }
  if (typeof err === 'object' && err !== null && 'message' in err) {
    return String((err as { message: unknown }).message);
  }
  return String(err);
}

/**
 * Python snippet that exits 0 when the server module can be imported, 3 when it is
 * not installed in that interpreter (find_spec does not import it: fast).
 */
export const CHECK_SERVER_SNIPPET =
  "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('kernelband_lsp') else 3)";

export interface ProbeOutcome {
  /** Exit code, or null when the process could not run. */
  code: number | null;
  /** Spawn error code such as ENOENT / EACCES, when the process could not start. */
  errorCode?: string;
  stderr?: string;
}

/** Turns the probe of the interpreter into a user-facing problem, or undefined if it is fine. */
export function launchProblem(interp: Interpreter, probe: ProbeOutcome): string | undefined {
  const where = formatCommandLine(interp.command, interp.args);
  const origin =
    interp.source === 'setting'
      ? ' (from the kernelband.pythonPath setting)'
      : interp.source === 'python-extension'
        ? " (the Python extension's selected interpreter)"
        : '';
  if (probe.errorCode === 'ENOENT') {
    return `Python interpreter "${where}"${origin} was not found. Set kernelband.pythonPath to a Python with KernelBand installed.`;
  }
  if (probe.errorCode) {
    return `Could not run the Python interpreter "${where}"${origin}: ${probe.errorCode}.`;
  }
  if (probe.code === 3) {
    return `The KernelBand language server is not installed in "${where}"${origin}. Install it there with: pip install "kernelband[lsp]", or set kernelband.pythonPath.`;
  }
  if (probe.code !== 0) {
    const tail = (probe.stderr ?? '').trim().split(/\r?\n/).slice(-3).join(' ');
    return `Python interpreter "${where}"${origin} failed (exit code ${probe.code})${tail ? `: ${tail}` : ''}.`;
  }
  return undefined;
}
