"""Harness worker: ``python _worker.py JOB.json``. Installs the fakes once, then runs each script as
``__main__``.

The job file (written by ``runner.py``) holds the profile, the shared environment, the result file and the
scripts (path, per-script environment, timeout). One JSON line per finished script is appended to the result
file, so the parent keeps the results of the scripts that finished if this process dies.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback
import warnings
from typing import Any

_HARNESS_DIR = os.path.dirname(os.path.abspath(__file__))
_TAIL_CHARS = 4000


class ScriptTimeout(BaseException):
    """Raised by SIGALRM in the running script; a BaseException, so ``except Exception`` cannot swallow it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise ScriptTimeout()


def _tail(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-_TAIL_CHARS:]
    except OSError:
        return ""


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def _describe(exc: BaseException | None, script_path: str, lightning_dirs: list[str]) -> dict[str, Any]:
    """Class, message, script line, whether Lightning raised it, and the innermost frame of the traceback."""
    if exc is None:
        return {
            "error_class": None,
            "message": None,
            "line": None,
            "raised_by_lightning": False,
            "raise_site": None,
            "lightning_site": None,
        }
    frames = traceback.extract_tb(exc.__traceback__)
    script_lines = [frame.lineno for frame in frames if _same_file(frame.filename, script_path)]
    line = script_lines[-1] if script_lines else None
    if (
        line is None
        and isinstance(exc, SyntaxError)
        and exc.filename
        and _same_file(exc.filename, script_path)
    ):
        line = exc.lineno
    innermost = frames[-1] if frames else None
    raised_by_lightning = False
    raise_site = None
    if innermost is not None:
        real = os.path.realpath(innermost.filename)
        for package_dir in lightning_dirs:
            if real.startswith(package_dir + os.sep):
                raised_by_lightning = True
                real = os.path.relpath(real, os.path.dirname(package_dir))
                break
        else:
            if _same_file(real, script_path):
                real = os.path.basename(script_path)
        raise_site = f"{real}:{innermost.lineno}"
    lightning_site = None
    for frame in frames:  # the innermost frame inside Lightning, whatever it called
        real = os.path.realpath(frame.filename)
        for package_dir in lightning_dirs:
            if real.startswith(package_dir + os.sep):
                lightning_site = f"{os.path.relpath(real, os.path.dirname(package_dir))}:{frame.lineno}"
    return {
        "error_class": type(exc).__name__,
        "message": str(exc),
        "line": line,
        "raised_by_lightning": raised_by_lightning,
        "raise_site": raise_site,
        "lightning_site": lightning_site,
    }


def _run_one(case: dict[str, Any], lightning_dirs: list[str], snapshot: Any) -> dict[str, Any]:
    from lightning_harness import fakes, session

    session.set_session(fakes.PACKAGES, case.get("interactive", False), case.get("cuda_bad_fork", False))
    try:
        return _run_script(case, lightning_dirs, snapshot)
    finally:
        session.set_session(fakes.PACKAGES, False, False)


def _run_script(case: dict[str, Any], lightning_dirs: list[str], snapshot: Any) -> dict[str, Any]:
    script_path = case["path"]
    script_dir = os.path.dirname(script_path)
    out_path, err_path = script_path + ".stdout", script_path + ".stderr"
    os.environ.update(case["env"])

    sys.stdout.flush()
    sys.stderr.flush()
    saved_fds = os.dup(1), os.dup(2)
    with open(out_path, "wb") as out_file, open(err_path, "wb") as err_file:
        os.dup2(out_file.fileno(), 1)
        os.dup2(err_file.fileno(), 2)
    saved_argv, saved_path, saved_cwd = sys.argv[:], sys.path[:], os.getcwd()
    # As `python train.py` would: the script's directory first on sys.path, and it is the working directory.
    sys.argv = [script_path, *case.get("argv", [])]
    sys.path.insert(0, script_dir)
    os.chdir(script_dir)

    exc: BaseException | None = None
    timed_out = False
    caught: list[warnings.WarningMessage] = []
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, float(case["timeout"]))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            runpy.run_path(script_path, run_name="__main__")
    except ScriptTimeout as error:
        timed_out, exc = True, error
    except SystemExit as error:
        if error.code not in (None, 0):
            exc = error
    except BaseException as error:  # noqa: B036 - the script's own failure is the result
        exc = error
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    duration = time.perf_counter() - start

    for warning in caught:
        sys.stderr.write(
            warnings.formatwarning(warning.message, warning.category, warning.filename, warning.lineno)
        )
    if exc is not None:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved_fds[0], 1)
    os.dup2(saved_fds[1], 2)
    for fd in saved_fds:
        os.close(fd)
    sys.argv, sys.path[:] = saved_argv, saved_path
    os.chdir(saved_cwd)

    result = _describe(exc, script_path, lightning_dirs)
    if timed_out:
        result.update(error_class="ScriptTimeout", message=f"script ran longer than {case['timeout']} s")
        result["raised_by_lightning"] = False
    del exc
    snapshot.restore()
    result.update(
        stderr_tail=_tail(err_path),
        stdout_tail=_tail(out_path),
        warnings=[f"{w.category.__name__}: {w.message}" for w in caught],
        timed_out=timed_out,
        duration=round(duration, 3),
    )
    return result


def main(job_path: str) -> int:
    with open(job_path, encoding="utf-8") as handle:
        job = json.load(handle)

    # Import the harness package from its parent directory, then hide that directory from the scripts.
    if sys.path and os.path.realpath(sys.path[0]) == os.path.realpath(_HARNESS_DIR):
        sys.path.pop(0)
    parent = os.path.dirname(_HARNESS_DIR)
    sys.path.insert(0, parent)
    from lightning_harness import fakes

    sys.path.remove(parent)

    fakes.install(fakes.parse_profile(job["profile"]), job["env"])
    signal.signal(signal.SIGALRM, _on_alarm)

    import lightning
    import lightning_fabric

    lightning_dirs = [os.path.realpath(os.path.dirname(p.__file__)) for p in (lightning, lightning_fabric)]
    snapshot = fakes.StateSnapshot()
    with open(job["results"], "a", encoding="utf-8") as results:
        for case in job["cases"]:
            result = _run_one(case, lightning_dirs, snapshot)
            results.write(json.dumps(result) + "\n")
            results.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
