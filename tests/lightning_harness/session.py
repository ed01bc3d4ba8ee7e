"""Per-script facts about the process a script runs in: an interactive session, a forked child.

Both are the machine, not Lightning: ``_IS_INTERACTIVE`` is what Lightning reads from the
interpreter (``hasattr(sys, "ps1") or sys.flags.interactive``, utilities/imports.py:30) and copies
into each module that imports it; torch's bad-fork flag is what a process forked from a parent
that had initialised CUDA carries. A spawned child's first act is also here: it imports the main
script again as ``__mp_main__`` (multiprocessing's spawn ``prepare()``).
"""

from __future__ import annotations

import importlib
import multiprocessing
import runpy
import sys

# Every module that holds its own copy of the flag (`from ...imports import _IS_INTERACTIVE`).
_INTERACTIVE_MODULES = ("utilities.imports", "connector", "strategies.launchers.multiprocessing")


def set_session(packages: tuple[str, ...], interactive: bool, cuda_bad_fork: bool) -> None:
    """Make the next script run in an interactive session and/or in a bad fork of a CUDA parent."""
    import torch

    for package in packages:
        for name in _INTERACTIVE_MODULES:
            importlib.import_module(f"{package}.{name}")._IS_INTERACTIVE = interactive
    real = _REAL_BAD_FORK.setdefault("torch", torch.cuda._is_in_bad_fork)
    torch.cuda._is_in_bad_fork = (lambda: True) if cuda_bad_fork else real


_REAL_BAD_FORK: dict[str, object] = {}


def import_main_as_spawned_child() -> None:
    """What a spawned child does before it runs the launched function: import the main script under
    the name ``__mp_main__`` while ``current_process()._inheriting`` is set (multiprocessing/spawn.py
    ``prepare`` -> ``_fixup_main_from_path``). An error there is the child's, re-raised by the launch."""
    process = multiprocessing.current_process()
    main_path = getattr(sys.modules.get("__main__"), "__file__", None)
    if getattr(process, "_inheriting", False) or not main_path:
        return
    process._inheriting = True  # type: ignore[attr-defined]
    try:
        runpy.run_path(main_path, run_name="__mp_main__")
    finally:
        process._inheriting = False  # type: ignore[attr-defined]
