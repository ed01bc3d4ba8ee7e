"""Start the language server over stdio (or TCP)."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
import threading
from typing import Any, Optional

from pygls.io_ import StdoutWriter, run_async

from fabric_ls.lsp.handlers import create_server
from fabric_ls.lsp.server import FabricLanguageServer

logger = logging.getLogger("fabric_ls.serve")


def _configure_logging() -> None:
    level = os.environ.get("FABRIC_LS_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level, logging.WARNING),
        format="%(name)s %(levelname)s %(message)s",
    )


async def _serve_pipe(server: FabricLanguageServer, stdin: Any, stdout: Any) -> None:
    """Read the client's messages from a pipe on the event loop itself.

    pygls' ``start_io`` reads stdin through a thread pool, three round trips per message;
    reading the pipe with asyncio saves those thread switches on every keystroke.
    """
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    server.protocol.set_writer(StdoutWriter(stdout))
    stop_event = threading.Event()
    server._stop_event = stop_event
    try:
        await run_async(
            stop_event=stop_event,
            reader=reader,
            protocol=server.protocol,
            logger=logger,
            error_handler=server.report_server_error,
        )
    except asyncio.IncompleteReadError:
        pass  # the client closed the pipe mid-message


def _is_pipe(stream: Any) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode) or stat.S_ISSOCK(
            os.fstat(stream.fileno()).st_mode
        )
    except (OSError, ValueError, AttributeError):
        return False


def start(stdio: Any = True, host: Optional[str] = None, port: Optional[int] = None) -> None:
    """Run the server over stdio (default) or TCP.

    Also accepts an argparse namespace with ``tcp``/``host``/``port`` attributes as its first argument.
    """
    if not isinstance(stdio, bool) and stdio is not None:
        namespace = stdio
        host = getattr(namespace, "host", None) or host
        port = getattr(namespace, "port", None) or port
        stdio = not getattr(namespace, "tcp", False)
    _configure_logging()
    server = create_server()
    if not stdio and (host is not None or port is not None):
        server.start_tcp(host or "127.0.0.1", port or 2087)
        return
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Anything printed by analysed code or libraries must not corrupt the protocol stream.
    sys.stdout = sys.stderr
    if not _is_pipe(stdin):
        server.start_io(stdin, stdout)
        return
    try:
        asyncio.run(_serve_pipe(server, stdin, stdout))
    except (BrokenPipeError, KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
