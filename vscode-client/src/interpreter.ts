import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";

/** Where the interpreter that runs the server came from, for messages. */
export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  command: string;
  source: InterpreterSource;
}

/** The part of ms-python.python's public API that is used here. */
interface PythonExtensionApi {
  ready?: Promise<void>;
  environments: {
    getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string };
    resolveEnvironment(
      environment: { id: string; path: string } | string,
    ): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
}

const PYTHON_EXTENSION_ID = "ms-python.python";
const DEFAULT_PYTHON = process.platform === "win32" ? "python" : "python3";

async function pythonExtensionApi(): Promise<PythonExtensionApi | undefined> {
  const extension = vscode.extensions.getExtension<PythonExtensionApi | undefined>(PYTHON_EXTENSION_ID);
  if (!extension) {
    return undefined;
  }
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    await api?.ready;
    return api?.environments ? api : undefined;
  } catch {
    return undefined;
  }
}

/** The Python extension's active interpreter for `resource`, if that extension is installed. */
export async function activePythonEnvironment(resource?: vscode.Uri): Promise<string | undefined> {
  const api = await pythonExtensionApi();
  if (!api) {
    return undefined;
  }
  try {
    const active = api.environments.getActiveEnvironmentPath(resource);
    const resolved = await api.environments.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath ?? active.path;
  } catch {
    return undefined;
  }
}

/** Calls `listener` when the user picks another interpreter in the Python extension. */
export async function onPythonEnvironmentChanged(listener: () => void): Promise<vscode.Disposable | undefined> {
  const api = await pythonExtensionApi();
  return api?.environments.onDidChangeActiveEnvironmentPath(listener);
}

/**
 * Expands `~` and `${workspaceFolder}`, resolves a relative path against the workspace folder,
 * and turns a virtual environment folder into its interpreter.
 */
export function expandInterpreterPath(value: string, folder?: vscode.WorkspaceFolder): string {
  const folderPath = folder?.uri.fsPath ?? vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
  let expanded = value.trim().replace(/\$\{workspaceFolder\}/g, folderPath ?? "");
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = path.join(os.homedir(), expanded.slice(1));
  }
  const looksLikePath = expanded.includes("/") || expanded.includes("\\");
  if (looksLikePath && !path.isAbsolute(expanded) && folderPath) {
    expanded = path.resolve(folderPath, expanded);
  }
  if (looksLikePath && isDirectory(expanded)) {
    const inVenv =
      process.platform === "win32"
        ? path.join(expanded, "Scripts", "python.exe")
        : path.join(expanded, "bin", "python");
    if (fs.existsSync(inVenv)) {
      return inVenv;
    }
  }
  return expanded;
}

function isDirectory(candidate: string): boolean {
  try {
    return fs.statSync(candidate).isDirectory();
  } catch {
    return false;
  }
}

/** `fabricLs.interpreter`, else the Python extension's environment, else `python3`. */
export async function chooseInterpreter(folder?: vscode.WorkspaceFolder): Promise<Interpreter> {
  const configured = vscode.workspace.getConfiguration("fabricLs", folder).get<string>("interpreter", "");
  if (configured.trim()) {
    return { command: expandInterpreterPath(configured, folder), source: "setting" };
  }
  const fromExtension = await activePythonEnvironment(folder?.uri);
  if (fromExtension) {
    return { command: fromExtension, source: "python-extension" };
  }
  return { command: DEFAULT_PYTHON, source: "default" };
}

export function describeSource(source: InterpreterSource): string {
  switch (source) {
    case "setting":
      return "from the setting fabricLs.interpreter";
    case "python-extension":
      return "the Python extension's active environment";
    case "default":
      return "the default; set fabricLs.interpreter or select an interpreter with the Python extension";
  }
}

/** Which fabric-ls runs: the copy bundled with the extension, or one installed in the interpreter. */
export type ImportStrategy = "useBundled" | "fromEnvironment";

export function importStrategy(folder?: vscode.WorkspaceFolder): ImportStrategy {
  const value = vscode.workspace.getConfiguration("fabricLs", folder).get<string>("importStrategy", "useBundled");
  return value === "fromEnvironment" ? "fromEnvironment" : "useBundled";
}

/**
 * The extension's bundled/libs (fabric-ls and its pure-Python dependencies, put there by
 * `npm run bundle-python`), or undefined in a build without it.
 */
export function bundledLibs(extensionPath: string): string | undefined {
  const libs = path.join(extensionPath, "bundled", "libs");
  return fs.existsSync(path.join(libs, "fabric_ls", "__main__.py")) ? libs : undefined;
}

/** How to install fabric-ls into `python`: it is not on a package index, so from a wheel or a checkout. */
export function installHint(python: string): string {
  const quoted = /[\s"'$&()]/.test(python) ? `"${python.replace(/"/g, '\\"')}"` : python;
  return `${quoted} -m pip install <fabric-ls wheel or checkout>`;
}

export type ProbeResult =
  | { ok: true; executable: string; version: string; installed: boolean }
  | { ok: false; reason: "not-found" | "too-old" | "failed"; detail: string };

// The version is checked before anything newer than Python 2 is used, so that any old Python reports
// itself. fabric_ls is looked up without importing it: a probe costs a Python start-up only.
const PROBE_SCRIPT = [
  "import sys",
  "print(sys.executable)",
  "print('%d.%d.%d' % tuple(sys.version_info[:3]))",
  "if sys.version_info < (3, 9): sys.exit(4)",
  "import importlib.util",
  "print('installed' if importlib.util.find_spec('fabric_ls') else 'missing')",
].join("\n");

/**
 * Checks that `python` runs and is new enough, and whether it can import an installed fabric_ls,
 * before the client is started. `cwd` is the server's: Python puts it first on sys.path for `-c` as
 * for `-m`, so a checkout there counts as installed.
 */
export function probeInterpreter(python: string, cwd?: string): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const options = { cwd, timeout: 30_000, windowsHide: true };
    execFile(python, ["-c", PROBE_SCRIPT], options, (error, stdout, stderr) => {
      const [executable = python, version = "?", found = ""] = stdout.trim().split(/\r?\n/);
      if (!error) {
        resolve({ ok: true, executable, version, installed: found.trim() === "installed" });
        return;
      }
      const code = (error as { code?: number | string }).code;
      if (code === "ENOENT" || code === "EACCES") {
        resolve({ ok: false, reason: "not-found", detail: error.message });
      } else if (code === 4) {
        resolve({ ok: false, reason: "too-old", detail: `Python ${version} at ${executable}` });
      } else {
        resolve({ ok: false, reason: "failed", detail: (stderr || error.message).trim() });
      }
    });
  });
}
