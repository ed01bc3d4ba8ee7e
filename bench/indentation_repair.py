"""How long the parser takes to mend a line typed inside a function, on the realistic scripts.

Each of the lines below is inserted after a sample of lines inside function bodies, at column 0, at
column 4, at the body's indentation and one level deeper (most of these do not parse), and the text
is parsed twice: alone (``fabric_ls.analysis.source.parse_source``, as ``fabric-ls check`` does) and
as the server does for a keystroke that leaves the file broken (``Project.parse_script`` after the
unedited version, so the part the edit touched is re-parsed first). It prints, per typed line, the
median and worst time of each, the most whole-file parses one repair took alone, and in how many edits
a top-level function or class went missing from the tree (the file "lost"), which is what makes
findings vanish while typing.

    python bench/indentation_repair.py                # both realistic scripts
    python bench/indentation_repair.py --scripts 3000 --every 50

Nothing here asserts a time; the figures go to bench/README.md by hand.
"""

from __future__ import annotations

import argparse
import ast
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import fabric_ls.analysis.source as source_module  # noqa: E402
from fabric_ls.analysis.project import Project  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = {
    "300": HERE / "scripts" / "realistic_train_300.py",
    "3000": HERE / "scripts" / "realistic_train_3000.py",
}
TYPED = ["x = 1", "return", ")", "x = [1,", "if x:", "for a in b:", "try:", "else:", "elif y:", "except E:"]


def _places(lines: list[str], every: int) -> list[tuple[int, int]]:
    found = []
    for number, (line, following) in enumerate(zip(lines, lines[1:])):
        inside = line.startswith("        ") and following.startswith("        ") and line.strip()
        if inside and not line.rstrip().endswith((",", "(", "[", "{", "\\")):
            found.append((number, len(line) - len(line.lstrip())))
    return found[::every]


def _names(tree: ast.Module) -> list[str]:
    return [s.name for s in tree.body if isinstance(s, (ast.FunctionDef, ast.ClassDef))]


def measure(path: pathlib.Path, every: int) -> None:
    text = path.read_text()
    lines = text.splitlines(keepends=True)
    names = _names(ast.parse(text))
    parses = [0]
    real_parse = source_module._try_parse

    def counting(candidate: str) -> ast.Module:
        parses[0] += 1
        return real_parse(candidate)

    source_module._try_parse = counting
    try:
        all_times: list[float] = []
        all_server: list[float] = []
        print(f"{path.name} ({len(lines)} lines), one place in {every}:")
        for typed in TYPED:
            times, server, most, lost = [], [], 0, 0
            for number, depth in _places(lines, every):
                for indent in sorted({0, 4, depth, depth + 4}):
                    edited = "".join(
                        [*lines[: number + 1], " " * indent + typed + "\n", *lines[number + 1 :]]
                    )
                    parses[0] = 0
                    started = time.perf_counter()
                    parsed = source_module.parse_source(edited, str(path))
                    times.append((time.perf_counter() - started) * 1000)
                    most = max(most, parses[0])
                    lost += _names(parsed.tree) != names
                    project = Project([])
                    project.parse_script(text, str(path))
                    started = time.perf_counter()
                    project.parse_script(edited, str(path))
                    server.append((time.perf_counter() - started) * 1000)
            all_times.extend(times)
            all_server.extend(server)
            print(
                f"  {typed!r:14} alone: median {statistics.median(times):6.1f} ms, worst {max(times):7.1f}"
                f"  server: median {statistics.median(server):6.1f}, worst {max(server):7.1f}"
                f"  most parses {most:3d}  lost {lost}/{len(times)}"
            )
        print(
            f"  all: alone median {statistics.median(all_times):.1f} ms, worst {max(all_times):.1f};"
            f" server median {statistics.median(all_server):.1f} ms, worst {max(all_server):.1f}"
        )
    finally:
        source_module._try_parse = real_parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scripts", nargs="+", choices=sorted(SCRIPTS), default=sorted(SCRIPTS))
    parser.add_argument("--every", type=int, default=40, help="take one place in N inside function bodies")
    args = parser.parse_args()
    for name in args.scripts:
        measure(SCRIPTS[name], args.every)


if __name__ == "__main__":
    main()
