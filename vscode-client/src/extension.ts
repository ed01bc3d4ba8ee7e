import * as vscode from "vscode";
import { spawn } from "node:child_process";
import * as path from "node:path";
import {
  CloseAction,
  type CloseHandlerResult,
  ErrorAction,
  type ErrorHandler,
  type ErrorHandlerResult,
  LanguageClient,
  type LanguageClientOptions,
  ResponseError,
  RevealOutputChannelOn,
  type ServerOptions,
} from "vscode-languageclient/node";
import {
  activePythonEnvironment,
  bundledLibs,
  chooseInterpreter,
  describeSource,
  expandInterpreterPath,
  importStrategy,
  installHint,
  type Interpreter,
  onPythonEnvironmentChanged,
  probeInterpreter,
} from "./interpreter";
import { RESTART_SETTINGS, SECTION, serverSettings } from "./settings";

const CLIENT_ID = "fabricLs";
const CLIENT_NAME = "Fabric LS";

let client: LanguageClient | undefined;
let output: vscode.OutputChannel;
// Starts and stops run one after another, never interleaved.
let lifecycle: Promise<void> = Promise.resolve();
let restartTimer: NodeJS.Timeout | undefined;
let extensionPath = "";

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  extensionPath = context.extensionPath;
  output = vscode.window.createOutputChannel(CLIENT_NAME);
  context.subscriptions.push(
    output,
    vscode.commands.registerCommand("fabricLs.restart", () => restart("restart command")),
    vscode.commands.registerCommand("fabricLs.showOutput", () => {
      output.show(true);
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (RESTART_SETTINGS.some((key) => event.affectsConfiguration(key))) {
        scheduleRestart("settings changed");
      }
    }),
    // Trust granted: the folder's own settings and interpreter now count, and a new server gets them.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void restart("the workspace is now trusted")),
    // A diagnostic's rule link is the page installed with the server (a file: URI): show it rendered.
    vscode.window.onDidChangeActiveTextEditor((editor) => void previewRulePage(editor)),
    { dispose: () => void stop() },
  );
  const pythonWatcher = await onPythonEnvironmentChanged(() => {
    const config = vscode.workspace.getConfiguration(SECTION);
    if (!config.get<string>("interpreter", "").trim() || !config.get<string>("python", "").trim()) {
      scheduleRestart("the Python extension's interpreter changed");
    }
  });
  if (pythonWatcher) {
    context.subscriptions.push(pythonWatcher);
  }
  await restart("activation");
}

/** The rule pages the server ships: `.../fabric_ls/docs/rules/FAB001.md`. */
const RULE_PAGE = /[\\/]fabric_ls[\\/]docs[\\/]rules[\\/]FAB\d{3}\.md$/;

/** A rule page opened as text (the Problems panel opens a diagnostic's link so) becomes its preview. */
async function previewRulePage(editor: vscode.TextEditor | undefined): Promise<void> {
  const uri = editor?.document.uri;
  if (!uri || uri.scheme !== "file" || !RULE_PAGE.test(uri.fsPath)) {
    return;
  }
  await vscode.commands.executeCommand("workbench.action.closeActiveEditor");
  await vscode.commands.executeCommand("markdown.showPreview", uri);
}

export function deactivate(): Promise<void> {
  return stop();
}

/**
 * The settings editor writes while the user is still typing a path: wait for a pause, or a
 * half-typed interpreter would be tried (and reported) first.
 */
function scheduleRestart(reason: string): void {
  if (restartTimer) {
    clearTimeout(restartTimer);
  }
  restartTimer = setTimeout(() => {
    restartTimer = undefined;
    void restart(reason);
  }, 1500);
}

function restart(reason: string): Promise<void> {
  lifecycle = lifecycle.then(async () => {
    output.appendLine(`[client] (re)starting: ${reason}`);
    await stopClient();
    await startClient();
  });
  return lifecycle;
}

function stop(): Promise<void> {
  lifecycle = lifecycle.then(stopClient);
  return lifecycle;
}

async function stopClient(): Promise<void> {
  const running = client;
  client = undefined;
  if (running) {
    try {
      await running.stop(5000);
    } catch (error) {
      output.appendLine(`[client] stopping the server failed: ${String(error)}`);
    }
    await running.dispose();
  }
}

