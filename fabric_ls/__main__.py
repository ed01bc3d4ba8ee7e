import os
import sys


def _without_the_working_directory() -> None:
    """``python -m fabric_ls`` puts the working directory first on ``sys.path``: a project's own
    ``logging.py`` or ``random.py`` would then shadow the standard library's, and run inside the
    checker (and the language server, which editors start in the workspace). Only fabric-ls's own
    checkout may stay there. Nothing but ``os`` and ``sys`` is imported before this."""
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    working = os.getcwd()
    sys.path[:] = [
        entry for entry in sys.path if os.path.abspath(entry or os.curdir) != working or working == checkout
    ]


_without_the_working_directory()

from fabric_ls.cli import main  # noqa: E402

raise SystemExit(main())
