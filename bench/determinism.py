"""Does `fabric-ls check` give the same answer however busy the machine is, and file by file?

For each group of files — the realistic scripts in ``bench/scripts/``, ``examples/``, and the
projects ``real_projects.py`` unpacked into ``bench/.cache/src/`` (only if they are there; nothing is
downloaded) — it runs ``python -m fabric_ls check --format json --exit-zero`` from the group's folder:

1. **idle**: once on the whole group (the folder run), then once per file (single-file runs);
2. **busy**: the same again while three CPU-hog processes run beside it (they stop by themselves
   after ``--hog-seconds``, and are killed when the phase ends).

It prints, per group, whether the folder run's JSON is byte-identical idle and busy, whether the
notes on stderr ("some paths were not checked", ...) are, and per file whether its findings in the
folder run equal its single-file run's, in each phase. Exit status 1 on any difference, a crash or a
run that exceeds ``--timeout``.

    python bench/determinism.py                        # scripts + examples (+ real projects if unpacked)
    python bench/determinism.py --groups realistic     # only bench/scripts
    python bench/determinism.py --sample 10            # single-file runs on 10 files per real project

A real project has hundreds of files and a new process per file costs seconds, so single-file runs
cover an evenly spaced sample of ``--sample`` files there; the folder runs cover every file.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import real_projects  # noqa: E402

HOG = (
    "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"
)
HOGS = 3


@dataclass
class Group:
    name: str
    root: str
    entries: list[str]
    files: list[str]
    single: list[str]


@dataclass
class CheckRun:
    stdout: bytes = b""
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    problem: Optional[str] = None

    def findings(self) -> list[dict]:
        return json.loads(self.stdout) if self.stdout.strip() else []


def groups(wanted: list[str], sample: int) -> list[Group]:
    found: list[Group] = []
    if "realistic" in wanted:
        root = os.path.join(HERE, "scripts")
        files = sorted(name for name in os.listdir(root) if name.endswith(".py"))
        found.append(Group("realistic", root, files, files, files))
    if "examples" in wanted:
        root = os.path.join(REPO, "examples")
        files = real_projects.python_files(root, ["."])
        found.append(Group("examples", root, ["."], files, files))
    if "real" in wanted:
        for archive in sorted(glob.glob(os.path.join(real_projects.WHEELS, "*"))):
            root = real_projects.unpack(archive)  # already unpacked when the marker is there
            entries = real_projects.code_entries(root)
            files = real_projects.python_files(root, entries)
            step = max(1, len(files) // max(1, sample))
            name = os.path.basename(archive).split("-py3")[0]
            found.append(Group(name, root, entries, files, files[::step][:sample]))
    return found


def check(root: str, targets: list[str], timeout: float) -> CheckRun:
    command = [sys.executable, "-m", "fabric_ls", "check", "--format", "json", "--exit-zero", *targets]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return CheckRun(seconds=time.perf_counter() - started, problem=f"timed out after {timeout:.0f} s")
    run = CheckRun(stdout=done.stdout, seconds=time.perf_counter() - started)
    stderr = done.stderr.decode("utf-8", errors="replace")
    run.notes = sorted(line for line in stderr.splitlines() if ": note: " in line)
    if done.returncode != 0 or "Traceback" in stderr:
        run.problem = f"exit {done.returncode}: {stderr.strip().splitlines()[-1] if stderr.strip() else ''}"
    else:
        try:
            run.findings()
        except json.JSONDecodeError as error:
            run.problem = f"output is not JSON ({error})"
    return run


def by_file(run: CheckRun) -> dict[str, bytes]:
    """Each file's findings, in the run's order, as canonical JSON."""
    grouped: dict[str, list[dict]] = {}
    for finding in run.findings():
        grouped.setdefault(os.path.normpath(finding["path"]), []).append(finding)
    return {path: json.dumps(items, sort_keys=True).encode() for path, items in grouped.items()}


@dataclass
class Phase:
    folder: dict[str, CheckRun] = field(default_factory=dict)
    single: dict[str, dict[str, CheckRun]] = field(default_factory=dict)
    seconds: float = 0.0


def run_phase(label: str, selected: list[Group], timeout: float) -> Phase:
    phase = Phase()
    started = time.perf_counter()
    for group in selected:
        print(f"  {label}: {group.name}: folder run on {len(group.files)} files ...", flush=True)
        phase.folder[group.name] = check(group.root, group.entries, timeout)
        phase.single[group.name] = {}
        for path in group.single:
            phase.single[group.name][os.path.normpath(path)] = check(group.root, [path], timeout)
        singles = phase.single[group.name].values()
        print(
            f"  {label}: {group.name}: folder {phase.folder[group.name].seconds:.1f} s, "
            f"{len(group.single)} single-file runs {sum(r.seconds for r in singles):.1f} s",
            flush=True,
        )
    phase.seconds = time.perf_counter() - started
    return phase


def start_hogs(seconds: float) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", HOG, f"{seconds:.0f}"]) for _ in range(HOGS)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        if hog.poll() is None:
            hog.kill()
        hog.wait()


def compare(selected: list[Group], idle: Phase, busy: Phase) -> list[str]:
    """Print the comparison; return the differences (empty: deterministic)."""
    differences: list[str] = []
    for group in selected:
        print(f"\n{group.name} ({group.root})")
        for label, phase in (("idle", idle), ("busy", busy)):
            run = phase.folder[group.name]
            if run.problem:
                differences.append(f"{group.name}: {label} folder run: {run.problem}")
                print(f"  {label} folder run FAILED: {run.problem}")
        first, second = idle.folder[group.name], busy.folder[group.name]
        if first.problem or second.problem:
            continue
        same_output = first.stdout == second.stdout
        same_notes = first.notes == second.notes
        print(
            f"  folder run: {len(first.findings())} findings, {len(first.notes)} notes; "
            f"idle {first.seconds:.1f} s, busy {second.seconds:.1f} s"
        )
        print(f"  idle vs busy JSON byte-identical: {'yes' if same_output else 'NO'}")
        print(f"  idle vs busy stderr notes identical: {'yes' if same_notes else 'NO'}")
        if not same_output:
            differences.append(f"{group.name}: folder run JSON differs idle vs busy")
            idle_files, busy_files = by_file(first), by_file(second)
            for path in sorted(set(idle_files) | set(busy_files)):
                if idle_files.get(path) != busy_files.get(path):
                    print(f"    differs: {path}")
        if not same_notes:
            differences.append(f"{group.name}: stderr notes differ idle vs busy")
            for note in sorted(set(first.notes) ^ set(second.notes)):
                print(f"    {'idle only' if note in first.notes else 'busy only'}: {note}")
        for label, phase in (("idle", idle), ("busy", busy)):
            folder_files = by_file(phase.folder[group.name])
            mismatched, failed = [], []
            for path, single in sorted(phase.single[group.name].items()):
                if single.problem:
                    failed.append(f"{path}: {single.problem}")
                    continue
                alone = by_file(single).get(path, b"[]")
                if folder_files.get(path, b"[]") != alone:
                    mismatched.append(path)
            total = len(phase.single[group.name])
            agree = total - len(mismatched) - len(failed)
            print(f"  {label}: single-file vs folder, same findings: {agree}/{total} files")
            for path in mismatched:
                differences.append(f"{group.name}: {label}: {path}: single-file run differs from folder run")
                print(f"    differs: {path}")
            for failure in failed:
                differences.append(f"{group.name}: {label}: single-file run failed: {failure}")
                print(f"    FAILED: {failure}")
        for path in sorted(idle.single[group.name]):
            first_single, second_single = idle.single[group.name][path], busy.single[group.name][path]
            if first_single.problem or second_single.problem:
                continue
            if first_single.stdout != second_single.stdout:
                differences.append(f"{group.name}: {path}: single-file JSON differs idle vs busy")
                print(f"    single-file run differs idle vs busy: {path}")
    return differences


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--groups",
        nargs="*",
        default=["realistic", "examples", "real"],
        choices=["realistic", "examples", "real"],
    )
    parser.add_argument("--sample", type=int, default=15, help="single-file runs per real project")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed for one check run")
    parser.add_argument(
        "--hog-seconds", type=float, default=None, help="how long the hogs run (default: 3 × the idle phase)"
    )
    arguments = parser.parse_args(argv)

    where = subprocess.run(
        [sys.executable, "-c", "import fabric_ls; print(fabric_ls.__file__)"],
        cwd=HERE,
        capture_output=True,
        text=True,
    )
    print(f"fabric_ls from {os.path.dirname(where.stdout.strip()) or where.stderr.strip()}")
    selected = groups(arguments.groups, arguments.sample)
    if (
        not any(group.name not in ("realistic", "examples") for group in selected)
        and "real" in arguments.groups
    ):
        print("note: no real projects in bench/.cache (run bench/real_projects.py once to get them)")
    started = time.perf_counter()
    print(f"idle phase ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})", flush=True)
    idle = run_phase("idle", selected, arguments.timeout)
    seconds = arguments.hog_seconds or min(3 * idle.seconds + 30, 1800)
    print(f"busy phase: {HOGS} CPU hogs for at most {seconds:.0f} s", flush=True)
    hogs = start_hogs(seconds)
    try:
        time.sleep(1.0)  # let the hogs take the CPUs first
        busy = run_phase("busy", selected, arguments.timeout)
        hogs_alive = sum(hog.poll() is None for hog in hogs)
    finally:
        stop_hogs(hogs)
    print(
        f"busy phase took {busy.seconds:.0f} s (idle {idle.seconds:.0f} s); "
        f"hogs still running at its end: {hogs_alive}"
    )
    if hogs_alive < HOGS:
        print("note: some hogs stopped before the busy phase ended; pass a larger --hog-seconds")

    differences = compare(selected, idle, busy)
    print(f"\n{len(differences)} difference(s) in {time.perf_counter() - started:.0f} s")
    for difference in differences:
        print(f"  {difference}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
