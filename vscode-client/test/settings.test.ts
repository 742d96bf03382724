import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';

import { buildServerEnv, DEFAULTS, needsRestart, readSettings, redact, SETTING_KEYS, toInitializationOptions } from '../src/settings';

const pkg = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));
const properties: Record<string, { description?: string; markdownDescription?: string; default?: unknown; type?: string }> =
  pkg.contributes.configuration.properties;

function getterFrom(values: Record<string, unknown>) {
  return (key: string) => values[key];
}

function defaultOf(key: string): unknown {
  return key.split('.').reduce<unknown>((o, k) => (o as Record<string, unknown>)[k], DEFAULTS);
}

describe('settings', () => {
  it('package.json contributes every setting with a description, a type and the documented default', () => {
    for (const key of SETTING_KEYS) {
      const prop = properties[`kernelband.${key}`];
      assert.ok(prop, `kernelband.${key} is not contributed`);
      assert.ok((prop.description ?? prop.markdownDescription ?? '').length > 20, `kernelband.${key} has no real description`);
      assert.ok(prop.type, `kernelband.${key} has no type`);
      assert.deepStrictEqual(prop.default, defaultOf(key), `default of kernelband.${key}`);
    }
    for (const key of Object.keys(properties)) {
      assert.ok(key.startsWith('kernelband.'), key);
      assert.ok(properties[key].description, `${key} has no description`);
    }
    // the documented defaults (docs/ARCHITECTURE.md)
    assert.strictEqual(properties['kernelband.budget.evaluations'].default, 16);
    assert.strictEqual(properties['kernelband.minSpeedup'].default, 1.03);
    assert.strictEqual(properties['kernelband.generator'].default, 'rules');
  });

  it('reads defaults when nothing is set', () => {
    const s = readSettings(() => undefined);
    assert.deepStrictEqual(s.budget, { evaluations: 16, seconds: 0, tokens: 0, dollars: 0 });
    assert.strictEqual(s.generator, 'rules');
    assert.strictEqual(s.search, 'kernelband');
    assert.deepStrictEqual(s.strategies, []);
    assert.strictEqual(s.minSpeedup, 1.03);
    assert.strictEqual(s.device, 'auto');
    assert.strictEqual(s.executor, 'local');
    assert.strictEqual(s.workers, 0);
  });

  it('executor settings (issue 15): ray with an address, and bad values back to the defaults', () => {
    const s = readSettings(getterFrom({ executor: 'ray', rayAddress: ' ray://gpu-box:10001 ', workers: 2 }));
    assert.strictEqual(s.executor, 'ray');
    assert.strictEqual(s.rayAddress, 'ray://gpu-box:10001');
    assert.strictEqual(s.workers, 2);
    const bad = readSettings(getterFrom({ executor: 'slurm', workers: -1 }));
    assert.strictEqual(bad.executor, 'local');
    assert.strictEqual(bad.workers, 0);
  });

  it('sanitises wrong values back to defaults and keeps good ones', () => {
    const s = readSettings(
      getterFrom({
        'budget.evaluations': 40.7,
        'budget.seconds': -3,
        'budget.tokens': 'lots',
        'budget.dollars': 2.5,
        generator: 'gpt',
        model: ' qwen2.5-coder ',
        baseUrl: 'http://localhost:11434/v1',
        search: 'kernelband-v2',
        strategies: ['tiling', 'bogus', 'tiling', 'fusion', 3],
        backgroundOnSave: 'yes',
        minSpeedup: 0.5,
        device: 'cuda:1',
        harness: { add_kernel: 'bench_add', bad: 7, '': 'x' },
      }),
    );
    assert.deepStrictEqual(s.budget, { evaluations: 40, seconds: 0, tokens: 0, dollars: 2.5 });
    assert.strictEqual(s.generator, 'rules');
    assert.strictEqual(s.model, 'qwen2.5-coder');
    assert.strictEqual(s.baseUrl, 'http://localhost:11434/v1');
    assert.strictEqual(s.search, 'kernelband-v2');
    assert.deepStrictEqual(s.strategies, ['tiling', 'fusion']);
    assert.strictEqual(s.backgroundOnSave, false);
    assert.strictEqual(s.minSpeedup, 1.03);
    assert.strictEqual(s.device, 'cuda:1');
    assert.deepStrictEqual(s.harness, { add_kernel: 'bench_add' });
  });

  it('keeps a budget of 0: it means no limit, as on the CLI and in the server', () => {
    const s = readSettings(getterFrom({ 'budget.evaluations': 0, 'budget.seconds': 60 }));
    assert.deepStrictEqual(s.budget, { evaluations: 0, seconds: 60, tokens: 0, dollars: 0 });
    assert.strictEqual(readSettings(getterFrom({ 'budget.evaluations': -1 })).budget.evaluations, 16);
  });

  it('initializationOptions: the nested section object, without pythonPath or secrets', () => {
    const opts = toInitializationOptions(readSettings(getterFrom({ pythonPath: '/x/python', 'budget.evaluations': 8, generator: 'openai' })));
    assert.deepStrictEqual(Object.keys(opts).sort(), [
      'backgroundOnSave',
      'baseUrl',
      'budget',
      'device',
      'executor',
      'generator',
      'harness',
      'minSpeedup',
      'model',
      'rayAddress',
      'search',
      'strategies',
      'workers',
    ]);
    assert.deepStrictEqual(opts.budget, { evaluations: 8, seconds: 0, tokens: 0, dollars: 0 });
    assert.strictEqual(opts.generator, 'openai');
    assert.ok(!JSON.stringify(opts).includes('/x/python'));
  });

  it('the server env carries the stored API key; an exported one is kept when none is stored', () => {
    const base = { PATH: '/usr/bin', KERNELBAND_API_KEY: 'from-shell', UNDEF: undefined };
    const withKey = buildServerEnv(base, 'sk-stored');
    assert.strictEqual(withKey.KERNELBAND_API_KEY, 'sk-stored');
    assert.strictEqual(withKey.PATH, '/usr/bin');
    assert.ok(!('UNDEF' in withKey));
    assert.strictEqual(base.KERNELBAND_API_KEY, 'from-shell', 'base env not mutated');
    assert.strictEqual(buildServerEnv(base, undefined).KERNELBAND_API_KEY, 'from-shell');
    assert.strictEqual(buildServerEnv({}, '').KERNELBAND_API_KEY, undefined);
  });

  it('only pythonPath changes need a restart', () => {
    assert.strictEqual(needsRestart((k) => k === 'kernelband.pythonPath'), true);
    assert.strictEqual(needsRestart((k) => k === 'kernelband.budget.evaluations'), false);
  });

  it('redacts the key from text', () => {
    assert.strictEqual(redact('key sk-abc123 and sk-abc123', 'sk-abc123'), 'key «redacted» and «redacted»');
    assert.strictEqual(redact('nothing', undefined), 'nothing');
  });
});
