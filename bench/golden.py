"""Did an engine change change any result? Every analysis the test suite makes, and every real file, as JSON.

Three steps, for an engine change that must not change what fabric-ls says (a speed-up, a refactoring):

    # 1. record the scripts the test suite analyses (their text, path, settings; ~15 min)
    python bench/golden.py record /tmp/corpus.pkl
    # 2. analyse them, and the bundled and real-project files, with each version of fabric_ls
    git archive <before> fabric_ls | tar -x -C /tmp/before
    PYTHONPATH=/tmp/before python bench/golden.py dump /tmp/corpus.pkl /tmp/before.jsonl
    python bench/golden.py dump /tmp/corpus.pkl /tmp/after.jsonl
    # 3. compare: every Analysis field but ``steps`` (and ``reused``), then steps
    python bench/golden.py compare /tmp/before.jsonl /tmp/after.jsonl

Record and dump on the same disk: scripts the tests wrote to temporary folders may import files there,
which pytest deletes after a few runs. ``dump`` prints which fabric_ls it ran.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# Loaded by pytest (``-p``) in step 1: wraps the engine's one entry point and writes what it saw.
_PLUGIN = '''
import atexit, os, pickle
import fabric_ls.engine as engine
_seen = {}
_analyze = engine._analyze
def _recorded(source, path, settings, project, assumed, force, interactive=False):
    key = repr((source, path, assumed, force, interactive, repr(settings)))
    _seen.setdefault(key, (source, path, settings, assumed, force, interactive,
                           list(project.roots) if project else None))
    return _analyze(source, path, settings, project, assumed, force, interactive)
engine._analyze = _recorded
@atexit.register
def _write():
    with open(os.environ["GOLDEN_CORPUS"] + f".{os.getpid()}", "wb") as handle:
        pickle.dump(list(_seen.values()), handle)
'''


def record(corpus: str) -> int:
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "golden_recorder.py").write_text(_PLUGIN, encoding="utf-8")
        environment = {**os.environ, "GOLDEN_CORPUS": corpus, "PYTHONPATH": folder}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "golden_recorder"]
        completed = subprocess.run(command, cwd=REPO, env=environment)
    items = []
    for part in sorted(glob.glob(corpus + ".*")):
        with open(part, "rb") as handle:
            items.extend(pickle.load(handle))
        os.remove(part)
    with open(corpus, "wb") as handle:
        pickle.dump(items, handle)
    print(f"{len(items)} analyses recorded in {corpus}")
    return completed.returncode


def _key(item: tuple) -> str:
    source, path, settings, assumed, force, interactive, _ = item
    text = repr((source, path, assumed, force, interactive, repr(settings)))
    return hashlib.sha1(text.encode()).hexdigest()


def _json(analysis: object) -> str:
    return json.dumps(dataclasses.asdict(analysis), sort_keys=True, default=repr)  # type: ignore[call-overload]


def dump(corpus: str, out: str) -> int:
    import fabric_ls
    from fabric_ls import engine

    print(f"fabric_ls from {Path(fabric_ls.__file__).parent}", file=sys.stderr)
    with open(corpus, "rb") as handle:
        items = pickle.load(handle)
    keyed = {_key(item): item for item in items}
    with open(out, "w", encoding="utf-8") as output:
        for key in sorted(keyed):
            source, path, settings, assumed, force, interactive, roots = keyed[key]
            project = engine.Project(roots or ([os.path.dirname(path)] if not path.startswith("<") else []))
            try:
                text = _json(engine._analyze(source, path, settings, project, assumed, force, interactive))
            except Exception as error:  # a crash is a result too
                text = json.dumps({"crash": repr(error)})
            output.write(f"{key} {text}\n")
        files = [*sorted(REPO.glob("examples/**/*.py")), *sorted(REPO.glob("bench/scripts/*.py"))]
        for source_root in sorted((HERE / ".cache" / "src").glob("*")):
            files += sorted(source_root.rglob("*.py"))
        projects: dict[str, object] = {}
        for path in files:
            root = next((str(r) for r in (HERE / ".cache" / "src").glob("*") if r in path.parents), str(REPO))
            project = projects.setdefault(root, engine.Project([root]))
            analysis = engine.analyze_file(str(path), project=project)
            output.write(f"{path.relative_to(REPO)} {_json(analysis)}\n")
    print(f"{len(keyed) + len(files)} analyses written to {out}")
    return 0


def _load(path: str) -> dict[str, dict]:
    found = {}
    for line in open(path, encoding="utf-8"):
        key, _, text = line.partition(" ")
        data = json.loads(text)
        for finding in data.get("findings", []) + data.get("other_findings", []):
            finding.pop("docs_url", None)  # the installed pages' folder
        found[key] = data
    return found


def compare(before: str, after: str) -> int:
    old, new = _load(before), _load(after)
    changed, steps = [], 0
    for key in sorted(set(old) | set(new)):
        first, second = dict(old.get(key, {})), dict(new.get(key, {}))
        first_steps, second_steps = first.pop("steps", None), second.pop("steps", None)
        first.pop("reused", None)
        second.pop("reused", None)
        if first != second:
            changed.append(key)
        elif first_steps != second_steps:
            steps += 1
    print(f"{len(old)} analyses: {len(changed)} changed, {steps} only in their steps")
    for key in changed[:20]:
        print(f"changed: {key}")
    return 1 if changed else 0


if __name__ == "__main__":
    commands = {"record": record, "dump": dump, "compare": compare}
    if len(sys.argv) < 3 or sys.argv[1] not in commands:
        print(__doc__)
        sys.exit(2)
    sys.exit(commands[sys.argv[1]](*sys.argv[2:]))
