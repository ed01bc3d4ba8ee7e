"""Edits the analysis cannot see, on real code: how often the server can answer one with the last result,
how long that takes, and that the answer is always what analysing the new text gives.

For each file (the bundled scripts and examples, and the real projects ``real_projects.py`` unpacked into
``bench/.cache/src``), a person's edits are replayed on one kept ``Project`` (as the server keeps one): a
new line typed key by key after a simple statement of a function body (a line nothing reads, or one the
engine runs), a comment or a blank line added. Each version is analysed with the kept project and with a
fresh one (jedi without a time limit, as the CLI, so that both read the same modules); the two results
must be equal (positions, messages, fixes, sites; not ``steps``). Prints, per group, the versions, how
many were answered from the last result, the median time of those and of the others,
and every mismatch (exit 1 if any).

    python bench/edit_reuse.py                         # bundled scripts and every real project file
    python bench/edit_reuse.py --files 40 --edits 4    # fewer files per project, fewer edits per file
    python bench/edit_reuse.py --only litgpt           # one group
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import pathlib
import random
import statistics
import sys
import time
from typing import Iterator, Optional

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from fabric_ls.analysis.project import Project  # noqa: E402
from fabric_ls.engine import analyze_source  # noqa: E402

DEAD = ['_probe = len("abc") + 1', 'print("checkpoint", 3)', "_seen = str(7).upper()"]
LIVE = ["global_probe = fabric_probe()"]


def _result(analysis) -> str:  # type: ignore[no-untyped-def]
    data = dataclasses.asdict(analysis)
    data.pop("steps")
    data.pop("reused")
    return json.dumps(data, sort_keys=True, default=repr)


def _places(text: str) -> list[tuple[int, str]]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in ast.walk(node):
                if isinstance(statement, (ast.Assign, ast.Expr, ast.AugAssign)) and statement.col_offset:
                    found.add((statement.end_lineno, " " * statement.col_offset))
    return sorted(found)


def edits(text: str, rng: random.Random, count: int) -> Iterator[str]:
    lines = text.splitlines(keepends=True)
    places = _places(text)
    for _ in range(count):
        kind = rng.choice(["dead", "dead", "dead", "comment", "live"])
        if kind in ("dead", "live") and places:
            after, indent = rng.choice(places)
            statement = rng.choice(DEAD if kind == "dead" else LIVE)
            for typed in range(1, len(statement) + 1):
                yield "".join([*lines[:after], indent + statement[:typed] + "\n", *lines[after:]])
            yield "".join(lines)
            continue
        at = rng.randrange(len(lines) + 1)
        lines = [*lines[:at], "# a note\n", *lines[at:]]
        yield "".join(lines)


@dataclasses.dataclass
class Tally:
    versions: int = 0
    reused_ms: list[float] = dataclasses.field(default_factory=list)
    analysed_ms: list[float] = dataclasses.field(default_factory=list)
    mismatches: list[str] = dataclasses.field(default_factory=list)


def check(files: list[pathlib.Path], root: pathlib.Path, edits_per_file: int, tally: Tally) -> None:
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        kept = Project([str(root)], jedi_timeout=None, reuse_analyses=True)
        analyze_source(text, str(path), project=kept)
        rng = random.Random(path.name)
        for version in edits(text, rng, edits_per_file):
            started = time.perf_counter()
            answer = analyze_source(version, str(path), project=kept)
            elapsed = (time.perf_counter() - started) * 1000
            fresh = analyze_source(version, str(path), project=Project([str(root)], jedi_timeout=None))
            tally.versions += 1
            (tally.reused_ms if answer.reused else tally.analysed_ms).append(elapsed)
            if _result(answer) != _result(fresh):
                first, second = json.loads(_result(answer)), json.loads(_result(fresh))
                fields = sorted(key for key in first if first[key] != second[key])
                tally.mismatches.append(f"{path} (reused: {answer.reused}; differ: {', '.join(fields)})")


def _median(values: list[float]) -> Optional[float]:
    return round(statistics.median(values), 1) if values else None


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=0, help="files per real project (0: all)")
    parser.add_argument("--edits", type=int, default=4, help="edits per file")
    parser.add_argument("--only", default="", help="only the groups whose name contains this")
    arguments = parser.parse_args(argv)
    groups: list[tuple[str, pathlib.Path, list[pathlib.Path]]] = [
        ("bundled", REPO, sorted([*REPO.glob("examples/**/*.py"), *REPO.glob("bench/scripts/*.py")])),
    ]
    for source in sorted((HERE / ".cache" / "src").glob("*")):
        files = sorted(source.rglob("*.py"))
        if arguments.files:
            files = files[:: max(1, len(files) // arguments.files)][: arguments.files]
        groups.append((source.name, source, files))
    failed = False
    print("| group | files | versions | answered from the last result | median ms: answered | analysed |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, root, files in groups:
        if arguments.only not in name:
            continue
        tally = Tally()
        check(files, root, arguments.edits, tally)
        share = f"{len(tally.reused_ms)} ({100 * len(tally.reused_ms) / max(tally.versions, 1):.0f} %)"
        print(
            f"| {name} | {len(files)} | {tally.versions} | {share} | {_median(tally.reused_ms)} |"
            f" {_median(tally.analysed_ms)} |"
        )
        for mismatch in tally.mismatches:
            print(f"MISMATCH {mismatch}")
            failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
