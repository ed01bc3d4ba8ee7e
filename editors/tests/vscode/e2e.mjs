// End-to-end test of the fabric-ls VS Code extension in a real VS Code (code-server), driven by
// headless Chromium. Run by editors/tests/run_vscode_e2e.sh, which installs everything and sets:
//   CODE_SERVER    the code-server launcher
//   E2E_DIR        a fresh folder for code-server's profile, with the extension installed in E2E_DIR/extensions
//   WORKSPACE      the folder to open; it holds SCRIPT
//   SCRIPT         the example script with a FAB001 seed error
//   NOTEBOOK       a notebook in WORKSPACE with a FAB016 error in its sixth cell
//   FABRIC_PYTHON  an interpreter with fabric-ls installed (fabricLs.importStrategy fromEnvironment)
//   BARE_PYTHON    a virtualenv without fabric-ls or any of its dependencies: it runs the bundled server
//   OLD_PYTHON     a Python older than 3.9 (the "needs Python 3.9" notification)
// The extensions folder also holds a stand-in for ms-python.python (python-extension-stand-in/), whose
// active environment is FABRIC_PYTHON until its "Switch Environment" command makes it BARE_PYTHON.
//   ARTIFACTS      where screenshots, logs and result.json go
//   README_SCREENSHOT  optional: also save the Problems/quick-fix screenshot there
// Every step is recorded in ARTIFACTS/result.json; the exit code is 0 only if all steps passed.

import { spawn } from "node:child_process";
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
const WORKSPACE = env("WORKSPACE");
const SCRIPT = env("SCRIPT");
const ARTIFACTS = env("ARTIFACTS");
const FABRIC_PYTHON = env("FABRIC_PYTHON");
const BARE_PYTHON = env("BARE_PYTHON");
const OLD_PYTHON = env("OLD_PYTHON");
const SCRIPT_PATH = path.join(WORKSPACE, SCRIPT);
// A notebook in WORKSPACE whose loop cell calls loss.backward() under 16-mixed (FAB016).
const NOTEBOOK = env("NOTEBOOK");
const USER_DATA = path.join(E2E_DIR, "user-data");
const SETTINGS_PATH = path.join(USER_DATA, "User", "settings.json");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

const result = { ok: false, steps: [], serverLog: "", finalText: "" };
const started = Date.now();

function writeSettings() {
  const settings = {
    "workbench.startupEditor": "none",
    // A file opened from the explorer or a link keeps its tab (a preview tab would be replaced by the
    // next one: the rule page opened from the Problems panel took the script's tab).
    "workbench.editor.enablePreview": false,
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "workbench.welcomePage.walkthroughs.openOnInstall": false,
    "security.workspace.trust.enabled": false,
    "extensions.ignoreRecommendations": true,
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "update.mode": "none",
    "telemetry.telemetryLevel": "off",
    "chat.commandCenter.enabled": false,
    "editor.hover.delay": 300,
    "editor.minimap.enabled": false,
    "files.autoSave": "off",
    "fabricLs.trace.server": "messages",
  };
  fs.mkdirSync(path.dirname(SETTINGS_PATH), { recursive: true });
  fs.writeFileSync(SETTINGS_PATH, JSON.stringify(settings, null, 2));
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
      const response = await fetch(url);
      if (response.status < 500) {
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`code-server did not answer at ${url} within ${timeoutMs} ms`);
}

/** The Fabric LS output channel as code-server logged it (client messages, server stderr, trace). */
function serverLog() {
  const logs = path.join(USER_DATA, "logs");
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
  walk(logs);
  return found.map((file) => fs.readFileSync(file, "utf8")).join("\n");
}

/** The client's last word on which fabric-ls it runs (bundled or installed). */
function lastServerLine() {
  return [...serverLog().matchAll(/\[client\] server: .*/g)].at(-1)?.[0] ?? "";
}

let page;
let shot = 0;

