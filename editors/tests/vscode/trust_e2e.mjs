// Workspace trust (issue 13) in a real VS Code (code-server) with workspace trust on: a folder whose
// pyproject.toml names a virtualenv opens in Restricted Mode, the server says why it ignores that `python`,
// nothing from the folder runs; after "Trust" the server restarts and resolves imports in that virtualenv.
// Run by editors/tests/run_vscode_e2e.sh after e2e.mjs, with:
//   CODE_SERVER, E2E_DIR (the extension installed in E2E_DIR/extensions), FABRIC_PYTHON, ARTIFACTS
// Writes ARTIFACTS/result.json; exit code 0 only if every step passed.

import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { chromium } from "playwright-core";

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set`);
  }
  return value;
};

const E2E_DIR = env("E2E_DIR");
const ARTIFACTS = env("ARTIFACTS");
const FABRIC_PYTHON = env("FABRIC_PYTHON");
const USER_DATA = path.join(E2E_DIR, "trust-user-data");
const WORKSPACE = path.join(E2E_DIR, "cloned-repository");
const SCRIPT = "train.py";
// Written by the folder's programs if they ever run: the virtualenv's .pth file, a planted fabric_ls package.
const VENV_MARKER = path.join(E2E_DIR, "venv-python-ran");
const PLANTED_MARKER = path.join(E2E_DIR, "planted-fabric-ls-ran");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const VENV_BASE_PYTHON = process.env.VENV_BASE_PYTHON ?? "/usr/bin/python3";

const result = { ok: false, steps: [], serverLog: "" };
const started = Date.now();

/**
 * The folder: train.py takes its strategy from `run_config`, which only the folder's virtualenv can import
 * (its site-packages lists libs/, as an editable install does); pyproject.toml names that virtualenv.
 */
function makeWorkspace() {
  fs.mkdirSync(path.join(WORKSPACE, "libs"), { recursive: true });
  fs.writeFileSync(path.join(WORKSPACE, "libs", "run_config.py"), 'STRATEGY = "deepspeed"\n');
  fs.writeFileSync(
    path.join(WORKSPACE, SCRIPT),
    [
      "import torch",
      "from lightning.fabric import Fabric",
      "",
      "from run_config import STRATEGY",
      "",
      'fabric = Fabric(accelerator="cuda", devices=2, strategy=STRATEGY)',
      "fabric.launch()",
      "model = torch.nn.Linear(32, 2)",
      "optimizer = torch.optim.Adam(model.parameters())",
      "model = fabric.setup_module(model)",
      "optimizer = fabric.setup_optimizers(optimizer)",
      "",
    ].join("\n"),
  );
  fs.writeFileSync(path.join(WORKSPACE, "pyproject.toml"), '[project]\nname = "cloned"\n\n[tool.fabric-ls]\npython = ".tenv"\n');
  // From the system Python: jedi's safe check (root-owned, or matching a Python on PATH) accepts it
  // wherever the editor runs; a pyenv Python passes only where its shims work.
  const venv = spawnSync(VENV_BASE_PYTHON, ["-m", "venv", "--without-pip", path.join(WORKSPACE, ".tenv")], { encoding: "utf8" });
  if (venv.status !== 0) {
    throw new Error(`python -m venv failed: ${venv.stderr}`);
  }
  const site = spawnSync(
    path.join(WORKSPACE, ".tenv", "bin", "python"),
    ["-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
    { encoding: "utf8" },
  ).stdout.trim();
  fs.writeFileSync(
    path.join(site, "workspace_libs.pth"),
    `${path.join(WORKSPACE, "libs")}\nimport os; open(${JSON.stringify(VENV_MARKER)}, "w").close()\n`,
  );
  fs.rmSync(VENV_MARKER, { force: true }); // asking the venv for site-packages ran the .pth once
  // A package named like the server, at the top of the folder: `python -m fabric_ls` started there imports it.
  fs.mkdirSync(path.join(WORKSPACE, "fabric_ls"));
  fs.writeFileSync(path.join(WORKSPACE, "fabric_ls", "__init__.py"), `open(${JSON.stringify(PLANTED_MARKER)}, "w").close()\n`);
  fs.writeFileSync(path.join(WORKSPACE, "fabric_ls", "__main__.py"), "");
}

function writeSettings() {
  const settings = {
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "workbench.welcomePage.walkthroughs.openOnInstall": false,
    // Workspace trust on; the folder opens in Restricted Mode without the startup dialog.
    "security.workspace.trust.enabled": true,
    "security.workspace.trust.startupPrompt": "never",
    "extensions.ignoreRecommendations": true,
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "telemetry.telemetryLevel": "off",
    "chat.commandCenter.enabled": false,
    "editor.minimap.enabled": false,
    "files.autoSave": "off",
    // A user setting: allowed in Restricted Mode.
    "fabricLs.interpreter": FABRIC_PYTHON,
    // Params in the trace: initialize shows workspaceTrusted.
    "fabricLs.trace.server": "verbose",
  };
  const file = path.join(USER_DATA, "User", "settings.json");
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, JSON.stringify(settings, null, 2));
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitForHttp(url, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).status < 500) {
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`code-server did not answer at ${url} within ${timeoutMs} ms`);
}

function serverLog() {
  const found = [];
  const walk = (dir) => {
    for (const entry of fs.existsSync(dir) ? fs.readdirSync(dir, { withFileTypes: true }) : []) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        walk(full);
      } else if (entry.name.includes("Fabric LS")) {
        found.push(full);
      }
    }
  };
  walk(path.join(USER_DATA, "logs"));
  return found.map((file) => fs.readFileSync(file, "utf8")).join("\n");
}

let page;
let shot = 0;

async function screenshot(name) {
  shot += 1;
  await page?.screenshot({ path: path.join(ARTIFACTS, `${String(shot).padStart(2, "0")}-${name}.png`) }).catch(() => undefined);
}

async function step(name, body) {
  const t0 = Date.now();
  const record = { name, ok: false, detail: "", ms: 0 };
  result.steps.push(record);
  try {
    record.detail = (await body()) ?? "";
    record.ok = true;
  } catch (error) {
    record.detail = String(error?.stack ?? error);
    await screenshot(`FAILED-${name.replace(/\W+/g, "-")}`);
    throw error;
  } finally {
    record.ms = Date.now() - t0;
    console.log(`${record.ok ? "ok  " : "FAIL"} ${name} (${record.ms} ms)${record.ok ? "" : `\n${record.detail}`}`);
  }
}

async function until(description, probe, timeoutMs = 30_000, intervalMs = 250) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await probe();
    if (value) {
      return value;
    }
    await page.waitForTimeout(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
}

async function markersText() {
  const panel = page.locator(".markers-panel");
  if (!(await panel.isVisible().catch(() => false))) {
    await page.keyboard.press("Control+Shift+M");
    await panel.waitFor({ state: "visible", timeout: 10_000 });
  }
  return (await panel.innerText()).replace(/\s+/g, " ");
}

const count = (pattern) => (serverLog().match(pattern) ?? []).length;

async function run() {
  makeWorkspace();
  writeSettings();
  const port = await freePort();
  const home = path.join(E2E_DIR, "home");
  const codeServer = spawn(
    env("CODE_SERVER"),
    [
      "--user-data-dir", USER_DATA,
      "--extensions-dir", path.join(E2E_DIR, "extensions"),
      "--bind-addr", `127.0.0.1:${port}`,
      "--auth", "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-getting-started-override",
      WORKSPACE,
    ],
    {
      env: {
        ...process.env,
        HOME: home,
        XDG_CONFIG_HOME: path.join(home, ".config"),
        XDG_DATA_HOME: path.join(home, ".local", "share"),
        TMPDIR: path.join(E2E_DIR, "tmp"),
        STAND_IN_PYTHON: FABRIC_PYTHON,
        STAND_IN_PYTHON_NEXT: FABRIC_PYTHON,
      },
      cwd: home,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  const codeServerLog = fs.createWriteStream(path.join(ARTIFACTS, "code-server.log"));
  codeServer.stdout.pipe(codeServerLog);
  codeServer.stderr.pipe(codeServerLog);

  let browser;
  try {
    await step("code-server answers, workspace trust on", async () => {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000);
      return `port ${port}`;
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"],
    });
    const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);

    await step("the folder opens in Restricted Mode", async () => {
      await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(WORKSPACE)}`);
      await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 60_000 });
      await page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 30_000 });
      const restricted = page.locator(".statusbar-item", { hasText: "Restricted Mode" }).first();
      await restricted.waitFor({ state: "visible", timeout: 30_000 });
      await screenshot("restricted-mode");
      return await restricted.innerText();
    });

    await step("open the script", async () => {
      await page.locator(".explorer-folders-view .monaco-list-row", { hasText: SCRIPT }).first().click();
      await page.locator(".monaco-editor .view-lines", { hasText: "setup_optimizers" }).waitFor({ timeout: 20_000 });
    });

    await step("the extension starts the server and tells it the workspace is not trusted", async () => {
      await until("'server started'", async () => serverLog().includes("[client] server started"), 60_000, 500);
      const log = serverLog();
      if (!log.includes("[client] workspace trusted: false")) {
        throw new Error("the client did not log 'workspace trusted: false'");
      }
      if (!/"workspaceTrusted":\s*false/.test(log)) {
        throw new Error("initialize did not carry workspaceTrusted: false (trace)");
      }
      return "workspace trusted: false";
    });

    await step("the restricted-mode message says why the pyproject's python is ignored", async () => {
      const toast = page.locator(".notifications-toasts .notification-toast", { hasText: "not trusted" }).first();
      await toast.waitFor({ state: "visible", timeout: 60_000 });
      const text = (await toast.innerText()).replace(/\s+/g, " ");
      await screenshot("restricted-mode-message");
      result.restrictedMessage = text;
      if (!text.includes(".tenv") || !text.includes("Manage Workspace Trust")) {
        throw new Error(`unexpected message: ${text}`);
      }
      return text;
    });

    await step("untrusted: no FAB001 (run_config is not resolved) and nothing from the folder ran", async () => {
      await page.waitForTimeout(4000);
      const markers = await markersText();
      result.untrustedProblems = markers;
      if (markers.includes("FAB001")) {
        throw new Error(`FAB001 while untrusted: ${markers}`);
      }
      const ran = [VENV_MARKER, PLANTED_MARKER].filter((marker) => fs.existsSync(marker));
      if (ran.length) {
        throw new Error(`ran in Restricted Mode: ${ran.join(", ")}`);
      }
      return markers.slice(0, 200) || "(no problems)";
    });

    await step("Trust in the workspace trust editor restarts the server, trusted", async () => {
      // Trusting means the folder's programs may run: the planted package would now shadow the server.
      fs.rmSync(path.join(WORKSPACE, "fabric_ls"), { recursive: true, force: true });
      const before = count(/\[client\] server started/g);
      await page.keyboard.press("F1");
      await page.locator(".quick-input-widget input").waitFor({ state: "visible" });
      await page.keyboard.type("Manage Workspace Trust");
      await page.locator(".quick-input-list .monaco-list-row", { hasText: "Manage Workspace Trust" }).first().waitFor();
      await page.keyboard.press("Enter");
      const trustButton = page.locator(".workspace-trust-editor .monaco-button", { hasText: /^\s*Trust\s*$/ }).first();
      await trustButton.waitFor({ state: "visible", timeout: 20_000 });
      await screenshot("trust-editor");
      await trustButton.click();
      await until("a restart for the trust grant", async () => serverLog().includes("(re)starting: the workspace is now trusted"), 30_000, 500);
      await until("the server to start again", async () => count(/\[client\] server started/g) > before, 60_000, 500);
      if (!serverLog().includes("[client] workspace trusted: true")) {
        throw new Error("the client did not log 'workspace trusted: true'");
      }
      return "restarted, workspace trusted: true";
    });

    await step("trusted: FAB001 from the strategy read through the folder's virtualenv", async () => {
      await page.keyboard.press("Escape");
      const markers = await until("FAB001 in the Problems panel", async () => {
        const text = await markersText();
        return text.includes("FAB001") ? text : "";
      }, 60_000, 500);
      await screenshot("trusted-fab001");
      result.trustedProblems = markers;
      if (!markers.includes("DeepSpeed")) {
        throw new Error(`FAB001 without DeepSpeed: ${markers}`);
      }
      if (!fs.existsSync(VENV_MARKER)) {
        throw new Error("the folder's virtualenv Python did not run after trust");
      }
      return markers.slice(0, 300);
    });
    result.ok = true;
  } finally {
    result.serverLog = serverLog();
    result.seconds = (Date.now() - started) / 1000;
    await browser?.close().catch(() => undefined);
    try {
      process.kill(-codeServer.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }
}

fs.mkdirSync(ARTIFACTS, { recursive: true });
try {
  await run();
} catch (error) {
  result.error = String(error?.message ?? error);
} finally {
  fs.writeFileSync(path.join(ARTIFACTS, "result.json"), JSON.stringify(result, null, 2));
  console.log(`${result.ok ? "PASSED" : "FAILED"} in ${((Date.now() - started) / 1000).toFixed(1)} s; artifacts in ${ARTIFACTS}`);
  process.exit(result.ok ? 0 : 1);
}
