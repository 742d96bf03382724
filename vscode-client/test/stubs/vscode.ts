/**
 * A minimal, recording stand-in for the `vscode` module (VS Code itself is not available
 * to unit tests). test/setup.ts makes `require('vscode')` resolve to this file. Only what
 * the extension uses is implemented; `stub` lets tests script answers and inspect calls.
 */
/* eslint-disable @typescript-eslint/no-explicit-any */

export class Disposable {
  constructor(private readonly fn: () => void = () => undefined) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((i) => i.dispose()));
  }
  dispose(): void {
    this.fn();
  }
}

export type Listener<T> = (e: T) => unknown;

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.push(listener);
    return new Disposable(() => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    });
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) {
      l(e);
    }
  }
  dispose(): void {
    this.listeners = [];
  }
  get listenerCount(): number {
    return this.listeners.length;
  }
}

export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  private cancelled = false;
  readonly token = {
    isCancellationRequested: false,
    onCancellationRequested: this.emitter.event,
  };
  cancel(): void {
    if (!this.cancelled) {
      this.cancelled = true;
      this.token.isCancellationRequested = true;
      this.emitter.fire();
    }
  }
  dispose(): void {
    this.emitter.dispose();
  }
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly authority: string,
    readonly path: string,
    readonly query: string,
    readonly fragment: string,
  ) {}

  static parse(value: string): Uri {
    const m = /^([a-zA-Z][\w+.-]*):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/.exec(value);
    if (!m) {
      throw new Error(`invalid uri: ${value}`);
    }
    return new Uri(m[1], m[2] ?? '', decodeURIComponent(m[3] ?? ''), m[4] ?? '', m[5] ?? '');
  }

  static file(path: string): Uri {
    return new Uri('file', '', path.startsWith('/') ? path : `/${path}`, '', '');
  }

  static from(c: { scheme: string; authority?: string; path?: string; query?: string; fragment?: string }): Uri {
    return new Uri(c.scheme, c.authority ?? '', c.path ?? '', c.query ?? '', c.fragment ?? '');
  }

  get fsPath(): string {
    return this.path;
  }

  with(change: { scheme?: string; path?: string; query?: string }): Uri {
    return new Uri(change.scheme ?? this.scheme, this.authority, change.path ?? this.path, change.query ?? this.query, this.fragment);
  }

  toString(): string {
    const auth = this.scheme === 'file' || this.authority ? `//${this.authority}` : '';
    const path = this.path.split('/').map(encodeURIComponent).join('/');
    return `${this.scheme}:${auth}${path}${this.query ? `?${this.query}` : ''}${this.fragment ? `#${this.fragment}` : ''}`;
  }

  toJSON(): string {
    return this.toString();
  }
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export enum ViewColumn {
  Beside = -2,
  Active = -1,
  One = 1,
  Two = 2,
}

export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

export class Position {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

export class Selection {
  readonly active: Position;
  constructor(line: number, character = 0) {
    this.active = new Position(line, character);
  }
}

// ---- recording state ---------------------------------------------------------------

export interface MessageCall {
  level: 'info' | 'warn' | 'error';
  message: string;
  options?: { modal?: boolean; detail?: string };
  items: string[];
}

export interface ProgressRun {
  options: { title?: string; cancellable?: boolean; location?: unknown };
  reports: { message?: string; increment?: number }[];
  cancel(): void;
  done: boolean;
}

export class FakeOutputChannel {
  readonly lines: string[] = [];
  shown = 0;
  constructor(readonly name: string) {}
  append(v: string): void {
    this.lines.push(v);
  }
  appendLine(v: string): void {
    this.lines.push(v);
  }
  clear(): void {
    this.lines.length = 0;
  }
  show(): void {
    this.shown++;
  }
  hide(): void {}
  replace(v: string): void {
    this.lines.length = 0;
    this.lines.push(v);
  }
  dispose(): void {}
  get text(): string {
    return this.lines.join('\n');
  }
}

export class FakeStatusBarItem {
  text = '';
  tooltip: string | undefined;
  command: string | undefined;
  name: string | undefined;
  visible = false;
  constructor(
    readonly id: string,
    readonly alignment?: StatusBarAlignment,
    readonly priority?: number,
  ) {}
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {
    this.visible = false;
  }
}

export class FakeTextDocument {
  constructor(
    readonly uri: Uri,
    private readonly text: string,
    readonly languageId = 'python',
    readonly version = 1,
  ) {}
  getText(): string {
    return this.text;
  }
}

type Responder = (call: MessageCall) => string | undefined | Promise<string | undefined>;

class StubState {
  commands = new Map<string, (...args: any[]) => any>();
  executed: { command: string; args: any[] }[] = [];
  messages: MessageCall[] = [];
  messageResponder: Responder = () => undefined;
  inputBoxAnswers: (string | undefined)[] = [];
  inputBoxOptions: any[] = [];
  quickPickAnswer: (items: any[]) => any = () => undefined;
  progressRuns: ProgressRun[] = [];
  outputChannels: FakeOutputChannel[] = [];
  statusBarItems: FakeStatusBarItem[] = [];
  contentProviders = new Map<string, any>();
  configuration: Record<string, unknown> = {};
  configChange = new EventEmitter<{ affectsConfiguration(key: string): boolean }>();
  extensions = new Map<string, any>();
  textDocuments: FakeTextDocument[] = [];
  closedTabs: any[] = [];
  tabs: any[] = [];
  activeTab: any = undefined;
  tabChange = new EventEmitter<{ opened: any[]; closed: any[]; changed: any[] }>();
  /** setContext calls: key -> last value. */
  contextKeys: Record<string, unknown> = {};
  /** showTextDocument calls: the document (or uri) as a string, and the options. */
  shownDocuments: { uri: string; options: any }[] = [];

