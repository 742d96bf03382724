import * as assert from 'assert';

import {
  defaultPython,
  expandPath,
  formatCommandLine,
  interpreterFromPythonApi,
  launchProblem,
  PythonExtensionApi,
  resolveInterpreter,
} from '../src/interpreter';

function pythonApi(opts: { envExe?: string; execCommand?: string[]; envThrows?: boolean }): PythonExtensionApi & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    environments: {
      getActiveEnvironmentPath(resource?: unknown) {
        calls.push(`getActiveEnvironmentPath:${String(resource)}`);
        if (opts.envThrows) {
          throw new Error('boom');
        }
        return opts.envExe === undefined ? undefined : { id: 'env', path: '/envs/x' };
      },
      async resolveEnvironment(env: unknown) {
        calls.push(`resolveEnvironment:${(env as { path: string }).path}`);
        return opts.envExe ? { executable: { uri: { fsPath: opts.envExe } } } : undefined;
      },
    },
    settings: {
      getExecutionDetails(resource?: unknown) {
        calls.push(`getExecutionDetails:${String(resource)}`);
        return { execCommand: opts.execCommand };
      },
    },
  };
}

describe('interpreter discovery', () => {
  it('uses kernelband.pythonPath first, without asking the Python extension', async () => {
    let asked = false;
    const interp = await resolveInterpreter({
      settingPath: '${workspaceFolder}/.venv/bin/python',
      workspaceFolder: '/ws',
      pythonExtension: async () => {
        asked = true;
        return pythonApi({ envExe: '/other/python' });
      },
    });
    assert.deepStrictEqual(interp, { command: '/ws/.venv/bin/python', args: [], source: 'setting' });
    assert.strictEqual(asked, false);
  });

  it("then the Python extension's active environment (environments API)", async () => {
    const api = pythonApi({ envExe: '/envs/x/bin/python', execCommand: ['/legacy/python'] });
    const interp = await resolveInterpreter({ settingPath: '  ', resource: 'folder-uri', pythonExtension: async () => api });
    assert.deepStrictEqual(interp, { command: '/envs/x/bin/python', args: [], source: 'python-extension' });
    assert.deepStrictEqual(api.calls, ['getActiveEnvironmentPath:folder-uri', 'resolveEnvironment:/envs/x']);
  });

  it('falls back to getExecutionDetails, keeping a multi-word command (conda run ...)', async () => {
    const api = pythonApi({ execCommand: ['conda', 'run', '-n', 'triton', 'python'] });
    const interp = await resolveInterpreter({ pythonExtension: async () => api });
    assert.deepStrictEqual(interp, { command: 'conda', args: ['run', '-n', 'triton', 'python'], source: 'python-extension' });
  });

  it('survives a failing environments API and still asks getExecutionDetails', async () => {
    const logs: string[] = [];
    const api = pythonApi({ envThrows: true, execCommand: ['/legacy/python'] });
    const interp = await resolveInterpreter({ pythonExtension: async () => api, log: (m) => logs.push(m) });
    assert.strictEqual(interp.command, '/legacy/python');
    assert.match(logs.join('\n'), /environments API failed: boom/);
  });

  it('defaults to python3 (python on Windows) without the Python extension or when it fails', async () => {
    assert.deepStrictEqual(await resolveInterpreter({}), { command: 'python3', args: [], source: 'default' });
    assert.deepStrictEqual(await resolveInterpreter({ pythonExtension: async () => undefined, platform: 'win32' }), {
      command: 'python',
      args: [],
      source: 'default',
    });
    const logs: string[] = [];
    const failing = await resolveInterpreter({
      pythonExtension: async () => {
        throw new Error('activation timed out');
      },
      log: (m) => logs.push(m),
    });
    assert.strictEqual(failing.command, 'python3');
    assert.match(logs[0], /activation timed out/);
    const empty = await resolveInterpreter({ pythonExtension: async () => pythonApi({ execCommand: [] }) });
    assert.strictEqual(empty.source, 'default');
    assert.strictEqual(defaultPython('linux'), 'python3');
  });

  it('interpreterFromPythonApi ignores an API with neither entry point', async () => {
    assert.strictEqual(await interpreterFromPythonApi({}), undefined);
  });

  it('expands ~, ${userHome} and relative paths', () => {
    assert.strictEqual(expandPath('~/venv/bin/python', '/ws', '/home/me'), '/home/me/venv/bin/python');
    assert.strictEqual(expandPath('${userHome}/py', '/ws', '/home/me'), '/home/me/py');
    assert.strictEqual(expandPath('./.venv/bin/python', '/ws', '/home/me'), '/ws/.venv/bin/python');
    assert.strictEqual(expandPath('/usr/bin/python3', '/ws', '/home/me'), '/usr/bin/python3');
    assert.strictEqual(expandPath('python3.11'), 'python3.11');
  });

  it('explains launch problems precisely', () => {
    const fromSetting = { command: '/opt/py', args: [], source: 'setting' as const };
    assert.match(launchProblem(fromSetting, { code: null, errorCode: 'ENOENT' }) ?? '', /"\/opt\/py" \(from the kernelband.pythonPath setting\) was not found/);
    assert.match(launchProblem(fromSetting, { code: 3 }) ?? '', /not installed in "\/opt\/py".*pip install "kernelband\[lsp\]"/);
    assert.match(launchProblem(fromSetting, { code: 1, stderr: 'a\nb\nSyntaxError: x' }) ?? '', /exit code 1\): a b SyntaxError: x/);
    assert.strictEqual(launchProblem(fromSetting, { code: 0 }), undefined);
    assert.strictEqual(formatCommandLine('/my py/python', ['-m', 'kernelband_lsp']), '"/my py/python" -m kernelband_lsp');
  });
});
