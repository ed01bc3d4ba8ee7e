"""Run ``fabric-ls check`` on real projects that use Lightning Fabric, and fail on new false positives.

    python bench/real_projects.py              # download (once), unpack, check, compare, time
    python bench/real_projects.py --strategy deepspeed_stage_3   # also hunt with an assumed strategy
    python bench/real_projects.py --no-timing  # skip the per-file timing pass

The packages are pinned, so every finding has a stable path and line. The run fails (exit 1) when

* any finding has severity "error" (these projects work, so Lightning does not raise there), or
* a warning is not listed in ``bench/expected_warnings.json`` (each entry says why the warning is real), or
* ``fabric-ls check`` crashes, prints a traceback, or takes longer than the time limit.

Downloads go to ``bench/.cache/wheels`` (gitignored) with ``pip download --no-deps`` and are reused.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, ".cache")
WHEELS = os.path.join(CACHE, "wheels")
UNPACKED = os.path.join(CACHE, "src")
EXPECTED = os.path.join(HERE, "expected_warnings.json")

# (distribution name, version)
PACKAGES = [
    ("litgpt", "0.5.13"),
    ("lightning-cv", "1.2.0"),
    ("sheeprl", "0.8.4"),
    ("alphafold3-pytorch", "0.8.3"),
]

# One `fabric-ls check` run of one package may take this long before the benchmark gives up.
CHECK_TIMEOUT_S = 150
# In the timing pass, a single file that takes longer than this is reported as a hang.
FILE_TIMEOUT_S = 30


def _normal(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def _archive_for(name: str, version: str) -> Optional[str]:
    """The cached wheel or sdist of name==version, if it is there."""
    if not os.path.isdir(WHEELS):
        return None
    prefix = f"{_normal(name)}-{version}"
    for entry in sorted(os.listdir(WHEELS)):
        stem = entry.lower().replace("-", "_")
        if stem.startswith(prefix.replace("-", "_")) and entry.endswith((".whl", ".tar.gz", ".zip")):
            return os.path.join(WHEELS, entry)
    return None


def download(packages: list[tuple[str, str]]) -> dict[str, str]:
    """Archive path for each package; downloads only the missing ones."""
    missing = [(n, v) for n, v in packages if _archive_for(n, v) is None]
    if missing:
        os.makedirs(WHEELS, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   "-q", "-d", WHEELS, *[f"{n}=={v}" for n, v in missing]]
        print(f"downloading {', '.join(f'{n}=={v}' for n, v in missing)} ...", flush=True)
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            sys.exit(f"pip download failed:\n{done.stdout}")
    archives = {}
    for name, version in packages:
        archive = _archive_for(name, version)
        if archive is None:
            sys.exit(f"pip download did not produce an archive for {name}=={version} in {WHEELS}")
        archives[name] = archive
    return archives


def unpack(archive: str) -> str:
    """Unpack once into bench/.cache/src/<archive stem>; return the folder that holds the code."""
    base = os.path.basename(archive)
    for suffix in (".whl", ".tar.gz", ".zip"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    target = os.path.join(UNPACKED, base)
    marker = os.path.join(target, ".unpacked")
    if not os.path.exists(marker):
        os.makedirs(target, exist_ok=True)
        if archive.endswith(".tar.gz"):
            with tarfile.open(archive) as tar:
                tar.extractall(target, filter="data")
        else:
            with zipfile.ZipFile(archive) as zipped:
                zipped.extractall(target)
        with open(marker, "w") as handle:
            handle.write(archive + "\n")
    # An sdist has one top folder (name-version/), maybe with the code under src/.
    root = target
    entries = [e for e in os.listdir(root) if not e.startswith(".")]
    if archive.endswith((".tar.gz", ".zip")) and len(entries) == 1 and os.path.isdir(os.path.join(root, entries[0])):
        root = os.path.join(root, entries[0])
    if os.path.isdir(os.path.join(root, "src")):
        root = os.path.join(root, "src")
    return root


def code_entries(root: str) -> list[str]:
    """Top-level packages and modules of an unpacked distribution, relative to ``root``."""
    found = []
    for entry in sorted(os.listdir(root)):
        full = os.path.join(root, entry)
        if entry.startswith(".") or entry.endswith((".dist-info", ".egg-info", ".data")):
            continue
        if entry in ("tests", "test", "docs", "examples", "build", "setup.py"):
            continue
        if os.path.isdir(full) and any(f.endswith(".py") for _, _, fs in os.walk(full) for f in fs):
            found.append(entry)
        elif entry.endswith(".py"):
            found.append(entry)
    return found


def python_files(root: str, entries: list[str]) -> list[str]:
    """The files `fabric-ls check` will visit (same walk as the CLI)."""
    from fabric_ls.engine import iter_python_files

    here = os.getcwd()
    os.chdir(root)
    try:
        return list(iter_python_files(entries))
    finally:
        os.chdir(here)


def _check_command(entries: list[str], strategy: Optional[str]) -> list[str]:
    command = [sys.executable, "-m", "fabric_ls", "check", "--format", "json", "--exit-zero"]
    if strategy:
        command += ["--strategy", strategy]
    return command + entries


def _finish_check(process: subprocess.Popen, started: float) -> dict:
    """Wait for a `fabric-ls check --format json` run; findings, stderr, wall time, problem."""
    try:
        stdout, stderr = process.communicate(timeout=max(1.0, CHECK_TIMEOUT_S - (time.perf_counter() - started)))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return {"seconds": time.perf_counter() - started, "findings": [], "stderr": "",
                "problem": f"timed out after {CHECK_TIMEOUT_S}s"}
    seconds = time.perf_counter() - started
    problem = None
    findings: list[dict] = []
    if process.returncode not in (0, 1):
        problem = f"exit code {process.returncode}"
    try:
        findings = json.loads(stdout) if stdout.strip() else []
    except json.JSONDecodeError as error:
        problem = f"output is not JSON ({error})"
    if "Traceback (most recent call last)" in stderr:
        problem = (problem + "; " if problem else "") + "traceback on stderr"
    return {"seconds": seconds, "findings": findings, "stderr": stderr, "problem": problem}


_TIMING_WORKER = r"""
import json, os, signal, sys, time
root, limit, strategy, entries = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(os.pathsep)
files = sys.argv[5:]
os.chdir(root)
from fabric_ls.engine import Project, analyze_file
from fabric_ls.settings import Settings, parse_settings
settings = Settings()
if strategy:
    settings, _ = parse_settings({"strategy": strategy}, settings)
