/**
 * Entry point: wires the controller to the real language client. Kept thin: the logic is
 * in the pure modules (interpreter, settings, jobs, kernels, flows, proposals) and in the
 * controller, which the unit tests exercise against a stub of the `vscode` module.
 */
import * as vscode from 'vscode';

import { mcpLaunch, registerAgentTools } from './agentTools';
import { Controller } from './controller';
import { LanguageServer, probeInterpreter } from './server';

let controller: Controller | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  controller = new Controller(context, {
    createServer: (spec, output, intercept) => new LanguageServer(spec, output, intercept),
    probe: probeInterpreter,
  });
  await controller.activate();
  const c = controller;
  context.subscriptions.push(
    registerAgentTools({ launch: async () => mcpLaunch(await c.resolveLaunch()), log: (l) => c.log(l), version: context.extension.packageJSON.version }),
  );
}

export function deactivate(): Promise<void> | undefined {
  const c = controller;
  controller = undefined;
  return c?.shutdown();
}
