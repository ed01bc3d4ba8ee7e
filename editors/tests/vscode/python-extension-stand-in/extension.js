// The subset of ms-python.python's exported API (`ready`, `environments`) that fabric-ls uses, with an
// active environment taken from the environment variables the e2e test gives code-server.
const vscode = require("vscode");

function activate(context) {
  let active = process.env.STAND_IN_PYTHON || "";
  const changed = new vscode.EventEmitter();
  context.subscriptions.push(
    changed,
    vscode.commands.registerCommand("pythonStandIn.switchEnvironment", () => {
      active = process.env.STAND_IN_PYTHON_NEXT || active;
      changed.fire({ id: active, path: active, resource: undefined });
    }),
  );
  return {
    ready: Promise.resolve(),
    environments: {
      getActiveEnvironmentPath: () => ({ id: active, path: active }),
      resolveEnvironment: async (environment) => {
        const path = typeof environment === "string" ? environment : environment.path;
        return { id: path, path, executable: { uri: vscode.Uri.file(path), bitness: "64-bit", sysPrefix: "" } };
      },
      onDidChangeActiveEnvironmentPath: changed.event,
    },
  };
}

module.exports = { activate, deactivate() {} };
