"""Differential-test harness: run small Fabric scripts with the REAL ``lightning`` on a faked machine.

Usage::

    from lightning_harness import run_with_lightning, run_many, Script

    outcome = run_with_lightning(source, profile="gpu8")
    assert outcome.error_class == "RuntimeError" and outcome.line == 6 and outcome.raised_by_lightning

    outcomes = run_many([source_a, Script(source_b, env={"LT_CLI_USED": "1"})], profile="tpu8")

Only the environment is faked (GPUs/TPU cores, ``deepspeed``/``torch_xla`` stubs, launcher child processes, an
in-memory process group, torch's FSDP wrapper, environment variables); Lightning's checks run unmodified.
See README.md in this directory for what is faked, why, and the known limits.

Import it as ``lightning_harness`` when ``tests/`` is on ``sys.path`` (pytest's default import mode does
that for test files in ``tests/`` while ``tests/`` has no ``__init__.py``), otherwise as
``tests.lightning_harness``.
"""

from __future__ import annotations

from .runner import PROFILES, Outcome, Script, run_many, run_with_lightning

__all__ = ["PROFILES", "Outcome", "Script", "run_many", "run_with_lightning"]
