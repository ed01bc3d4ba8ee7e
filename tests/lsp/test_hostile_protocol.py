"""Hostile and faulty clients, on the wire: the real server over stdio, framed by hand.

pytest-lsp's client only sends valid JSON-RPC, so these tests speak the base protocol
themselves (``Content-Length`` headers over the server's pipes). Every episode ends by
checking that a second open document is still analysed and published.

Also here: faults around the client (a helper module deleted, an unreadable or invalid
pyproject.toml, a broken ``python`` setting).
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import threading
import time
from typing import Any, Callable, Iterator, Optional

import pytest
from conftest import SCRIPTS, SERVER_COMMAND, copy_scripts, uri_of
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import client_capabilities

VSCODE, NEOVIM = "visual-studio-code", "neovim"
WAIT = 15.0
DEEPSPEED_TEXT = (SCRIPTS / "deepspeed_separate_setup.py").read_text(encoding="utf-8")
DDP_TEXT = DEEPSPEED_TEXT.replace('strategy="deepspeed"', 'strategy="ddp"')
Message = dict[str, Any]


class WireClient:
    """A minimal LSP client: frames JSON by hand, answers the server's requests, keeps every message."""

    def __init__(self, root: pathlib.Path, profile: str = VSCODE, env: Optional[dict[str, str]] = None):
        self.root = root
        self.profile = profile
        self.stderr_path = root / f".server-stderr-{time.monotonic_ns()}.log"
        self._stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            SERVER_COMMAND,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env={**os.environ, **(env or {})},
        )
        self.messages: list[Message] = []
        self.versions: dict[str, int] = {}
        self._condition = threading.Condition()
        self._write_lock = threading.Lock()
        self._next_id = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    # -- wire --------------------------------------------------------------------------------------
    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        try:
            while True:
                length = None
                while True:
                    line = stream.readline()
                    if not line:
                        return
                    if line in (b"\r\n", b"\n"):
                        break
                    name, _, value = line.decode("ascii").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                assert length is not None, "the server sent a message without Content-Length"
                message = json.loads(stream.read(length))
                if "method" in message and "id" in message:
                    self._answer(message)
                with self._condition:
                    self.messages.append(message)
                    self._condition.notify_all()
        except (OSError, ValueError):
            return
        finally:
            with self._condition:
                self._condition.notify_all()

    def _answer(self, request: Message) -> None:
        result: Any = None
        if request["method"] == types.WORKSPACE_CONFIGURATION:
            result = [None for _ in request["params"]["items"]]
        try:
            self.send({"jsonrpc": "2.0", "id": request["id"], "result": result})
        except OSError:
            pass

    def send_body(self, body: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        with self._write_lock:
            stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
            stdin.flush()

    def send(self, message: Message) -> None:
        self.send_body(json.dumps(message).encode("utf-8"))

    def request(self, method: str, params: Any = None) -> int:
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        return self._next_id

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def wait_for(self, predicate: Callable[[Message], bool], timeout: float = WAIT) -> Optional[Message]:
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._condition.wait(remaining)

    def response(self, msg_id: Any, timeout: float = WAIT) -> Message:
        found = self.wait_for(lambda m: "method" not in m and m.get("id") == msg_id, timeout)
        assert found is not None, f"no response to request {msg_id!r} within {timeout} s"
        return found

    def call(self, method: str, params: Any = None, timeout: float = WAIT) -> Message:
        return self.response(self.request(method, params), timeout)

    def result(self, method: str, params: Any = None, timeout: float = WAIT) -> Any:
        answer = self.call(method, params, timeout)
        assert "error" not in answer, answer
        return answer["result"]

    def of_method(self, method: str) -> list[Message]:
        with self._condition:
            return [m for m in self.messages if m.get("method") == method]

    def errors_with_null_id(self) -> list[Message]:
        with self._condition:
            return [m for m in self.messages if "error" in m and m.get("id") is None]

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    # -- LSP ---------------------------------------------------------------------------------------
    def initialize(self, initialization_options: Any = None) -> Message:
        capabilities = default_converter().unstructure(client_capabilities(self.profile))
        result = self.result(
            types.INITIALIZE,
            {
                "processId": os.getpid(),
                "rootUri": uri_of(self.root),
                "workspaceFolders": [{"uri": uri_of(self.root), "name": self.root.name}],
                "capabilities": capabilities,
                "initializationOptions": initialization_options,
            },
        )
        self.notify(types.INITIALIZED, {})
        return result

    @property
    def pulls(self) -> bool:
        return self.profile == NEOVIM

    def open(self, path: pathlib.Path, text: Optional[str] = None) -> str:
        uri = uri_of(path)
        text = path.read_text(encoding="utf-8") if text is None else text
        self.versions[uri] = 1
        self.notify(
            types.TEXT_DOCUMENT_DID_OPEN,
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        return uri

    def replace(self, uri: str, text: str, version: Optional[int] = None) -> int:
        version = self.versions[uri] + 1 if version is None else version
        self.versions[uri] = max(self.versions[uri], version)
        self.notify(
            types.TEXT_DOCUMENT_DID_CHANGE,
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )
        return version

    def published(self, uri: str) -> list[Message]:
        return [
            m["params"]
            for m in self.of_method(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if m["params"]["uri"] == uri
        ]

    def codes(self, uri: str, version: Optional[int] = None, timeout: float = WAIT) -> list[str]:
        """The rule codes for the document's version ``version`` (default: the latest sent)."""
        version = self.versions[uri] if version is None else version
        if self.pulls:
            report = self.result(types.TEXT_DOCUMENT_DIAGNOSTIC, {"textDocument": {"uri": uri}}, timeout)
            return [item["code"] for item in report["items"]]
        found = self.wait_for(
            lambda m: (
                m.get("method") == types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS
                and m["params"]["uri"] == uri
                and m["params"].get("version") == version
            ),
            timeout,
        )
        assert found is not None, f"no diagnostics for {uri} version {version} within {timeout} s"
        return [item["code"] for item in found["params"]["diagnostics"]]

    def wait_codes(
        self, uri: str, predicate: Callable[[list[str]], bool], timeout: float = WAIT
    ) -> list[str]:
        """Diagnostics that change without a new version (another file, settings): wait for them."""
        deadline = time.monotonic() + timeout
        while True:
            if self.pulls:
                codes = self.codes(uri)
            else:
                published = self.published(uri)
                codes = [item["code"] for item in published[-1]["diagnostics"]] if published else []
            if (self.pulls or self.published(uri)) and predicate(codes):
                return codes
            assert time.monotonic() < deadline, f"diagnostics for {uri} stayed {codes}"
            time.sleep(0.05)

    def status(self) -> Message:
        return self.result(types.WORKSPACE_EXECUTE_COMMAND, {"command": "fabric-ls.serverStatus"})

    # -- end ---------------------------------------------------------------------------------------
    def children(self) -> list[int]:
        """The server's child processes (jedi's environment subprocess)."""
        found: list[int] = []
        try:
            for task in os.listdir(f"/proc/{self.process.pid}/task"):
                with open(f"/proc/{self.process.pid}/task/{task}/children", encoding="ascii") as handle:
                    found.extend(int(child) for child in handle.read().split())
        except OSError:
            pass
        return found

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        for stream in (self.process.stdin, self.process.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        self._stderr.close()


@pytest.fixture
def start(tmp_path: pathlib.Path) -> Iterator[Callable[..., WireClient]]:
    """Start and initialize a server: ``start(profile=..., env=..., initialization_options=...)``."""
    clients: list[WireClient] = []

    def starter(
        profile: str = VSCODE,
        env: Optional[dict[str, str]] = None,
        initialization_options: Any = None,
        root: Optional[pathlib.Path] = None,
    ) -> WireClient:
        client = WireClient(root or tmp_path, profile, env)
        clients.append(client)
        client.initialize(initialization_options)
        return client

    yield starter
    for client in clients:
        client.stop()


@pytest.fixture(params=[VSCODE, NEOVIM])
def profile(request: pytest.FixtureRequest) -> str:
    return request.param


def _with_bystander(client: WireClient) -> tuple[str, str]:
    """Two open documents: the one the episode targets (FAB001) and a bystander (FAB001)."""
    target = client.root / "target.py"
    bystander = client.root / "bystander.py"
    target.write_text(DEEPSPEED_TEXT, encoding="utf-8")
    bystander.write_text(DEEPSPEED_TEXT, encoding="utf-8")
    target_uri, bystander_uri = client.open(target), client.open(bystander)
    assert client.codes(target_uri) == ["FAB001"]
    assert client.codes(bystander_uri) == ["FAB001"]
    return target_uri, bystander_uri


def _bystander_still_served(client: WireClient, uri: str) -> None:
    """The other open document is still analysed: an edit to it gets its own diagnostics."""
    client.replace(uri, DDP_TEXT)
    assert client.codes(uri) == []
    client.replace(uri, DEEPSPEED_TEXT)
    assert client.codes(uri) == ["FAB001"]
    assert client.process.poll() is None


def _no_error_popups(client: WireClient) -> None:
    popups = [
        m["params"]["message"]
        for m in client.of_method(types.WINDOW_SHOW_MESSAGE)
        if m["params"]["type"] == types.MessageType.Error.value
    ]
    assert popups == []


def _hover(uri: str, line: int, character: int) -> Message:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


# ---- malformed messages ------------------------------------------------------------------------


def test_a_body_that_is_not_json_gets_a_parse_error_and_the_server_keeps_serving(start, profile) -> None:
    client = start(profile)
    target, bystander = _with_bystander(client)
    bodies = [
        b'{"jsonrpc": "2.0", "id": 99, "method": "textDocument/hover", "params": {',  # cut short
        b"\xff\xfe not utf-8",
        b"[" * 100_000,  # nesting deeper than the JSON parser's recursion
        b"",
    ]
    for body in bodies:
        client.send_body(body)

    # A following valid request still gets its answer, and each broken body got -32700 with id null.
    assert client.result(types.TEXT_DOCUMENT_HOVER, _hover(target, 5, 12)) is not None
    parse_errors = [m for m in client.errors_with_null_id() if m["error"]["code"] == -32700]
    assert len(parse_errors) >= 3
    assert all(m["jsonrpc"] == "2.0" for m in parse_errors)
    assert not [m for m in client.messages if m.get("id") == 99]
    assert any("not valid JSON" in m["params"]["message"] for m in client.of_method(types.WINDOW_LOG_MESSAGE))
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


def test_json_that_is_not_a_jsonrpc_message_gets_invalid_request(start) -> None:
    client = start()
    _, bystander = _with_bystander(client)

    client.send_body(b"[1, 2, 3]")  # a batch: not part of LSP
    client.send_body(b'"hello"')
    client.send_body(b'{"id": 7, "method": "textDocument/hover"}')  # no "jsonrpc"
    client.send({"jsonrpc": "1.0", "id": 8, "method": "shutdown"})

    assert client.response(7)["error"]["code"] == -32600
    assert client.response(8)["error"]["code"] == -32600
    assert client.wait_for(lambda m: len(client.errors_with_null_id()) >= 2) is not None
    assert {m["error"]["code"] for m in client.errors_with_null_id()} == {-32600}
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


def test_a_request_whose_params_do_not_deserialize_gets_invalid_params(start, profile) -> None:
    client = start(profile)
    target, bystander = _with_bystander(client)
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": 5, "character": 0}}
    hostile = [
        (types.TEXT_DOCUMENT_HOVER, {"textDocument": 5}),
        (types.TEXT_DOCUMENT_HOVER, _hover(target, -1, 0)),  # positions are unsigned
        (types.TEXT_DOCUMENT_HOVER, None),
        (types.TEXT_DOCUMENT_CODE_ACTION, {"textDocument": {"uri": target}, "range": whole}),  # no context
        (types.TEXT_DOCUMENT_INLAY_HINT, {"textDocument": {"uri": target}, "range": "all of it"}),
        (types.TEXT_DOCUMENT_DIAGNOSTIC, {"textDocument": {}}),  # no uri
    ]
    ids = [client.request(method, params) for method, params in hostile]

    for msg_id in ids:
        answer = client.response(msg_id, timeout=5)
        assert answer.get("error", {}).get("code") == -32602, (hostile[ids.index(msg_id)], answer)
    # A notification with bad params has no one to answer: it is logged and dropped.
    client.notify(types.TEXT_DOCUMENT_DID_CHANGE, {"textDocument": {"uri": target}, "contentChanges": "x"})
    client.notify(types.CANCEL_REQUEST, {"id": {"not": "an id"}})
    assert client.result(types.TEXT_DOCUMENT_HOVER, _hover(target, 5, 12)) is not None
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


def test_unknown_methods(start) -> None:
    client = start()
    _, bystander = _with_bystander(client)

    assert client.call("fabricLs/noSuchRequest", {})["error"]["code"] == -32601
    assert (
        client.call("textDocument/noSuchFeature", {"textDocument": {"uri": bystander}})["error"]["code"]
        == -32601
    )
    client.notify("fabricLs/noSuchNotification", {"x": 1})
    client.notify("$/noSuchNotification", {"x": 1})

    # Notifications are ignored: no answer of any kind, and the next request is served.
    assert client.status()["version"]
    assert client.errors_with_null_id() == []
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


# ---- documents the server does not have, positions outside them, stale versions -------------------


def test_requests_for_documents_never_opened_get_empty_answers(start, profile) -> None:
    client = start(profile)
    target, bystander = _with_bystander(client)
    ghost = uri_of(client.root / "never_opened.py")
    document = {"textDocument": {"uri": ghost}}
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": 99, "character": 0}}
    fab001 = {"range": whole, "message": "x", "source": "fabric-ls", "code": "FAB001"}

    assert client.result(types.TEXT_DOCUMENT_HOVER, _hover(ghost, 3, 4)) is None
    assert client.result(types.TEXT_DOCUMENT_INLAY_HINT, {**document, "range": whole}) == []
    assert client.result(types.TEXT_DOCUMENT_CODE_LENS, document) == []
    actions = {**document, "range": whole, "context": {"diagnostics": [fab001]}}
    assert client.result(types.TEXT_DOCUMENT_CODE_ACTION, actions) == []
    assert client.result(types.TEXT_DOCUMENT_DIAGNOSTIC, document)["items"] == []
    # Notifications for it are dropped without an error.
    client.notify(
        types.TEXT_DOCUMENT_DID_CHANGE,
        {"textDocument": {"uri": ghost, "version": 2}, "contentChanges": [{"text": "x = 1\n"}]},
    )
    client.notify(types.TEXT_DOCUMENT_DID_SAVE, document)
    client.notify(types.TEXT_DOCUMENT_DID_CLOSE, document)
    assert {d["uri"] for d in client.status()["documents"]} == {target, bystander}
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


def test_positions_outside_the_document_are_clamped_or_empty(start, profile) -> None:
    client = start(profile)
    target, bystander = _with_bystander(client)
    lines = DEEPSPEED_TEXT.count("\n")
    beyond = {"start": {"line": lines + 500, "character": 0}, "end": {"line": 10**6, "character": 10**6}}
    far = {"range": beyond, "message": "x", "source": "fabric-ls", "code": "FAB001"}

    assert client.result(types.TEXT_DOCUMENT_HOVER, _hover(target, 10**6, 10**6)) is None
    # A column past the end of a line is clamped to the line's end: no error either way.
    client.result(types.TEXT_DOCUMENT_HOVER, _hover(target, 5, 10**6))
    assert (
        client.result(types.TEXT_DOCUMENT_INLAY_HINT, {"textDocument": {"uri": target}, "range": beyond})
        == []
    )
    hints = client.result(
        types.TEXT_DOCUMENT_INLAY_HINT,
        {
            "textDocument": {"uri": target},
            "range": {"start": {"line": 0, "character": 0}, "end": beyond["end"]},
        },
    )
    assert all(hint["position"]["line"] < lines for hint in hints)
    actions = client.result(
        types.TEXT_DOCUMENT_CODE_ACTION,
        {"textDocument": {"uri": target}, "range": beyond, "context": {"diagnostics": [far]}},
    )
    assert actions, "a diagnostic gets at least its Ignore action"
    for action in actions:
        # An action may carry a command instead of an edit ("Show example fix").
        for change in (action.get("edit") or {}).get("documentChanges") or []:
            assert all(edit["range"]["end"]["line"] <= lines for edit in change["edits"])
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


def test_a_change_with_an_older_version_is_ignored(start, profile) -> None:
    client = start(profile)
    target, bystander = _with_bystander(client)

    client.replace(target, DDP_TEXT, version=5)
    client.replace(target, DEEPSPEED_TEXT, version=3)  # out of order: older than 5
    # An incremental edit at version 6 applies to version 5's text.
    end = DDP_TEXT.count("\n")
    client.notify(
        types.TEXT_DOCUMENT_DID_CHANGE,
        {
            "textDocument": {"uri": target, "version": 6},
            "contentChanges": [
                {
                    "range": {"start": {"line": end, "character": 0}, "end": {"line": end, "character": 0}},
                    "text": "# 6\n",
                }
            ],
        },
    )
    client.versions[target] = 6

    assert client.codes(target) == []
    [document] = [d for d in client.status()["documents"] if d["uri"] == target]
    assert document["version"] == 6
    if not client.pulls:
        assert 3 not in [params["version"] for params in client.published(target)]
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


# ---- storms ----------------------------------------------------------------------------------


def test_a_storm_of_1000_edits_is_analysed_at_the_latest_version_without_backlog(start) -> None:
    client = start()
    target, bystander = _with_bystander(client)
    analyses_before = client.status()["worker"]["analyses"]

    started = time.monotonic()
    for number in range(1000):
        text = DDP_TEXT if number == 999 else DEEPSPEED_TEXT + f"# edit {number}\n"
        client.replace(target, text)
        if number % 10 == 9:
            time.sleep(0.01)  # about a second in all, as a fast macro or a paste-heavy editor does
    storm_seconds = time.monotonic() - started
    latest = client.versions[target]

    # No backlog: a hover sent right after the storm is answered at once.
    sent = time.monotonic()
    client.result(types.TEXT_DOCUMENT_HOVER, _hover(target, 5, 12))
    assert time.monotonic() - sent < 2.0
    assert client.codes(target, latest, timeout=5) == []

    published = [params["version"] for params in client.published(target)]
    assert published == sorted(published), "an older version was published after a newer one"
    assert published[-1] == latest
    worker = client.status()["worker"]
    analysed = worker["analysed_versions"][target]
    assert analysed[-1] == latest
    # Each analysis takes the newest text when it starts, so versions only go up and most are
    # skipped (about 140 of the 1,000 are analysed on a 2-core machine: the worker never idles).
    assert analysed == sorted(set(analysed))
    analyses = worker["analyses"] - analyses_before
    assert analyses < 1000 // 2, (analyses, storm_seconds)
    # Nothing is left queued: once the latest version is out, no analysis follows.
    time.sleep(0.3)
    assert client.status()["worker"]["analyses"] == worker["analyses"]
    _bystander_still_served(client, bystander)


def test_a_storm_of_cancel_requests_for_unknown_ids_is_ignored(start) -> None:
    client = start()
    target, bystander = _with_bystander(client)
    chance = random.Random(20261101)

    for number in range(2000):
        unknown: Any = chance.randrange(10**9) if number % 2 else f"no-such-request-{chance.random()}"
        client.notify(types.CANCEL_REQUEST, {"id": unknown})
    sent = time.monotonic()
    assert client.result(types.TEXT_DOCUMENT_HOVER, _hover(target, 5, 12)) is not None
    assert time.monotonic() - sent < 2.0

    assert client.errors_with_null_id() == []
    assert client.stderr().count("Cancel notification for unknown message id") == 0
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


# ---- the end of a session ----------------------------------------------------------------------


def test_a_client_that_dies_mid_request_leaves_no_server_behind(start) -> None:
    client = start(env={"FABRIC_LS_TEST_ANALYSIS_DELAY": "2"})
    uri = client.open(client.root / "target.py", DEEPSPEED_TEXT)
    client.request(types.TEXT_DOCUMENT_HOVER, _hover(uri, 5, 12))  # waits for the slow analysis
    time.sleep(0.3)
    children = client.children()

    # The client goes away: both ends of its pipes close, as when its process is killed.
    assert client.process.stdin is not None and client.process.stdout is not None
    client.process.stdin.close()
    client.process.stdout.close()

    client.process.wait(timeout=5)  # raises if the server lingers
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{child}") for child in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [child for child in children if os.path.exists(f"/proc/{child}")] == []


def test_shutdown_without_exit_then_stdin_closes(start) -> None:
    client = start()
    uri = client.open(client.root / "target.py", DEEPSPEED_TEXT)
    assert client.codes(uri) == ["FAB001"]

    assert client.call(types.SHUTDOWN) == {"jsonrpc": "2.0", "id": client._next_id, "result": None}
    # Requests after shutdown get InvalidRequest instead of silence.
    assert client.call(types.TEXT_DOCUMENT_HOVER, _hover(uri, 5, 12))["error"]["code"] == -32600
    assert client.process.stdin is not None
    client.process.stdin.close()

    assert client.process.wait(timeout=5) == 0


def test_exit_without_shutdown_ends_with_status_1(start) -> None:
    client = start()
    client.notify(types.EXIT)

    assert client.process.wait(timeout=5) == 1


# ---- faults around the client ------------------------------------------------------------------


def test_a_deleted_helper_module_reanalyses_its_importer(start, tmp_path: pathlib.Path, profile) -> None:
    copy_scripts(tmp_path, "helper_project")
    project = tmp_path / "helper_project"
    client = start(profile, root=project)
    train = client.open(project / "train.py")
    bystander = client.open(project / "bystander.py", DEEPSPEED_TEXT)
    assert client.codes(train) == ["FAB001"]  # the strategy comes from helpers.py

    helpers = project / "helpers.py"
    helpers.unlink()
    client.notify(
        types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        {"changes": [{"uri": uri_of(helpers), "type": types.FileChangeType.Deleted.value}]},
    )

    # The strategy is now unknown: the finding that came from the helper is gone.
    assert client.wait_codes(train, lambda codes: codes == []) == []
    helpers.write_text('STRATEGY = "deepspeed"\n', encoding="utf-8")
    client.notify(
        types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
        {"changes": [{"uri": uri_of(helpers), "type": types.FileChangeType.Created.value}]},
    )
    assert client.wait_codes(train, lambda codes: codes == ["FAB001"]) == ["FAB001"]
    _no_error_popups(client)
    _bystander_still_served(client, bystander)


def _unreadable_pyproject(kind: str, path: pathlib.Path) -> None:
    if kind == "invalid TOML":
        path.write_text('[tool.fabric-ls\nignore = ["FAB001"', encoding="utf-8")
    elif kind == "a directory":
        path.mkdir()
    else:
        path.write_text('[tool.fabric-ls]\nignore = ["FAB001"]\n', encoding="utf-8")
        path.chmod(0)


@pytest.mark.parametrize("kind", ["invalid TOML", "a directory", "no read permission"])
def test_an_unreadable_pyproject_is_reported_and_defaults_are_used(
    start, tmp_path: pathlib.Path, kind
) -> None:
    if kind == "no read permission" and os.geteuid() == 0:
        pytest.skip("root reads files without permission")
    pyproject = tmp_path / "pyproject.toml"
    _unreadable_pyproject(kind, pyproject)
    try:
        client = start()
        uri = client.open(tmp_path / "train.py", DEEPSPEED_TEXT)

        # Defaults apply (FAB001 is not ignored) and the user is told which file is at fault.
        assert client.codes(uri) == ["FAB001"]
        shown = client.wait_for(
            lambda m: (
                m.get("method") == types.WINDOW_SHOW_MESSAGE and str(pyproject) in m["params"]["message"]
            )
        )
        logged = client.wait_for(
            lambda m: m.get("method") == types.WINDOW_LOG_MESSAGE and str(pyproject) in m["params"]["message"]
        )
        assert shown is not None and logged is not None
        assert "cannot read" in shown["params"]["message"]
    finally:
        if pyproject.exists() and not pyproject.is_dir():
            pyproject.chmod(0o644)


def _broken_venv(tmp_path: pathlib.Path, kind: str) -> pathlib.Path:
    venv = tmp_path / "broken-venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /nonexistent/bin\n", encoding="utf-8")
    python = venv / "bin" / "python"
    if kind == "dangling symlink":
        python.symlink_to("/nonexistent/bin/python3.11")
    elif kind == "interpreter that fails":
        python.write_text("#!/bin/sh\nexit 3\n", encoding="utf-8")
        python.chmod(0o755)
    else:  # missing interpreter
        return tmp_path / "no-such-venv" / "bin" / "python"
    return python


@pytest.mark.parametrize("kind", ["dangling symlink", "interpreter that fails", "missing interpreter"])
def test_a_broken_python_setting_is_reported_and_the_servers_own_is_used(
    start, tmp_path: pathlib.Path, kind: str
) -> None:
    python = _broken_venv(tmp_path, kind)
    copy_scripts(tmp_path, "helper_project")
    project = tmp_path / "helper_project"
    client = start(initialization_options={"python": str(python)}, root=project)
    uri = client.open(project / "train.py")

    # The helper is still found (by its import path) and the script still analysed.
    assert client.codes(uri) == ["FAB001"]
    shown = client.wait_for(
        lambda m: m.get("method") == types.WINDOW_SHOW_MESSAGE and str(python) in m["params"]["message"]
    )
    assert shown is not None, [m["params"]["message"] for m in client.of_method(types.WINDOW_SHOW_MESSAGE)]
    assert "cannot use the Python environment" in shown["params"]["message"]
    assert client.wait_for(
        lambda m: m.get("method") == types.WINDOW_LOG_MESSAGE and str(python) in m["params"]["message"]
    )
    [document] = client.status()["documents"]
    assert document["python"] == str(python)
