"""What a hostile or buggy client cannot do to the server: repairs to pygls 2.1.1's JSON-RPC handling.

Measured on pygls 2.1.1 (see tests/lsp/test_hostile_protocol.py):

* a body that is not JSON, or JSON that is not a JSON-RPC message, got no response and an
  "Error in server" pop-up; JSON-RPC wants -32700 (parse error) / -32600 (invalid request)
  with ``id: null`` (or the request's id when it can be read);
* a request that arrives after ``shutdown`` was dropped without an answer (the client waits
  for ever); the LSP spec wants an InvalidRequest error;
* every notification and every step of a built-in handler left its future in
  ``_request_futures`` for ever: one per ``didChange``, a leak that grows with each keystroke;
* ``didChange`` for a document that was never opened raised inside pygls (an error pop-up),
  and one carrying an older version than the document's replaced newer text with stale text;
* every ``$/cancelRequest`` for an unknown id logged a warning: a storm of them flooded stderr.
"""

from __future__ import annotations

import json
import logging
from concurrent.futures import Future
from typing import Any, Callable, Optional
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol, lsp_method

logger = logging.getLogger("fabric_ls.protocol")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
_MISSING = object()


def _request_id(message: Any) -> Optional[Any]:
    """The id of a message that failed, if it is a valid JSON-RPC id (else None, sent as null)."""
    if isinstance(message, dict):
        candidate = message.get("id")
    else:
        candidate = getattr(message, "id", None)
    if isinstance(candidate, bool) or not isinstance(candidate, (int, str)):
        return None
    return candidate


class HardenedProtocol(LanguageServerProtocol):
    """``LanguageServerProtocol`` that answers every request it cannot serve and keeps nothing per message."""

    def send_error(self, msg_id: Optional[Any], code: int, message: str) -> None:
        """An error response written as plain JSON, so that ``"id": null`` is kept (JSON-RPC 2.0, 5.1)."""
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    # -- messages that are not JSON-RPC, and requests after shutdown --------------------------------
    def handle_message(self, message: Any) -> None:
        jsonrpc = getattr(message, "jsonrpc", _MISSING)
        if jsonrpc is _MISSING:
            # Valid JSON that is no JSON-RPC message: an array (batch), a string, an object without "jsonrpc".
            logger.warning("not a JSON-RPC message: %.200r", message)
            self.send_error(
                _request_id(message), INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
            )
            self._tell("a message that is not JSON-RPC 2.0 was ignored")
            return
        method = getattr(message, "method", None)
        is_request = method is not None and getattr(message, "id", None) is not None
        if jsonrpc is not None and jsonrpc != self.VERSION and is_request:
            self.send_error(_request_id(message), INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"')
            return
        if self._shutdown and is_request and method != types.EXIT:
            self.send_error(
                _request_id(message), INVALID_REQUEST, f"Invalid Request: {method} after shutdown"
            )
            return
        super().handle_message(message)

    # -- no future kept per notification -----------------------------------------------------------
    def _execute_handler(
        self,
        msg_id: Any,
        handler: Callable[..., Any],
        callback: Callable[[Future], None],
        args: Optional[tuple[Any, ...]] = None,
        kwargs: Optional[dict[str, Any]] = None,
    ) -> None:
        super()._execute_handler(msg_id, handler, callback, args=args, kwargs=kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            # Requests are removed when answered; notifications and the steps of built-in
            # handlers (keyed by a fresh uuid) were never removed.
            future.add_done_callback(lambda done: self._forget(msg_id, done))

    def _forget(self, msg_id: Any, future: Any) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Any:
        """pygls' shutdown, but cancelling the pending requests over a copy of the table: a
        cancelled future runs its callbacks at once, and ``_forget`` removes entries."""
        user_handler = self.fm.features.get(types.SHUTDOWN)
        if user_handler is not None:
            yield user_handler, args, None
        current_id = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current_id and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        if msg_id not in self._request_futures:
            # Finished already, or never asked: nothing to do (and nothing to flood stderr with).
            logger.debug("$/cancelRequest for unknown or finished request %r", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    # -- didChange: never for unopened documents, never back in time ---------------------------------
    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Any:
        uri = params.text_document.uri
        try:
            document = self.workspace.text_documents.get(unquote(uri))
        except RuntimeError:  # before initialize: there is no workspace yet
            document = None
        if document is None:
            logger.info("didChange for %s, which is not open: ignored", uri)
            return
        if document.version is not None and params.text_document.version < document.version:
            logger.info(
                "didChange for %s at version %s, older than %s: ignored",
                uri,
                params.text_document.version,
                document.version,
            )
            return
        yield from super().lsp_text_document__did_change(params)

    # -- unreadable messages -----------------------------------------------------------------------
    def report_unreadable(self, error: BaseException) -> None:
        """The reader loop could not read or structure a message: answer if JSON-RPC wants an answer."""
        if isinstance(error, (json.JSONDecodeError, UnicodeDecodeError, RecursionError)):
            self.send_error(None, PARSE_ERROR, f"Parse error: {error}")
            self._tell(f"a message that is not valid JSON was ignored ({error})")
        else:
            # A notification whose params do not match the spec (requests got their answer in
            # structure_message): nothing to answer, and nothing the user can act on but the log.
            self._tell(f"a message that could not be read was ignored ({error})")

    def _tell(self, text: str) -> None:
        try:
            self._server.window_log_message(
                types.LogMessageParams(type=types.MessageType.Warning, message=f"fabric-ls: {text}")
            )
        except Exception:  # the log is best effort; never fail while reporting a failure
            logger.debug("could not log %r", text, exc_info=True)


def report_server_error(server: Any, error: BaseException, source: Any, default: Callable[..., None]) -> None:
    """``LanguageServer.report_server_error`` for fabric-ls.

    Errors raised while *reading* a message (pygls passes ``JsonRpcException`` as the source)
    come from the client: they get the JSON-RPC answer and a log line, not an error pop-up.
    Everything else (a handler that failed) keeps pygls' default.
    """
    protocol = getattr(server, "protocol", None)
    if source is JsonRpcException and isinstance(protocol, HardenedProtocol):
        protocol.report_unreadable(error)
        return
    default(error, source)


class _Rejected:
    """Stands in for a request whose params did not deserialize; it has been answered with an error."""

    jsonrpc = None


class FabricProtocol(HardenedProtocol):
    """pygls' protocol with two repairs: invalid params get an error response, and capabilities
    follow what the client can use (pull diagnostics only for clients that pull)."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if isinstance(data, dict) and "method" in data and "id" in data and "jsonrpc" in data:
                # The spec wants an answer (-32602); without one the client would wait forever.
                self._send_response(data["id"], error=error.to_response_error())
                return _Rejected()
            raise

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Any:
        result = yield from super().lsp_initialize(params)
        capabilities = result.capabilities
        if not client_pulls_diagnostics(params.capabilities):
            capabilities.diagnostic_provider = None
        if client_has_inlay_hints(params.capabilities):
            capabilities.code_lens_provider = None
        return result


def capability(capabilities: Optional[types.ClientCapabilities], dotted: str, default: Any = None) -> Any:
    value: Any = capabilities
    for part in dotted.split("."):
        value = getattr(value, part, None)
        if value is None:
            return default
    return value


def client_pulls_diagnostics(capabilities: Optional[types.ClientCapabilities]) -> bool:
    return capability(capabilities, "text_document.diagnostic") is not None


def client_has_inlay_hints(capabilities: Optional[types.ClientCapabilities]) -> bool:
    return capability(capabilities, "text_document.inlay_hint") is not None
