/**
 * Settings (section `kernelband`) -> the values the server receives, and the server's
 * process environment. Pure: reads through a getter, so it is testable without VS Code.
 *
 * The server gets the same nested object that `workspace/configuration` returns for the
 * section `kernelband` ({budget: {evaluations, ...}, generator, ...}) as its
 * initializationOptions; `pythonPath` is client-only and `trace` is the client's.
 */
import { API_KEY_ENV } from './constants';

export const STRATEGY_NAMES = ['tiling', 'vectorization', 'fusion', 'pipeline', 'reordering', 'access_layout'] as const;
export const GENERATORS = ['rules', 'openai'] as const;
// the engine's names (kernelband/options.py; tests/test_options.py checks these lists and package.json)
export const SEARCH_POLICIES = ['kernelband', 'kernelband-v1', 'kernelband-v2', 'random', 'ucb1', 'greedy', 'exhaustive'] as const;
export const EXECUTORS = ['local', 'ray'] as const; // issue 15: where Optimize's workers run

export interface KernelBandSettings {
  budget: { evaluations: number; seconds: number; tokens: number; dollars: number };
  generator: string;
  model: string;
  baseUrl: string;
  search: string;
  strategies: string[];
  backgroundOnSave: boolean;
  minSpeedup: number;
  device: string;
  harness: Record<string, string>;
  // --- executors (issue 15)
  executor: string;
  rayAddress: string;
  workers: number;
}

/** Defaults; package.json's `contributes.configuration` must agree (a test checks it). */
export const DEFAULTS: Readonly<KernelBandSettings & { pythonPath: string }> = Object.freeze({
  budget: Object.freeze({ evaluations: 16, seconds: 0, tokens: 0, dollars: 0 }),
  generator: 'rules',
  model: '',
  baseUrl: '',
  search: 'kernelband',
  strategies: [],
  backgroundOnSave: false,
  minSpeedup: 1.03,  // kernelband/verdict.py DEFAULT_MIN_SPEEDUP (tests check they agree)
  device: 'auto',
  pythonPath: '',
  harness: {},
  // --- executors (issue 15)
  executor: 'local',
  rayAddress: '',
  workers: 0,
});

/** Every key this extension contributes under `kernelband.` (trace.server is the client library's). */
export const SETTING_KEYS = [
  'budget.evaluations',
  'budget.seconds',
  'budget.tokens',
  'budget.dollars',
  'generator',
  'model',
  'baseUrl',
  'search',
  'strategies',
  'backgroundOnSave',
  'minSpeedup',
  'device',
  'pythonPath',
  'harness',
  // --- executors (issue 15)
  'executor',
  'rayAddress',
  'workers',
] as const;

export type SettingKey = (typeof SETTING_KEYS)[number];

/** Reads one key of the section (like vscode.WorkspaceConfiguration.get). */
export type SettingsGetter = (key: string) => unknown;

function num(v: unknown, fallback: number, min: number, integer = false): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  if (!Number.isFinite(n) || n < min) {
    return fallback;
  }
  return integer ? Math.floor(n) : n;
}

function str(v: unknown, fallback: string): string {
  return typeof v === 'string' ? v.trim() : fallback;
}

function oneOf(v: unknown, allowed: readonly string[], fallback: string): string {
  return typeof v === 'string' && allowed.includes(v) ? v : fallback;
}

/** Reads and sanitises the settings (wrong types fall back to the defaults). */
export function readSettings(get: SettingsGetter): KernelBandSettings {
  const strategiesRaw = get('strategies');
  const strategies = Array.isArray(strategiesRaw)
    ? [...new Set(strategiesRaw.filter((s): s is string => typeof s === 'string' && (STRATEGY_NAMES as readonly string[]).includes(s)))]
    : [];
  const harnessRaw = get('harness');
  const harness: Record<string, string> = {};
  if (harnessRaw && typeof harnessRaw === 'object' && !Array.isArray(harnessRaw)) {
    for (const [kernel, fn] of Object.entries(harnessRaw as Record<string, unknown>)) {
      if (typeof fn === 'string' && fn.trim() !== '' && kernel.trim() !== '') {
        harness[kernel.trim()] = fn.trim();
      }
    }
  }
  return {
    budget: {
      evaluations: num(get('budget.evaluations'), DEFAULTS.budget.evaluations, 0, true),  // 0 = no limit
      seconds: num(get('budget.seconds'), DEFAULTS.budget.seconds, 0),
      tokens: num(get('budget.tokens'), DEFAULTS.budget.tokens, 0, true),
      dollars: num(get('budget.dollars'), DEFAULTS.budget.dollars, 0),
    },
    generator: oneOf(get('generator'), GENERATORS, DEFAULTS.generator),
    model: str(get('model'), DEFAULTS.model),
    baseUrl: str(get('baseUrl'), DEFAULTS.baseUrl),
    search: oneOf(get('search'), SEARCH_POLICIES, DEFAULTS.search),
    strategies,
    backgroundOnSave: typeof get('backgroundOnSave') === 'boolean' ? (get('backgroundOnSave') as boolean) : DEFAULTS.backgroundOnSave,
    minSpeedup: num(get('minSpeedup'), DEFAULTS.minSpeedup, 1),
    device: str(get('device'), DEFAULTS.device) || DEFAULTS.device,
    harness,
    // --- executors (issue 15)
    executor: oneOf(get('executor'), EXECUTORS, DEFAULTS.executor),
    rayAddress: str(get('rayAddress'), DEFAULTS.rayAddress),
    workers: num(get('workers'), DEFAULTS.workers, 0, true),
  };
}

/** The initializationOptions sent to the server: the settings object, never the API key. */
export function toInitializationOptions(settings: KernelBandSettings): Record<string, unknown> {
  return {
    budget: { ...settings.budget },
    generator: settings.generator,
    model: settings.model,
    baseUrl: settings.baseUrl,
    search: settings.search,
    strategies: [...settings.strategies],
    backgroundOnSave: settings.backgroundOnSave,
    minSpeedup: settings.minSpeedup,
    device: settings.device,
    harness: { ...settings.harness },
    // --- executors (issue 15)
    executor: settings.executor,
    rayAddress: settings.rayAddress,
    workers: settings.workers,
  };
}

/** Setting changes that need a server restart (the rest reach it via didChangeConfiguration). */
export function needsRestart(affects: (key: string) => boolean): boolean {
  return affects('kernelband.pythonPath');
}

/**
 * Environment of the server process: the editor's, plus the API key from secret storage
 * as KERNELBAND_API_KEY. With no stored key, a KERNELBAND_API_KEY already in the
 * environment is kept (so a key exported in the shell still works).
 */
export function buildServerEnv(
  base: Readonly<Record<string, string | undefined>>,
  apiKey: string | undefined,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(base)) {
    if (typeof v === 'string') {
      env[k] = v;
    }
  }
  if (apiKey && apiKey.trim() !== '') {
    env[API_KEY_ENV] = apiKey.trim();
  }
  return env;
}

/** Replaces every occurrence of the secret in text (for anything this client logs). */
export function redact(text: string, secret: string | undefined): string {
  if (!secret || secret.length < 4) {
    return text;
  }
  return text.split(secret).join('«redacted»');
}