class Hang(Exception):
    pass
def alarm(*_):
    raise Hang()
signal.signal(signal.SIGALRM, alarm)
# The same roots as `fabric-ls check ENTRY...` (cli._check): each folder given on the command line.
project = Project([os.path.abspath(e if os.path.isdir(e) else os.path.dirname(e) or ".") for e in entries])
out = []
for path in files:
    started = time.perf_counter()
    status = "ok"
    signal.alarm(limit)
    try:
        analyze_file(path, settings, project)
    except Hang:
        status = "hang"
    except Exception as error:
        status = "crash: " + repr(error)[:300]
    finally:
        signal.alarm(0)
    out.append([path, (time.perf_counter() - started) * 1000.0, status])
print(json.dumps(out))
"""


def _timing_command(root: str, entries: list[str], files: list[str], strategy: Optional[str]) -> list[str]:
    return [sys.executable, "-c", _TIMING_WORKER, root, str(FILE_TIMEOUT_S), strategy or "",
            os.pathsep.join(entries), *files]


def _finish_timing(process: subprocess.Popen, started: float) -> list[tuple[str, float, str]]:
    """Per-file analysis times from the timing worker (in-process `analyze_file`, one Project, as the CLI)."""
    try:
        stdout, stderr = process.communicate(
            timeout=max(1.0, CHECK_TIMEOUT_S + FILE_TIMEOUT_S - (time.perf_counter() - started)))
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        return [("<timing pass>", float("nan"), "timed out")]
    if process.returncode != 0:
        return [("<timing pass>", float("nan"), f"crashed: {stderr.strip()[-500:]}")]
    return [tuple(row) for row in json.loads(stdout)]  # type: ignore[misc]


def load_expected() -> list[dict]:
    if not os.path.exists(EXPECTED):
        return []
    with open(EXPECTED) as handle:
        return json.load(handle)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--strategy", help="pass --strategy to fabric-ls (hunting mode: findings are shown, "
                                           "expected_warnings.json is not applied)")
    parser.add_argument("--no-timing", action="store_true", help="skip the per-file timing pass")
    parser.add_argument("--only", help="comma-separated distribution names to check")
    args = parser.parse_args(argv)

    packages = PACKAGES
    if args.only:
        wanted = {_normal(n) for n in args.only.split(",")}
        packages = [(n, v) for n, v in PACKAGES if _normal(n) in wanted]
    expected = load_expected() if not args.strategy else []
    expected_keys = {(e["package"], e["path"], int(e["line"]), e["code"]) for e in expected}
    # An entry's "when" is the condition the warning must print (the reason it is real).
    expected_when = {
        (e["package"], e["path"], int(e["line"]), e["code"]): e["when"] for e in expected if "when" in e
    }
    seen_keys: set[tuple[str, str, int, str]] = set()

    archives = download(packages)
    failures: list[str] = []
    table = []
    all_times: list[float] = []
    total_files = 0
    total_seconds = 0.0
    for name, version in packages:
        root = unpack(archives[name])
        entries = code_entries(root)
        files = python_files(root, entries)
        # The CLI run and the per-file timing pass run side by side (one core each on a 2-core machine).
        started = time.perf_counter()
        check = subprocess.Popen(_check_command(entries, args.strategy), cwd=root, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        timing = None
        if not args.no_timing:
            timing = subprocess.Popen(_timing_command(root, entries, files, args.strategy), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
        result = _finish_check(check, started)
        findings = result["findings"]
        errors = [f for f in findings if f["severity"] == "error"]
        warnings = [f for f in findings if f["severity"] != "error"]
        total_files += len(files)
        total_seconds += result["seconds"]
        print(f"\n== {name}=={version}: {len(files)} files checked ({', '.join(entries)}), "
              f"{len(errors)} errors, {len(warnings)} warnings, {result['seconds']:.1f}s")
        if result["problem"]:
            failures.append(f"{name}: fabric-ls check {result['problem']}")
            print(f"   PROBLEM: {result['problem']}")
            print("   " + result["stderr"].strip()[-2000:].replace("\n", "\n   "))
        for finding in findings:
            key = (name, finding["path"], int(finding["line"]), finding["code"])
            seen_keys.add(key)
            listed = key in expected_keys
            mark = "expected" if listed else ("NEW" if finding["severity"] != "error" else "ERROR")
            print(f"   {finding['severity']:<7} {finding['path']}:{finding['line']} {finding['code']} "
                  f"[{mark}] when: {finding['condition'] or '(always)'}")
            print(f"           {finding['message'][:400]}")
            if finding["severity"] == "error":
                failures.append(f"{name}: error {finding['code']} at {finding['path']}:{finding['line']}")
            elif not listed:
                failures.append(f"{name}: warning {finding['code']} at {finding['path']}:{finding['line']} "
                                "is not in bench/expected_warnings.json")
            elif key in expected_when and finding["condition"] != expected_when[key]:
                failures.append(f"{name}: {finding['code']} at {finding['path']}:{finding['line']} says "
                                f"when {finding['condition']!r}, expected {expected_when[key]!r}")
        notes = [line for line in result["stderr"].splitlines() if ": note: " in line or "syntax error" in line]
        if notes:
            print(f"   {len(notes)} notes on stderr, e.g. {notes[0]}")
        row = {"package": f"{name}=={version}", "files": len(files), "errors": len(errors),
               "warnings": len(warnings), "seconds": result["seconds"]}
        if timing is not None:
            timings = _finish_timing(timing, started)
            ok = [ms for _, ms, status in timings if status == "ok"]
            bad = [(p, ms, s) for p, ms, s in timings if s != "ok"]
            for path, ms, status in bad:
                failures.append(f"{name}: {path}: {status} ({ms:.0f} ms)")
                print(f"   TIMING PASS {status}: {path} ({ms:.0f} ms)")
            all_times.extend(ok)
            if ok:
                slowest = sorted(timings, key=lambda t: -t[1] if t[1] == t[1] else 0)[:3]
                row.update(median_ms=statistics.median(ok), max_ms=max(ok))
                print(f"   per file (in-process): median {statistics.median(ok):.1f} ms, "
                      f"max {max(ok):.0f} ms; slowest: "
                      + ", ".join(f"{os.path.basename(p)} {ms:.0f} ms" for p, ms, _ in slowest))
        table.append(row)

    stale = [e for e in expected if (e["package"], e["path"], int(e["line"]), e["code"]) not in seen_keys
             and any(_normal(e["package"]) == _normal(n) for n, _ in packages)]
    for entry in stale:
        print(f"\nnote: expected warning no longer reported (remove it from expected_warnings.json?): "
              f"{entry['package']} {entry['path']}:{entry['line']} {entry['code']}")

    print("\n| package | files | errors | warnings | CLI wall s | files/s | median ms/file | max ms/file |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in table:
        rate = row["files"] / row["seconds"] if row["seconds"] else float("nan")
        median = f"{row['median_ms']:.1f}" if "median_ms" in row else "-"
        maximum = f"{row['max_ms']:.0f}" if "max_ms" in row else "-"
        print(f"| {row['package']} | {row['files']} | {row['errors']} | {row['warnings']} | {row['seconds']:.1f} "
              f"| {rate:.1f} | {median} | {maximum} |")
    overall_median = f"{statistics.median(all_times):.1f}" if all_times else "-"
    print(f"| **total** | {total_files} | {sum(r['errors'] for r in table)} | {sum(r['warnings'] for r in table)} "
          f"| {total_seconds:.1f} | {total_files / total_seconds if total_seconds else float('nan'):.1f} "
          f"| {overall_median} | |")

    if args.strategy:
        print(f"\nhunting mode (--strategy {args.strategy}): findings shown above; not compared with "
              "expected_warnings.json")
        failures = [f for f in failures if "is not in bench/expected_warnings.json" not in f]
    if failures:
        print(f"\nFAILED ({len(failures)}):")
        for failure in failures:
            print(f"  - {failure}")
        return 1
    print("\nOK: no errors, no unexpected warnings, no crashes.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
