/** Issue 14, defect 9: `npm run test:integration` must not pass with 0 tests when the
 * Python it uses cannot run the server (KERNELBAND_TEST_PYTHON picks that Python). */
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..'); // vscode-client/
const ITEST = path.join(ROOT, 'out', 'test', 'integration', 'server.itest.js');
const MOCHA = path.join(ROOT, '..', 'node_modules', 'mocha', 'bin', 'mocha.js');

function runIntegration(env: Record<string, string>): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, [MOCHA, '--no-config', '--require', 'out/test/setup.js', '--timeout', '60000', ITEST], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    encoding: 'utf8',
    timeout: 60000,
  });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('integration test guard', function () {
  this.timeout(90_000);
  before(function () {
    if (!fs.existsSync(ITEST) || !fs.existsSync(MOCHA)) {
      this.skip();
    }
  });

  it('fails, naming KERNELBAND_TEST_PYTHON, when the Python cannot run the server', () => {
    const r = runIntegration({ KERNELBAND_TEST_PYTHON: '/nonexistent/python3', KERNELBAND_SKIP_INTEGRATION: '' });
    assert.notStrictEqual(r.status, 0, `exit status 0 with 0 tests:\n${r.out}`);
    assert.match(r.out, /KERNELBAND_TEST_PYTHON/);
  });

  it('skips only when asked to', () => {
    const r = runIntegration({ KERNELBAND_TEST_PYTHON: '/nonexistent/python3', KERNELBAND_SKIP_INTEGRATION: '1' });
    assert.strictEqual(r.status, 0, r.out);
    assert.match(r.out, /skipped \(KERNELBAND_SKIP_INTEGRATION=1\)/);
  });
});