async function screenshot(name) {
  shot += 1;
  const file = path.join(ARTIFACTS, `${String(shot).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file }).catch(() => undefined);
  return file;
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
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) {
      return last;
    }
    await page.waitForTimeout(intervalMs);
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${description}`);
}

const squiggles = ".monaco-editor .squiggly-error, .monaco-editor .squiggly-warning, .monaco-editor .squiggly-info";

/** Where `text` is drawn in the editor (first occurrence), from a DOM Range over its text node. */
async function textBox(text) {
  const box = await page.evaluate((wanted) => {
    for (const line of document.querySelectorAll(".monaco-editor .view-lines .view-line")) {
      const walker = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
      // Monaco may split a word over several spans: join the line's text nodes, then map back.
      const nodes = [];
      let joined = "";
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        nodes.push({ node, start: joined.length });
        joined += node.textContent.replace(/\u00a0/g, " ");
      }
      const at = joined.indexOf(wanted);
      if (at < 0) {
        continue;
      }
      const locate = (offset) => {
        const hit = nodes.findLast((entry) => entry.start <= offset);
        return [hit.node, offset - hit.start];
      };
      const range = document.createRange();
      range.setStart(...locate(at));
      range.setEnd(...locate(at + wanted.length - 1));
      const rect = range.getBoundingClientRect();
      return { x: rect.x, y: rect.y, width: rect.width, height: rect.height };
    }
    return null;
  }, text);
  if (!box) {
    throw new Error(`"${text}" is not on screen`);
  }
  return { ...box, cx: box.x + box.width / 2, cy: box.y + box.height / 2 };
}

async function markersText() {
  const panel = page.locator(".markers-panel");
  if (!(await panel.isVisible().catch(() => false))) {
    await page.keyboard.press("Control+Shift+M");
    await panel.waitFor({ state: "visible", timeout: 10_000 });
  }
  return (await panel.innerText()).replace(/\s+/g, " ");
}