async function startClient(): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  output.appendLine(`[client] workspace trusted: ${vscode.workspace.isTrusted}`);
  const interpreter = restricted(await chooseInterpreter(folder));
  output.appendLine(`[client] interpreter: ${interpreter.command} (${describeSource(interpreter.source)})`);
  const probe = await probeInterpreter(interpreter.command, serverDirectory(folder));
  if (!probe.ok) {
    output.appendLine(`[client] cannot start the server: ${probe.reason}: ${probe.detail}`);
    void reportStartFailure(interpreter, probe.reason, probe.detail);
    return;
  }
  output.appendLine(`[client] Python ${probe.version} at ${probe.executable}`);
  // The bundled server, unless fromEnvironment picks a fabric-ls installed in the interpreter.
  const bundled = bundledLibs(extensionPath);
  const libs = bundled && (importStrategy(folder) === "useBundled" || !probe.installed) ? bundled : undefined;
  if (!libs && !probe.installed) {
    output.appendLine("[client] cannot start the server: fabric-ls is not installed there, and this build bundles none");
    void reportStartFailure(interpreter, "not-installed", "");
    return;
  }
  output.appendLine(
    libs
      ? `[client] server: fabric-ls bundled with the extension (${libs})`
      : "[client] server: the fabric-ls installed in the interpreter",
  );
  // PYTHONPATH comes before site-packages: the bundled packages win over installed ones.
  const pythonPath = libs ? [libs, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter) : undefined;
  const serverEnv = pythonPath ? { ...process.env, PYTHONPATH: pythonPath } : process.env;

  const fallbackPython = await pythonForImports(interpreter);
  const stderrTail: string[] = [];
  const serverOptions: ServerOptions = () => {
    const child = spawn(interpreter.command, ["-m", "fabric_ls", "--stdio"], {
      cwd: serverDirectory(folder),
      env: { ...serverEnv, PYTHONUNBUFFERED: "1" },
      windowsHide: true,
    });
    // The client copies stderr into the output channel; keep the end for the failure message.
    child.stderr.on("data", (chunk: Buffer) => {
      stderrTail.push(...chunk.toString().split(/\r?\n/).filter((line) => line.trim()));
      stderrTail.splice(0, Math.max(0, stderrTail.length - 20));
    });
    return Promise.resolve(child);
  };
  const crashHandler = new CrashHandler(() => {
    void reportStartFailure(interpreter, "crashed", lastError(stderrTail));
  });
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
      // Python cells of any notebook: the server declares notebookDocumentSync, so the client sends
      // notebookDocument/did* for them and routes hover and code actions on a cell to the server.
      { notebook: "*", language: "python" },
    ],
    outputChannel: output,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    // The server uses a pyproject.toml's `python` only in a trusted workspace (fabric_ls/trust.py).
    initializationOptions: { ...serverSettings(folder, fallbackPython), workspaceTrusted: vscode.workspace.isTrusted },
    errorHandler: crashHandler,
    middleware: {
      workspace: {
        // Answer `fabricLs` with the server's keys only (see serverSettings).
        configuration: async (params, token, next) => {
          const answers: unknown = await next(params, token);
          if (!Array.isArray(answers)) {
            return answers as ResponseError;
          }
          const passed: unknown[] = answers;
          return params.items.map((item, index): unknown => {
            if (item.section !== SECTION) {
              return passed[index];
            }
            const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : folder;
            return { ...serverSettings(scope, fallbackPython), workspaceTrusted: vscode.workspace.isTrusted };
          });
        },
      },
    },
  };
  const created = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
  try {
    // start() logs a failed initialize and resolves anyway: check the state.
    await created.start();
    if (!created.isRunning()) {
      throw new Error("the server exited during initialization");
    }
    crashHandler.running = true;
    client = created;
    output.appendLine("[client] server started");
  } catch (error) {
    output.appendLine(`[client] the server did not start: ${String(error)}`);
    await created.dispose().catch(() => undefined);
    void reportStartFailure(interpreter, "crashed", lastError(stderrTail) || String(error));
  }
}

/** The most telling line of a Python traceback: its last one. */
function lastError(stderrLines: string[]): string {
  return stderrLines.at(-1)?.trim() ?? "";
}

