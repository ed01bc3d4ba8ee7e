"""The long fuzz run: mutate seed scripts many times and check every invariant of the engine.

    python bench/fuzz.py                      # 10,000 mutated scripts
    python bench/fuzz.py --count 50000 --seconds 600 --seed 7

Seeds are those of ``tests/fuzz_support.py``, plus real Fabric scripts kept out of git in
``bench/.cache/corpus/`` and the folders of ``--corpus`` / ``FABRIC_LS_FUZZ_CORPUS``. Each script gets
one to three random mutations (deleted, duplicated, swapped lines, truncation, random bytes,
fragments of code, indentation changes) and ``fuzz_support.examine`` checks it: no exception, at most
2 s, spans inside the document, fixes that parse, do not overlap and do not hand the finding back.

Every problem is saved as a reproducer: the mutated script (``<id>.py``) and what happened
(``<id>.json``: seed, mutations, problem); crashes under ``bench/.cache/fuzz-crashes/``, the rest under
``bench/.cache/fuzz-problems/``. Exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import fuzz_support as fs  # noqa: E402

CACHE = ROOT / "bench" / ".cache"
CRASHES = CACHE / "fuzz-crashes"
PROBLEMS = CACHE / "fuzz-problems"
# A script still being analysed after this long is a hang, not a slow file: stop it and move on.
HANG_S = 30


class Hang(BaseException):
    """Raised by the alarm inside a hung analysis (a BaseException, so the engine cannot swallow it)."""


def _on_alarm(signum: int, frame: object) -> None:
    raise Hang()


def _signature(problem: fs.Problem) -> str:
    """What makes two problems the same: the kind and the last line of a traceback, or the message head."""
    lines = [line for line in problem.detail.strip().splitlines() if line.strip()]
    if problem.kind == "crash":
        where = [line.strip() for line in lines if line.strip().startswith("File ")]
        return f"crash: {lines[-1] if lines else '?'} @ {where[-1] if where else '?'}"
    head = lines[0] if lines else ""
    for marker in (" in Span(", ":\n"):
        head = head.split(marker)[0]
    return f"{problem.kind}: {head[:160]}"


def _save(folder: Path, seed: fs.Seed, mutations: list, source: str, problems: list[fs.Problem]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(source.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
    script = folder / f"{digest}.py"
    script.write_bytes(source.encode("utf-8", errors="surrogatepass"))
    record = {
        "seed": seed.name,
        "analysed_as": seed.path,
        "mutations": [
            {**asdict(m), "data": m.data.hex()} if hasattr(m, "data") else str(m) for m in mutations
        ],
        "problems": [asdict(p) for p in problems],
        "reproduce": (
            "from fabric_ls.engine import analyze_source; "
            f"analyze_source(open({str(script)!r}, encoding='utf-8', errors='surrogatepass', newline='')"
            ".read(), "
            f"{seed.path!r})"
        ),
    }
    (folder / f"{digest}.json").write_text(json.dumps(record, indent=2))
    return script


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000, help="mutated scripts to try (default 10000)")
    parser.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--seed", type=int, default=0, help="random seed (the run is reproducible)")
    parser.add_argument("--corpus", action="append", default=[], help="more folders of real Fabric scripts")
    parser.add_argument("--time-limit", type=float, default=fs.TIME_LIMIT, help="seconds per analysis")
    parser.add_argument("--no-fixes", action="store_true", help="skip the fix checks (faster)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    arguments = parser.parse_args(argv)

    if arguments.corpus:
        os.environ["FABRIC_LS_FUZZ_CORPUS"] = os.pathsep.join(
            [*arguments.corpus, *filter(None, os.environ.get("FABRIC_LS_FUZZ_CORPUS", "").split(os.pathsep))]
        )
    committed = fs.seeds()
    outside = fs.extra_seeds()
    total = len(committed) + len(outside)
    print(f"{total} seed scripts ({len(outside)} from outside git); seed {arguments.seed}")
    rng = random.Random(arguments.seed)
    signal.signal(signal.SIGALRM, _on_alarm)

    began = time.perf_counter()
    tried = analysed_seconds = fixes = 0
    counts: Counter[str] = Counter()
    signatures: Counter[str] = Counter()
    examples: dict[str, Path] = {}
    slowest = (0.0, "")
    for tried in range(1, arguments.count + 1):
        if arguments.seconds is not None and time.perf_counter() - began > arguments.seconds:
            tried -= 1
            break
        # Two thirds from the committed seeds, whose small scripts get most of the fixes.
        seed = rng.choice(outside if outside and rng.random() < 1 / 3 else committed)
        mutations = fs.random_mutations(rng)
        source = fs.apply_all(seed.source, mutations)
        signal.alarm(HANG_S)
        try:
            report = fs.examine(
                source, seed.path, time_limit=arguments.time_limit, check_fixes=not arguments.no_fixes
            )
        except Hang:
            report = fs.Report(None, HANG_S, [fs.Problem("hang", f"still analysing after {HANG_S} s")])
        finally:
            signal.alarm(0)
        analysed_seconds += report.seconds
        if report.seconds > slowest[0]:
            slowest = (report.seconds, seed.name)
        if report.analysis is not None:
            fixes += sum(f.fix is not None for f in report.analysis.findings)
        if report.problems:
            kinds = {p.kind for p in report.problems}
            for kind in kinds:
                counts[kind] += 1
            folder = CRASHES if kinds & {"crash", "hang"} else PROBLEMS
            saved = _save(folder, seed, mutations, source, report.problems)
            for problem in report.problems:
                signature = _signature(problem)
                signatures[signature] += 1
                examples.setdefault(signature, saved)
        if not arguments.quiet and tried % 1000 == 0:
            elapsed = time.perf_counter() - began
            print(f"  {tried} scripts, {elapsed:.0f} s, {sum(counts.values())} with problems", flush=True)

    elapsed = time.perf_counter() - began
    print()
    print(f"scripts tried:     {tried}")
    print(f"fixes checked:     {fixes}")
    print(f"crashes:           {counts['crash']}")
    print(f"hangs (> {HANG_S} s):    {counts['hang']}")
    print(f"timeouts (> {arguments.time_limit:g} s): {counts['timeout']}")
    print(f"fix problems:      {counts['fix']}")
    print(f"span problems:     {counts['span']}")
    print(f"elapsed:           {elapsed:.1f} s")
    print(f"throughput:        {tried / elapsed:.1f} scripts/s (analysis alone {analysed_seconds:.1f} s)")
    print(f"slowest analysis:  {slowest[0]:.2f} s ({slowest[1]})")
    if signatures:
        print("\ndistinct problems (count, first reproducer):")
        for signature, count in signatures.most_common():
            print(f"  {count:6d}  {signature}\n          {examples[signature]}")
    return 1 if counts else 0


if __name__ == "__main__":
    sys.exit(main())
