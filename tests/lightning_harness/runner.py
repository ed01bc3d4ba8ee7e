"""Run user-style Fabric scripts under the real ``lightning`` package on a faked machine (parent side).

Each call starts a fresh worker process (``sys.executable _worker.py``) that installs the fakes of
:mod:`fakes`, imports Lightning once, and runs the scripts one after another as ``__main__``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence, Union

_WORKER = Path(__file__).resolve().parent / "_worker.py"
# Interpreter start-up plus importing torch and lightning (~3 s here), with room for a slow CI machine.
_STARTUP_ALLOWANCE = 60.0
_TAIL_CHARS = 4000

PROFILES = ("gpu8", "gpu1", "cpu", "tpu8")
"""The documented machine profiles. ``"gpu<N>"`` and ``"tpu<N>"`` work for any N >= 1."""


@dataclass(frozen=True)
class Script:
    """A script for :func:`run_many` with its own settings.

    Attributes:
        source: The script's Python source.
        env: Extra environment variables for this script only (applied on top of the batch's ``env``).
        timeout: Seconds this script may run; ``None`` uses the batch's ``timeout``.
        interactive: Run it in an interactive session (a notebook kernel): Lightning's ``_IS_INTERACTIVE``.
        argv: The command-line arguments after the script's name (``("train",)``: ``python train.py train``).
        cuda_bad_fork: Run it in a process forked from a parent that had initialised CUDA (torch's
            ``torch.cuda._is_in_bad_fork()`` is true), as each child of a fork launch is then.
        files: Files written beside the script first, by path relative to its folder
            (``{"conf/config.yaml": "..."}``: a Hydra configuration).
    """

    source: str
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    interactive: bool = False
    cuda_bad_fork: bool = False
    argv: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """How a script ended under the real Lightning.

    Attributes:
        error_class: Name of the exception class that ended the script (``"RuntimeError"``), or ``None``
            if the script ran to the end (``sys.exit(0)`` counts as clean). ``"ScriptTimeout"`` if it ran
            too long, ``"WorkerDied"`` if the worker process died while running it, ``"HarnessError"`` if
            the worker could not start (the message and ``stderr_tail`` say why).
        message: ``str(exception)``, or ``None``.
        line: 1-based line in the user script where the exception propagated from: the innermost traceback
            frame that belongs to the script file (for a ``SyntaxError``, its line). ``None`` if no frame of
            the script is in the traceback.
        raised_by_lightning: The innermost traceback frame is in ``lightning/`` or ``lightning_fabric/``,
            i.e. Fabric's own ``raise`` (rather than a bug in the script or an error inside torch).
        stderr_tail: The last characters of what the script wrote to stderr, including the traceback and the
            warnings it emitted.
        raise_site: The innermost frame as ``"lightning/fabric/fabric.py:1226"`` (paths inside Lightning are
            relative to site-packages; the script itself is shown by its file name), or ``None``.
        lightning_site: The innermost frame inside Lightning, as ``raise_site`` shows it, whatever it called
            (``fabric.py:505`` for an AttributeError torch raises there), or ``None``.
        stdout_tail: The last characters of what the script wrote to stdout.
        warnings: Every warning emitted while the script ran, as ``"Category: message"``.
        timed_out: The script was stopped after ``timeout`` seconds.
        duration: Seconds the script itself ran (excluding the worker's start-up).
    """

    error_class: str | None
    message: str | None
    line: int | None
    raised_by_lightning: bool
    stderr_tail: str
    raise_site: str | None = None
    lightning_site: str | None = None
    stdout_tail: str = ""
    warnings: tuple[str, ...] = ()
    timed_out: bool = False
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        """The script ran to the end without an exception."""
        return self.error_class is None


ScriptLike = Union[str, Script]


def run_with_lightning(
    source: str, *, profile: str = "gpu8", env: dict[str, str] | None = None, timeout: float = 60
) -> Outcome:
    """Run one script with the real ``lightning`` on the faked machine ``profile`` and report how it ended.

    The script is written to a temporary directory and run as ``__main__`` (like ``python train.py``, with
    that directory as working directory) in a fresh subprocess, after the fakes are installed.

    Args:
        source: Python source of a user-style script; it may import ``lightning``, ``lightning.fabric`` or
            ``lightning_fabric``. Use small models (``nn.Linear``).
        profile: ``"gpu8"`` (8 fake CUDA GPUs), ``"gpu1"``, ``"cpu"`` (the real CPU-only machine, with the
            deepspeed stub installed) or ``"tpu8"`` (8 fake TPU cores, stub ``torch_xla``). Any
            ``"gpu<N>"`` or ``"tpu<N>"`` works.
        env: Environment variables to set after the cluster variables are cleared, e.g.
            ``{"LT_CLI_USED": "1", "LT_STRATEGY": "deepspeed"}`` to simulate ``fabric run``.
        timeout: Seconds the script may run (start-up time is not counted).

    Costs one interpreter start-up and Lightning import (~3 s); prefer :func:`run_many` for several scripts.
    """
    return run_many([source], profile=profile, env=env, timeout=timeout)[0]


def run_many(
    scripts: Sequence[ScriptLike],
    *,
    profile: str = "gpu8",
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> list[Outcome]:
    """Run several scripts one after another in ONE worker process; return their outcomes in order.

    Lightning is imported once. Between scripts the worker destroys the process group and restores the
    environment variables, warning filters, default dtype, thread count and rank-zero state, so each script
    starts like a fresh ``python train.py``. Scripts that patch other global state (monkeypatching torch, say)
    should be run with :func:`run_with_lightning` instead.

    Args:
        scripts: Sources (``str``) or :class:`Script` objects (per-script environment and timeout).
        profile, env, timeout: As in :func:`run_with_lightning`; ``env`` applies to every script and is set
            before Lightning is imported, ``timeout`` is per script.

    If the worker dies or hangs, the script it was running gets ``error_class="WorkerDied"`` or
    ``"ScriptTimeout"`` and the remaining scripts are run in a new worker.
    """
    from .fakes import parse_profile

    parse_profile(profile)  # fail fast, in the caller's process, on a bad profile name
    cases = [item if isinstance(item, Script) else Script(item) for item in scripts]
    if not cases:
        return []
    workdir = Path(tempfile.mkdtemp(prefix="lightning-harness-"))
    try:
        return _run_in_workers(cases, profile=profile, env=dict(env or {}), timeout=timeout, workdir=workdir)
    finally:
        if not os.environ.get("LIGHTNING_HARNESS_KEEP"):
            shutil.rmtree(workdir, ignore_errors=True)


def _run_in_workers(
    cases: list[Script], *, profile: str, env: dict[str, str], timeout: float, workdir: Path
) -> list[Outcome]:
    outcomes: list[Outcome] = []
    attempt = 0
    while len(outcomes) < len(cases):
        attempt += 1
        pending = cases[len(outcomes) :]
        job_dir = workdir / f"worker_{attempt:02d}"
        job_dir.mkdir()
        job_cases = []
        for index, case in enumerate(pending):
            case_dir = job_dir / f"case_{len(outcomes) + index:03d}"
            case_dir.mkdir()
            script_path = case_dir / "train.py"
            script_path.write_text(case.source, encoding="utf-8")
            for relative, text in case.files.items():
                (case_dir / relative).parent.mkdir(parents=True, exist_ok=True)
                (case_dir / relative).write_text(text, encoding="utf-8")
            case_timeout = timeout if case.timeout is None else case.timeout
            job_cases.append(
                {
                    "path": str(script_path),
                    "env": case.env,
                    "timeout": case_timeout,
                    "interactive": case.interactive,
                    "cuda_bad_fork": case.cuda_bad_fork,
                    "argv": list(case.argv),
                }
            )
        results_path = job_dir / "results.jsonl"
        job_path = job_dir / "job.json"
        job = {"profile": profile, "env": env, "results": str(results_path), "cases": job_cases}
        job_path.write_text(json.dumps(job), encoding="utf-8")

        worker_limit = _STARTUP_ALLOWANCE + sum(case["timeout"] + 5.0 for case in job_cases)
        timed_out = False
        try:
            completed = subprocess.run(
                [sys.executable, str(_WORKER), str(job_path)],
                cwd=str(job_dir),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=worker_limit,
                check=False,
            )
            returncode: int | None = completed.returncode
            worker_output = (completed.stdout + completed.stderr).decode("utf-8", "replace")
        except subprocess.TimeoutExpired as error:
            timed_out, returncode = True, None
            worker_output = ((error.stdout or b"") + (error.stderr or b"")).decode("utf-8", "replace")

        finished = _read_results(results_path)
        outcomes.extend(finished)
        if len(finished) == len(pending):
            break
        started = Path(job_cases[len(finished)]["path"] + ".stderr").exists()
        stderr_tail = (
            _tail_of(Path(job_cases[len(finished)]["path"] + ".stderr")) + worker_output[-_TAIL_CHARS:]
        )
        if not started and not finished and not timed_out:
            # The worker failed before running any script (bootstrap error): retrying would fail the same way.
            message = f"harness worker failed to start (exit code {returncode})"
            outcomes.extend(
                Outcome("HarnessError", message, None, False, stderr_tail) for _ in pending[len(finished) :]
            )
            break
        if timed_out:
            message = f"worker killed after {worker_limit:.0f} s"
            outcomes.append(Outcome("ScriptTimeout", message, None, False, stderr_tail, timed_out=True))
        elif returncode == 0:
            # The script ended the process on purpose (os._exit(0)): that is a clean end.
            outcomes.append(Outcome(None, None, None, False, stderr_tail))
        else:
            message = f"worker exited with code {returncode} while running this script"
            outcomes.append(Outcome("WorkerDied", message, None, False, stderr_tail))
    return outcomes


def _tail_of(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-_TAIL_CHARS:]
    except OSError:
        return ""


def _read_results(path: Path) -> list[Outcome]:
    if not path.exists():
        return []
    outcomes = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        record = json.loads(raw)
        record["warnings"] = tuple(record.get("warnings", ()))
        outcomes.append(Outcome(**record))
    return outcomes