async function run() {
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
      "--disable-workspace-trust",
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
        // The Python extension stand-in's active environment, and the one its command switches to.
        STAND_IN_PYTHON: FABRIC_PYTHON,
        STAND_IN_PYTHON_NEXT: BARE_PYTHON,
      },
      // Not the checkout: python -c/-m put the working directory on sys.path.
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
    await step("code-server answers", async () => {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000);
      return `port ${port}`;
    });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1400, height: 860 } });
    page = await context.newPage();
    page.setDefaultTimeout(15_000);

    await step("workbench loads with the folder", async () => {
      await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(WORKSPACE)}`);
      await page.locator(".monaco-workbench").waitFor({ state: "visible", timeout: 60_000 });
      await page.locator(".explorer-folders-view .monaco-list-row").first().waitFor({ timeout: 30_000 });
    });

    await step("open the example script", async () => {
      await page.locator(".explorer-folders-view .monaco-list-row", { hasText: SCRIPT }).first().click();
      await page.locator(".monaco-editor .view-lines", { hasText: "setup_optimizers" }).waitFor({ timeout: 20_000 });
      return SCRIPT;
    });

    await step("the bundled server starts in the Python extension's active environment", async () => {
      await until("the client to log 'server started'", async () => serverLog().includes("[client] server started"), 60_000, 500);
      const chosen = serverLog().match(/\[client\] interpreter: .*/)?.[0] ?? "";
      if (chosen !== `[client] interpreter: ${FABRIC_PYTHON} (the Python extension's active environment)`) {
        throw new Error(`unexpected choice: ${chosen}`);
      }
      const server = lastServerLine();
      if (!server.includes("fabric-ls bundled with the extension")) {
        throw new Error(`not the bundled server: ${server}`);
      }
      return `${chosen}; ${server}`;
    });

    let diagnosticLine = "";
    await step("FAB001 squiggle on the setup_optimizers line", async () => {
      await until("a squiggle", async () => (await page.locator(squiggles).count()) > 0, 60_000);
      await screenshot("diagnostic");
      // The squiggle must sit on the line of the separate setup_optimizers call.
      const squiggleBox = await page.locator(squiggles).first().boundingBox();
      const lineBox = await page.locator(".monaco-editor .view-line", { hasText: "setup_optimizers" }).first().boundingBox();
      if (!squiggleBox || !lineBox || Math.abs(squiggleBox.y + squiggleBox.height / 2 - (lineBox.y + lineBox.height / 2)) > lineBox.height) {
        throw new Error(`squiggle at ${JSON.stringify(squiggleBox)}, setup_optimizers line at ${JSON.stringify(lineBox)}`);
      }
      diagnosticLine = "setup_optimizers";
      return `squiggle y=${squiggleBox.y}`;
    });

    await step("Problems panel shows FAB001 from fabric-ls", async () => {
      const text = await until("FAB001 in the Problems panel", async () => {
        const markers = await markersText();
        return markers.includes("FAB001") ? markers : "";
      });
      await screenshot("problems");
      if (!/fabric-ls/.test(text)) {
        throw new Error(`no source fabric-ls in: ${text}`);
      }
      result.problems = text;
      return text.slice(0, 300);
    });

    await step("the FAB001 link in the Problems panel opens the installed rule page as a preview", async () => {
      // The code is drawn as a link (its codeDescription href: the page shipped with the server).
      const link = page.locator(".markers-panel .monaco-link", { hasText: "FAB001" }).first();
      await link.waitFor({ state: "visible", timeout: 15_000 });
      await link.click();
      const tab = await until("a markdown preview of FAB001.md", async () => {
        const titles = await page.locator(".tabs-container .tab").allInnerTexts().catch(() => []);
        return titles.find((title) => title.includes("Preview FAB001.md")) ?? "";
      }, 30_000);
      const preview = await until("the rule page's heading in the preview", async () => {
        for (const frame of page.frames()) {
          const heading = await frame.locator("h1").first().innerText({ timeout: 1_000 }).catch(() => "");
          if (heading.includes("FAB001")) {
            return heading;
          }
        }
        return "";
      }, 30_000);
      await screenshot("rule-page");
      await page.keyboard.press("Control+W");
      // Back to the script for the steps that follow: closing the preview need not show it again
      // (the page may have opened beside it, or as a tab of its own in the script's group).
      await page.locator(".explorer-folders-view .monaco-list-row", { hasText: SCRIPT }).first().click();
      await page.locator(".monaco-editor .view-lines", { hasText: "setup_optimizers" }).first().waitFor({ timeout: 20_000 });
      return `${tab.trim()}: ${preview.trim()}`;
    });

    await step("hover on the setup call shows the resolved strategy", async () => {
      await page.keyboard.press("Escape");
      const target = await textBox("setup_optimizers");
      await page.mouse.move(target.cx, target.cy);
      // The hover widget stacks the diagnostic (which names the strategy too) over the server's
      // own hover: read the server's part only.
      const serverHover = page.locator(".monaco-hover:not(.hidden) .hover-row:not(.status-bar):not(:has(.marker))");
      const text = await until("the server's hover naming DeepSpeedStrategy", async () => {
        const shown = (await serverHover.allInnerTexts().catch(() => [])).join("\n");
        result.hoverParts = await page.locator(".monaco-hover:not(.hidden) .hover-row").evaluateAll((rows) =>
          rows.map((row) => `${row.className} > ${row.firstElementChild?.className}: ${row.innerText.slice(0, 60)}`),
        );
        if (shown.includes("DeepSpeedStrategy")) {
          return shown;
        }
        // Nudge the mouse: Monaco only hovers after a move.
        await page.mouse.move(target.cx + 1, target.cy);
        return "";
      }, 30_000, 500);
      await screenshot("hover");
      result.hover = text;
      return text.replace(/\s+/g, " ").slice(0, 300);
    });

    await step("quick fix with Ctrl+. removes the diagnostic", async () => {
      await page.mouse.move(5, 5);
      await page.keyboard.press("Escape");
      const squiggled = await textBox(diagnosticLine);
      await page.mouse.click(squiggled.cx, squiggled.cy);
      await page.keyboard.press("Escape");
      await page.keyboard.press("Control+.");
      const menu = page.locator(".action-widget");
      await menu.waitFor({ state: "visible", timeout: 15_000 });
      const items = (await menu.innerText()).replace(/\s+/g, " ");
      await screenshot("quick-fix-menu");
      result.quickFixMenu = items;
      if (process.env.README_SCREENSHOT) {
        await page.screenshot({ path: process.env.README_SCREENSHOT });
      }
      await page.keyboard.press("Enter");
      await until("the squiggle to go away", async () => (await page.locator(squiggles).count()) === 0, 30_000);
      const markers = await until("FAB001 to leave the Problems panel", async () => {
        const text = await markersText();
        return text.includes("FAB001") ? "" : text || "(empty)";
      });
      await page.keyboard.press("Control+S");
      await until("the fixed file on disk", async () => fs.readFileSync(SCRIPT_PATH, "utf8") !== result.originalText, 10_000);
      result.finalText = fs.readFileSync(SCRIPT_PATH, "utf8");
      await screenshot("fixed");
      if (result.finalText.includes("fabric.setup_optimizers(") || !result.finalText.includes("fabric.setup(")) {
        throw new Error(`the file was not fixed to a joint fabric.setup(...):\n${result.finalText}`);
      }
      return `menu: ${items.slice(0, 200)} | problems after: ${markers.slice(0, 120)}`;
    });

    await step("a notebook: the FAB016 squiggle is on its cell's loss.backward() line", async () => {
      await page.locator(".explorer-folders-view .monaco-list-row", { hasText: NOTEBOOK }).first().click();
      await page.locator(".notebookOverlay").first().waitFor({ state: "visible", timeout: 30_000 });
      const markers = await until("FAB016 in the Problems panel", async () => {
        const text = await markersText();
        return text.includes("FAB016") ? text : "";
      }, 60_000);
      result.notebookProblems = markers;
      // The loop cell is below the fold: the Problems entry reveals it.
      await page.locator(".markers-panel .monaco-list-row", { hasText: "FAB016" }).last().click();
      const cellLine = page.locator(".notebookOverlay .monaco-editor .view-line", { hasText: "loss.backward()" }).first();
      await cellLine.waitFor({ timeout: 30_000 });
      const cellSquiggles = ".notebookOverlay .monaco-editor .squiggly-error";
      await until("a squiggle in a notebook cell", async () => (await page.locator(cellSquiggles).count()) > 0, 60_000);
      await screenshot("notebook");
      // Exactly one squiggle, on the loss.backward() line of the loop cell (cell 6 of the notebook).
      if ((await page.locator(cellSquiggles).count()) !== 1) {
        throw new Error(`${await page.locator(cellSquiggles).count()} squiggles in the notebook`);
      }
      const squiggleBox = await page.locator(cellSquiggles).first().boundingBox();
      const lineBox = await cellLine.boundingBox();
      if (!squiggleBox || !lineBox || Math.abs(squiggleBox.y + squiggleBox.height / 2 - (lineBox.y + lineBox.height / 2)) > lineBox.height) {
        throw new Error(`squiggle at ${JSON.stringify(squiggleBox)}, loss.backward() line at ${JSON.stringify(lineBox)}`);
      }
      // Back to the script (its tab stays open), for the steps that follow.
      await page.locator(".explorer-folders-view .monaco-list-row", { hasText: SCRIPT }).first().click();
      await page.locator(".monaco-editor .view-lines", { hasText: "fabric.setup(" }).first().waitFor({ timeout: 20_000 });
      return markers.slice(0, 300);
    });

    await step("Fabric LS: Restart Server command restarts the server", async () => {
      const before = (serverLog().match(/\[client\] server started/g) ?? []).length;
      await page.keyboard.press("F1");
      await page.locator(".quick-input-widget input").waitFor({ state: "visible" });
      await page.keyboard.type("Fabric LS: Restart Server");
      await page.locator(".quick-input-list .monaco-list-row", { hasText: "Restart Server" }).first().waitFor();
      await page.keyboard.press("Enter");
      await until("a second 'server started'", async () => (serverLog().match(/\[client\] server started/g) ?? []).length > before, 60_000, 500);
    });

    await step("the settings editor lists the extension's settings with descriptions", async () => {
      await page.keyboard.press("Control+Comma");
      await page.locator(".settings-editor").waitFor({ state: "visible" });
      await page.waitForTimeout(500);
      await page.keyboard.type("@ext:fabric-ls.fabric-ls");
      // The count can lag behind the query (a stale count from a half-typed one): wait until the
      // extension's own settings are listed and the count has stopped changing.
      await page.locator('.settings-editor [data-key="fabricLs.interpreter"]').waitFor({ timeout: 15_000 });
      // Each contributed setting: fabricLs.interpreter, importStrategy, python, strategy, select, ignore,
      // severity, docsBaseUrl, trace.server. The count lags behind the query (a count from a half-typed
      // query, or the unfiltered "1447 Settings Found" under load): wait for the state checked, generously.
      const expected = "9 Settings Found";
      let shown = "";
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        shown = await page.locator(".settings-editor .settings-count-widget").innerText().catch(() => "");
        if (shown.startsWith(expected)) {
          break;
        }
        await page.waitForTimeout(250);
      }
      await page.keyboard.press("Escape");
      if (!shown.startsWith(expected)) {
        throw new Error(`expected "${expected}" within 60 s, the settings editor says: ${shown}`);
      }
      await screenshot("settings");
      const description = await page.locator('.settings-editor [data-key="fabricLs.interpreter"] .setting-item-description').innerText();
      if (!description.includes("it needs nothing installed")) {
        throw new Error(`unexpected description: ${description}`);
      }
      return `${shown}; ${description}`;
    });

    const startedCount = () => (serverLog().match(/\[client\] server started/g) ?? []).length;
    const setInterpreterSetting = async (value) => {
      await page.locator(".settings-editor .settings-header .suggest-input-container").click();
      await page.keyboard.press("Control+A");
      await page.keyboard.type("fabricLs.interpreter");
      const input = page.locator('.settings-editor [data-key="fabricLs.interpreter"] input');
      await input.click();
      await input.fill(value);
      await page.keyboard.press("Tab");
    };
    // An enum setting: the settings editor draws its own drop-down (keyboard and clicks, no native <select>).
    const setImportStrategy = async (value) => {
      await page.keyboard.press("Control+Comma");
      await page.locator(".settings-editor").waitFor({ state: "visible" });
      await page.locator(".settings-editor .settings-header .suggest-input-container").click();
      await page.keyboard.press("Control+A");
      await page.keyboard.type("fabricLs.importStrategy");
      const select = page.locator('.settings-editor [data-key="fabricLs.importStrategy"] select');
      await select.click();
      const dropDown = page.locator(".monaco-select-box-dropdown-container");
      await dropDown.waitFor({ state: "visible", timeout: 10_000 });
      await dropDown.locator(".monaco-list-row", { hasText: value }).first().click();
      await screenshot(`import-strategy-${value}`);
    };
    const notification = async (...parts) => {
      let toast = page.locator(".notifications-toasts .notification-toast");
      for (const part of parts) {
        toast = toast.filter({ hasText: part });
      }
      await toast.first().waitFor({ state: "visible", timeout: 60_000 });
      return (await toast.first().innerText()).replace(/\s+/g, " ");
    };

    const lastInterpreterLine = () => [...serverLog().matchAll(/\[client\] interpreter: .*/g)].at(-1)?.[0] ?? "";
    const startsOn = async (description, change) => {
      const before = startedCount();
      await change();
      await until(`the server to start again (${description})`, async () => startedCount() > before, 60_000, 500);
      return `${lastInterpreterLine()}; ${lastServerLine()}`;
    };

    await step("setting fabricLs.interpreter to a bare virtualenv runs the bundled server in it", async () => {
      const restartsBefore = (serverLog().match(/\(re\)starting: settings changed/g) ?? []).length;
      const log = await startsOn("bare virtualenv", () => setInterpreterSetting(BARE_PYTHON));
      if (!log.includes(`${BARE_PYTHON} (from the setting fabricLs.interpreter)`) || !log.includes("bundled with the extension")) {
        throw new Error(`unexpected start: ${log}`);
      }
      if ((serverLog().match(/\(re\)starting: settings changed/g) ?? []).length <= restartsBefore) {
        throw new Error("no restart logged for the settings change");
      }
      return log;
    });

    await step("undoing the fix brings FAB001 back from the server in the bare virtualenv", async () => {
      await page.locator(".tabs-container .tab", { hasText: SCRIPT }).first().click();
      const line = await textBox("fabric.setup(");
      await page.mouse.click(line.cx, line.cy);
      await page.keyboard.press("Escape");
      await page.keyboard.press("Control+Z");
      await page.locator(".monaco-editor .view-lines", { hasText: "setup_optimizers" }).waitFor({ timeout: 10_000 });
      await until("the FAB001 squiggle again", async () => (await page.locator(squiggles).count()) > 0, 60_000);
      const markers = await until("FAB001 in the Problems panel again", async () => {
        const text = await markersText();
        return text.includes("FAB001") ? text : "";
      });
      await screenshot("bare-virtualenv-diagnostic");
      return markers.slice(0, 200);
    });

    await step("setting fabricLs.interpreter to a Python older than 3.9 says so", async () => {
      await page.keyboard.press("Control+Comma");
      await page.locator(".settings-editor").waitFor({ state: "visible" });
      await setInterpreterSetting(OLD_PYTHON);
      const text = await notification("needs Python 3.9 or newer", "from the setting fabricLs.interpreter");
      await screenshot("too-old-notification");
      result.tooOldNotification = text;
      if (!text.includes(`the interpreter "${OLD_PYTHON}"`) || !/is Python (2|3\.[0-8])\.\d+ at /.test(text)) {
        throw new Error(`unexpected notification: ${text}`);
      }
      return text;
    });

    await step("clearing fabricLs.interpreter goes back to the Python extension's environment", async () => {
      const log = await startsOn("setting cleared", () => setInterpreterSetting(""));
      if (!log.includes(`${FABRIC_PYTHON} (the Python extension's active environment)`)) {
        throw new Error(`unexpected choice: ${log}`);
      }
      return log;
    });

    await step("fabricLs.importStrategy fromEnvironment runs the fabric-ls installed in the interpreter", async () => {
      const log = await startsOn("fromEnvironment", () => setImportStrategy("fromEnvironment"));
      if (!log.includes(`${FABRIC_PYTHON} (the Python extension's active environment)`) || !log.includes("the fabric-ls installed in the interpreter")) {
        throw new Error(`unexpected start: ${log}`);
      }
      const back = await startsOn("useBundled", () => setImportStrategy("useBundled"));
      if (!back.includes("bundled with the extension")) {
        throw new Error(`the default did not go back to the bundled server: ${back}`);
      }
      return `${log} | back: ${back}`;
    });

    await step("selecting another environment in the Python extension restarts the server in it", async () => {
      const log = await startsOn("environment switched", async () => {
        await page.keyboard.press("F1");
        await page.locator(".quick-input-widget input").waitFor({ state: "visible" });
        await page.keyboard.type("Python Stand-in: Switch Environment");
        await page.locator(".quick-input-list .monaco-list-row", { hasText: "Switch Environment" }).first().waitFor();
        await page.keyboard.press("Enter");
      });
      if (!serverLog().includes("(re)starting: the Python extension's interpreter changed")) {
        throw new Error("no restart logged for the environment change");
      }
      if (!log.includes(`${BARE_PYTHON} (the Python extension's active environment)`) || !log.includes("bundled with the extension")) {
        throw new Error(`unexpected start: ${log}`);
      }
      return log;
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

result.originalText = fs.readFileSync(SCRIPT_PATH, "utf8");
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