/**
 * Restarts a server that crashes after running a while (at most 3 times in 3 minutes); a server
 * that dies again at once is left stopped and reported, instead of being restarted in a loop.
 */
class CrashHandler implements ErrorHandler {
  private readonly restarts: number[] = [];
  /** Set once initialize succeeded; a failed start is reported by startClient instead. */
  running = false;

  constructor(private readonly onGiveUp: () => void) {}

  error(): ErrorHandlerResult {
    return { action: ErrorAction.Continue };
  }

  closed(): CloseHandlerResult {
    if (!this.running) {
      return { action: CloseAction.DoNotRestart, handled: true };
    }
    const now = Date.now();
    this.restarts.push(now);
    while (this.restarts.length > 0 && this.restarts[0] < now - 180_000) {
      this.restarts.shift();
    }
    if (this.restarts.length <= 3) {
      return { action: CloseAction.Restart, message: "Fabric LS: the server stopped; restarting it." };
    }
    this.onGiveUp();
    return { action: CloseAction.DoNotRestart, handled: true };
  }
}

/**
 * The environment jedi should resolve imports in, when `fabricLs.python` is empty: the Python
 * extension's environment if the server runs elsewhere (e.g. a tool venv in fabricLs.interpreter).
 */
async function pythonForImports(interpreter: Interpreter): Promise<string> {
  if (interpreter.source !== "setting") {
    return "";
  }
  const active = await activePythonEnvironment(vscode.workspace.workspaceFolders?.[0]?.uri);
  return active && expandInterpreterPath(active) !== interpreter.command && !insideRestrictedFolder(active)
    ? active
    : "";
}

async function reportStartFailure(interpreter: Interpreter, reason: string, detail: string): Promise<void> {
  const python = interpreter.command;
  const tried = `the interpreter "${python}" (${describeSource(interpreter.source)})`;
  const pickAnother = "Set fabricLs.interpreter to a Python 3.9 or newer, or select one with the Python extension.";
  let message: string;
  switch (reason) {
    case "not-found":
      message = `Fabric LS could not start: ${tried} was not found. ${pickAnother}`;
      break;
    case "not-installed":
      message = `Fabric LS could not start: fabric-ls is not installed in ${tried}, and this build of the extension bundles no server. Install it there with: ${installHint(python)}`;
      break;
    case "too-old":
      message = `Fabric LS could not start: ${tried} is ${detail}; fabric-ls needs Python 3.9 or newer. ${pickAnother}`;
      break;
    default:
      message = `Fabric LS: the server stopped with ${tried}${detail ? `: ${detail}` : ""}. See the output for details.`;
  }
  const choice = await vscode.window.showErrorMessage(message, "Open Settings", "Show Output");
  if (choice === "Open Settings") {
    await vscode.commands.executeCommand("workbench.action.openSettings", "fabricLs.interpreter");
  } else if (choice === "Show Output") {
    output.show(true);
  }
}

/**
 * Restricted Mode (an untrusted folder) starts no program from the folder: not an interpreter the Python
 * extension found there (a committed `.venv`), not a `fabric_ls` package planted at its top (Python puts
 * the working directory first on sys.path for `-m` and `-c`). fabricLs.interpreter and fabricLs.python are
 * restricted settings (package.json): until the folder is trusted VS Code gives their user values only.
 */
function insideRestrictedFolder(executable: string): boolean {
  return !vscode.workspace.isTrusted && vscode.workspace.getWorkspaceFolder(vscode.Uri.file(executable)) !== undefined;
}

function restricted(interpreter: Interpreter): Interpreter {
  if (interpreter.source === "python-extension" && insideRestrictedFolder(interpreter.command)) {
    output.appendLine(`[client] Restricted Mode: not starting ${interpreter.command}, which lies in the untrusted folder`);
    return { command: process.platform === "win32" ? "python" : "python3", source: "default" };
  }
  return interpreter;
}

/** The server's working directory: the folder once trusted (a fabric-ls checkout there counts), else the extension's. */
function serverDirectory(folder?: vscode.WorkspaceFolder): string | undefined {
  return vscode.workspace.isTrusted ? folder?.uri.fsPath : __dirname;
}