  reset(): void {
    Object.assign(this, new StubState());
    window.activeTextEditor = undefined;
    workspace.workspaceFolders = undefined;
  }

  /** The user closes tabs (as the tab's close button does). */
  tabGroupsClose(tabs: any[]): Promise<void> {
    this.tabs = this.tabs.filter((t) => !tabs.includes(t));
    this.tabChange.fire({ opened: [], closed: tabs, changed: [] });
    return Promise.resolve();
  }

  /** Fires onDidChangeConfiguration for the given changed keys. */
  changeConfiguration(values: Record<string, unknown>): void {
    Object.assign(this.configuration, values);
    const keys = Object.keys(values).map((k) => `kernelband.${k}`);
    this.configChange.fire({ affectsConfiguration: (key: string) => keys.some((k) => k === key || k.startsWith(`${key}.`)) });
  }

  /** Opens a document in the fake editor with the cursor on `line`. */
  openEditor(uri: string, text: string, line = 0, languageId = 'python'): FakeTextDocument {
    const doc = new FakeTextDocument(Uri.parse(uri), text, languageId);
    this.textDocuments.push(doc);
    window.activeTextEditor = { document: doc, selection: new Selection(line) } as any;
    return doc;
  }
}

export const stub = new StubState();

function message(level: MessageCall['level'], msg: string, rest: any[]): Promise<string | undefined> {
  let options: MessageCall['options'];
  let items = rest;
  if (rest.length && typeof rest[0] === 'object' && rest[0] !== null && !Array.isArray(rest[0])) {
    options = rest[0];
    items = rest.slice(1);
  }
  const call: MessageCall = { level, message: msg, options, items: items.map(String) };
  stub.messages.push(call);
  return Promise.resolve(stub.messageResponder(call));
}

export const window = {
  activeTextEditor: undefined as any,
  createOutputChannel(name: string): FakeOutputChannel {
    const ch = new FakeOutputChannel(name);
    stub.outputChannels.push(ch);
    return ch;
  },
  createStatusBarItem(id: string, alignment?: StatusBarAlignment, priority?: number): FakeStatusBarItem {
    const item = new FakeStatusBarItem(id, alignment, priority);
    stub.statusBarItems.push(item);
    return item;
  },
  showInformationMessage: (msg: string, ...rest: any[]) => message('info', msg, rest),
  showWarningMessage: (msg: string, ...rest: any[]) => message('warn', msg, rest),
  showErrorMessage: (msg: string, ...rest: any[]) => message('error', msg, rest),
  showInputBox(options: any): Promise<string | undefined> {
    stub.inputBoxOptions.push(options);
    return Promise.resolve(stub.inputBoxAnswers.shift());
  },
  showQuickPick(items: any[], _options?: any): Promise<any> {
    return Promise.resolve(stub.quickPickAnswer(items));
  },
  withProgress<R>(options: any, task: (progress: any, token: any) => Promise<R>): Promise<R> {
    const source = new CancellationTokenSource();
    const run: ProgressRun = { options, reports: [], cancel: () => source.cancel(), done: false };
    stub.progressRuns.push(run);
    const progress = { report: (v: any) => run.reports.push(v) };
    return task(progress, source.token).finally(() => {
      run.done = true;
    });
  },
  showTextDocument(docOrUri: any, options?: any): Promise<any> {
    const uri = docOrUri && docOrUri.uri ? docOrUri.uri.toString() : String(docOrUri);
    stub.shownDocuments.push({ uri, options });
    return Promise.resolve({ document: docOrUri });
  },
  get tabGroups(): any {
    return {
      all: [{ tabs: stub.tabs }],
      activeTabGroup: { activeTab: stub.activeTab },
      onDidChangeTabs: (listener: Listener<{ opened: any[]; closed: any[]; changed: any[] }>) => stub.tabChange.event(listener),
      close: (tabs: any[]) => {
        stub.closedTabs.push(...tabs);
        stub.tabs = stub.tabs.filter((t) => !tabs.includes(t));
        stub.tabChange.fire({ opened: [], closed: tabs, changed: [] });
        return Promise.resolve(true);
      },
    };
  },
};

export const commands = {
  registerCommand(id: string, fn: (...args: any[]) => any): Disposable {
    if (stub.commands.has(id)) {
      throw new Error(`command '${id}' already exists`);
    }
    stub.commands.set(id, fn);
    return new Disposable(() => stub.commands.delete(id));
  },
  executeCommand(command: string, ...args: any[]): Promise<any> {
    stub.executed.push({ command, args });
    if (command === 'setContext') {
      stub.contextKeys[args[0]] = args[1];
    }
    const fn = stub.commands.get(command);
    return Promise.resolve(fn ? fn(...args) : undefined);
  },
};

export const workspace = {
  workspaceFolders: undefined as { uri: Uri; name: string; index: number }[] | undefined,
  get textDocuments(): FakeTextDocument[] {
    return stub.textDocuments;
  },
  getConfiguration(section?: string, _scope?: unknown) {
    const prefix = section ? `${section}.` : '';
    const lookup = (key: string): unknown => {
      const full = `${prefix}${key}`.replace(/^kernelband\./, '');
      return stub.configuration[full];
    };
    return {
      get<T>(key: string, defaultValue?: T): T | undefined {
        const v = lookup(key);
        return (v === undefined ? defaultValue : v) as T | undefined;
      },
      has: (key: string) => lookup(key) !== undefined,
      update: () => Promise.resolve(),
      inspect: () => undefined,
    };
  },
  onDidChangeConfiguration: (listener: Listener<{ affectsConfiguration(key: string): boolean }>) => stub.configChange.event(listener),
  registerTextDocumentContentProvider(scheme: string, provider: any): Disposable {
    stub.contentProviders.set(scheme, provider);
    return new Disposable(() => stub.contentProviders.delete(scheme));
  },
  getWorkspaceFolder(uri: Uri) {
    return workspace.workspaceFolders?.find((f) => uri.path.startsWith(f.uri.path));
  },
  openTextDocument(uri: Uri): Promise<FakeTextDocument> {
    const doc = stub.textDocuments.find((d) => d.uri.toString() === uri.toString());
    if (doc) {
      return Promise.resolve(doc);
    }
    const provider = stub.contentProviders.get(uri.scheme); // a virtual document
    if (provider) {
      return Promise.resolve(new FakeTextDocument(uri, provider.provideTextDocumentContent(uri), 'markdown'));
    }
    return Promise.reject(new Error(`cannot open ${uri.toString()}`));
  },
};

export const extensions = {
  getExtension(id: string): any {
    return stub.extensions.get(id);
  },
};

/** An ExtensionContext with in-memory secret storage. */
export function makeContext(): any {
  const secrets = new Map<string, string>();
  const changed = new EventEmitter<{ key: string }>();
  return {
    subscriptions: [] as { dispose(): unknown }[],
    secretValues: secrets,
    secrets: {
      get: (key: string) => Promise.resolve(secrets.get(key)),
      store: (key: string, value: string) => {
        secrets.set(key, value);
        changed.fire({ key });
        return Promise.resolve();
      },
      delete: (key: string) => {
        secrets.delete(key);
        changed.fire({ key });
        return Promise.resolve();
      },
      onDidChange: changed.event,
    },
  };
}

// Base classes vscode-languageclient extends at load time (so it can be required in tests).
export class CancellationError extends Error {}
export class CallHierarchyItem {}
export class CodeLens {}
export class CompletionItem {}
export class DocumentLink {}
export class InlayHint {}
export class SymbolInformation {}
export class TypeHierarchyItem {}
export class CodeAction {}
export class Diagnostic {}

// Language-model tools (the agent tools): registrations are kept for the tests to invoke.
export class MarkdownString {
  constructor(readonly value = '') {}
}
export class LanguageModelTextPart {
  constructor(readonly value: string) {}
}
export class LanguageModelToolResult {
  constructor(readonly content: unknown[]) {}
}
export const lmTools = new Map<string, any>();
export const lm = {
  registerTool(name: string, tool: any): Disposable {
    if (lmTools.has(name)) {
      throw new Error(`tool '${name}' already registered`);
    }
    lmTools.set(name, tool);
    return new Disposable(() => lmTools.delete(name));
  },
};
