/**
 * Mocha --require hook: `require('vscode')` resolves to the stub in test/stubs (VS Code is
 * not available to unit tests).
 */
import Module = require('module');
import * as path from 'path';

const stubPath = path.join(__dirname, 'stubs', 'vscode.js');
type Resolve = (request: string, ...rest: unknown[]) => string;
const mod = Module as unknown as { _resolveFilename: Resolve };
const original = mod._resolveFilename;
mod._resolveFilename = function (this: unknown, request: string, ...rest: unknown[]): string {
  if (request === 'vscode') {
    return stubPath;
  }
  return original.call(this, request, ...rest);
};
