// Test driver for tests/test_vscode_e2e.py: once the workbench has started, call the
// KernelBand agent tools the way agent mode does (vscode.lm.invokeTool) and write what
// came back, or the error, to $KB_E2E_OUT. Plain JavaScript: no build step.
const fs = require('fs');
const vscode = require('vscode');

const OUT = process.env.KB_E2E_OUT;

function write(obj) {
  if (OUT) {
    fs.writeFileSync(`${OUT}.tmp`, JSON.stringify(obj, null, 1));
    fs.renameSync(`${OUT}.tmp`, OUT);
  }
}

async function waitForTool(name, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (vscode.lm.tools.some((t) => t.name === name)) {
      return true;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

function text(result) {
  return result.content.map((p) => (typeof p.value === 'string' ? p.value : '')).join('');
}

async function run() {
  const out = { started: new Date().toISOString(), vscode: vscode.version, steps: [] };
  try {
    const ext = vscode.extensions.getExtension('kernelband.kernelband');
    await ext.activate();
    out.steps.push('kernelband activated');
    out.registered = await waitForTool('kernelband_list_kernels', 60000);
    out.tools = vscode.lm.tools.filter((t) => t.name.startsWith('kernelband_')).map((t) => t.name).sort();
    const listed = await vscode.lm.invokeTool('kernelband_list_kernels', { input: { path: 'add_scale.py' }, toolInvocationToken: undefined });
    out.list_kernels = JSON.parse(text(listed));
    out.steps.push('list_kernels answered');
    try {
      await vscode.lm.invokeTool('kernelband_list_kernels', { input: { path: '../outside.py' }, toolInvocationToken: undefined });
      out.outside = 'not refused';
    } catch (err) {
      out.outside = String(err && err.message ? err.message : err);
    }
    // a job tool: VS Code shows prepareInvocation's confirmation first (the test presses
    // it through the browser); without an answer the outcome is recorded, not awaited forever
    const source = fs.readFileSync(`${vscode.workspace.workspaceFolders[0].uri.fsPath}/add_scale.py`, 'utf8');
    const check = vscode.lm.invokeTool('kernelband_check_variant', {
      input: { file: 'add_scale.py', variant_source: source.replace('    return out\n', '    import os\n    return out\n') },
      toolInvocationToken: undefined,
    });
    out.check = await Promise.race([
      check.then((r) => JSON.parse(text(r)), (err) => `error: ${err && err.message ? err.message : err}`),
      new Promise((r) => setTimeout(() => r('no answer in 180 s'), 180000)),
    ]);
    out.ok = true;
  } catch (err) {
    out.ok = false;
    out.error = String(err && err.stack ? err.stack : err);
  }
  write(out);
}

exports.activate = () => {
  void run();
};
exports.deactivate = () => undefined;
