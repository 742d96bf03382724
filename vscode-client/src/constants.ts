/** Identifiers shared by the extension's modules (no VS Code imports here). */

export const EXTENSION_ID = 'kernelband.kernelband';
export const CONFIG_SECTION = 'kernelband';
export const CLIENT_ID = 'kernelband';
export const CLIENT_NAME = 'KernelBand';

/** Key of the API key in VS Code's secret storage. */
export const SECRET_API_KEY = 'kernelband.apiKey';
/** Environment variable through which the server process receives the API key. */
export const API_KEY_ENV = 'KERNELBAND_API_KEY';

/** URI scheme of the read-only documents shown in the review diff. */
export const PROPOSAL_SCHEME = 'kernelband-proposal';

/** The language server module started with `<python> -m`. */
export const SERVER_MODULE = 'kernelband_lsp';

/** Notification the server sends for every job event. */
export const JOB_EVENT_NOTIFICATION = 'kernelband/jobEvent';

/**
 * Commands of the language server (workspace/executeCommand). vscode-languageclient
 * registers each of them as a VS Code command as well (code lenses and code actions
 * use them), so the client's own commands below must use different ids.
 */
export const ServerCommands = {
  optimize: 'kernelband.optimize',
  profile: 'kernelband.profile',
  cancel: 'kernelband.cancel',
  createHarness: 'kernelband.createHarness',
  proposedEdit: 'kernelband.proposedEdit',
  applyVariant: 'kernelband.applyVariant',
  reviewVariant: 'kernelband.reviewVariant',
  reverify: 'kernelband.reverify',
} as const;

/** Commands this extension contributes (package.json `contributes.commands`). */
export const ClientCommands = {
  optimize: 'kernelband.optimizeKernel',
  profile: 'kernelband.profileKernel',
  createHarness: 'kernelband.createHarnessStub',
  applyVariant: 'kernelband.applyFoundVariant',
  /** The review's decision, from the diff editor's title bar. */
  applyReviewed: 'kernelband.applyReviewedVariant',
  discardReviewed: 'kernelband.discardReviewedVariant',
  reverify: 'kernelband.reverifyVariant',
  cancel: 'kernelband.cancelJob',
  setApiKey: 'kernelband.setApiKey',
  showOutput: 'kernelband.showOutput',
  restartServer: 'kernelband.restartServer',
} as const;
