import * as vscode from "vscode";

/** The keys the server reads, from initializationOptions and workspace/configuration `fabricLs`. */
export interface ServerSettings {
  strategy: string;
  select: string[];
  ignore: string[];
  severity: Record<string, string>;
  python: string;
  docsBaseUrl: string;
}

export const SECTION = "fabricLs";

/** Settings whose change needs a new server process (it runs in the chosen interpreter). */
export const RESTART_SETTINGS = ["interpreter", "importStrategy", "python", "strategy", "select", "ignore", "severity", "docsBaseUrl"].map(
  (key) => `${SECTION}.${key}`,
);

/**
 * The server's settings for `scope`; only these keys are sent, so client-only settings
 * (`interpreter`, `importStrategy`, `trace`) never reach the server. `fallbackPython` is used when
 * `fabricLs.python` is empty.
 */
export function serverSettings(scope: vscode.ConfigurationScope | undefined, fallbackPython = ""): ServerSettings {
  const config = vscode.workspace.getConfiguration(SECTION, scope);
  return {
    strategy: config.get<string>("strategy", ""),
    select: config.get<string[]>("select", []),
    ignore: config.get<string[]>("ignore", []),
    severity: config.get<Record<string, string>>("severity", {}),
    python: config.get<string>("python", "").trim() || fallbackPython,
    docsBaseUrl: config.get<string>("docsBaseUrl", "").trim(),
  };
}
