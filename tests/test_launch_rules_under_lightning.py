"""FAB031 under the real Lightning: which launches go through the fork check, and the source lines the
record cites. The CUDA failure itself needs a GPU (a CUDA context in the parent, torch's bad fork in
the child), so the harness fakes only that machine state: the process is a fork of a CUDA parent."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from fabric_ls.engine import analyze_source
from fabric_ls.records import get_record

pytest.importorskip("lightning")
from lightning_harness import Script, run_many  # noqa: E402

HEAD = """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy


def train(fabric):
    pass


"""
# (strategy argument, goes through `_check_bad_cuda_fork`)
LAUNCHES = [
    ('"ddp_notebook"', True),
    ('"ddp_fork"', True),
    ('DDPStrategy(start_method="fork")', True),
    ('"ddp_spawn"', False),
    ('"ddp"', False),
]


def _script(strategy: str, cuda_call: str = "") -> str:
    return (
        HEAD
        + cuda_call
        + f"""if __name__ == "__main__":
    fabric = Fabric(accelerator="cuda", devices=2, strategy={strategy})
    fabric.launch(train)
"""
    )


@pytest.fixture(scope="module")
def in_a_bad_fork():
    scripts = [Script(_script(strategy), cuda_bad_fork=True) for strategy, _ in LAUNCHES]
    return dict(zip([strategy for strategy, _ in LAUNCHES], run_many(scripts, profile="gpu8")))


@pytest.mark.parametrize(("strategy", "checked"), LAUNCHES)
def test_lightning_checks_the_fork_exactly_where_the_rule_looks(tmp_path, in_a_bad_fork, strategy, checked):
    outcome = in_a_bad_fork[strategy]
    line_of_launch = _script(strategy).splitlines().index("    fabric.launch(train)") + 1
    with_cuda = _script(strategy, "model = torch.nn.Linear(4, 2).cuda()\n")
    found = [f.code for f in analyze_source(with_cuda, str(tmp_path / "train.py")).findings]
    if checked:
        assert outcome.raised_by_lightning, outcome.stderr_tail
        assert outcome.raise_site == "lightning/fabric/strategies/launchers/multiprocessing.py:209"
        assert outcome.line == line_of_launch
        assert get_record("FAB031").matches(f"{outcome.error_class}: {outcome.message}")
        assert found == ["FAB031"]
    else:
        assert outcome.error_class is None, outcome.message
        assert found == []


NOTEBOOK_AUTO = """import torch
from lightning.fabric import Fabric


def train(fabric):
    pass


fabric = Fabric(accelerator="cuda", devices=2)
fabric.launch(train)
"""


def test_in_a_notebook_auto_forks_and_goes_through_the_check(tmp_path):
    # Several devices and strategy "auto" in an interactive session: the connector picks ddp_fork.
    (in_notebook, as_script) = run_many(
        [
            Script(NOTEBOOK_AUTO, interactive=True, cuda_bad_fork=True),
            Script(NOTEBOOK_AUTO, cuda_bad_fork=True),
        ],
        profile="gpu8",
    )
    assert in_notebook.raise_site == "lightning/fabric/strategies/launchers/multiprocessing.py:209"
    assert in_notebook.line == 10
    assert as_script.error_class is None, as_script.message  # ddp: the subprocess launcher, no fork
    with_cuda = NOTEBOOK_AUTO.replace("fabric = Fabric(", "torch.zeros(1, device='cuda')\nfabric = Fabric(")
    path = str(tmp_path / "train.ipynb")
    assert [f.code for f in analyze_source(with_cuda, path, interactive=True).findings] == ["FAB031"]
    assert [f.code for f in analyze_source(with_cuda, path).findings] == []


def _source_line(package: str, relative: str, line: int) -> str:
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent.joinpath(relative).read_text(encoding="utf-8").splitlines()[line - 1]


# (package, file, line, text on that line): the lines the FAB031 record cites, in the installed packages.
CITED = [
    (
        "lightning.fabric",
        "strategies/launchers/multiprocessing.py",
        97,
        'if self._start_method in ("fork", "forkserver"):',
    ),
    ("lightning.fabric", "strategies/launchers/multiprocessing.py", 98, "_check_bad_cuda_fork()"),
    ("lightning.fabric", "strategies/launchers/multiprocessing.py", 202, "_is_in_bad_fork()"),
    ("lightning.fabric", "strategies/launchers/multiprocessing.py", 212, "torch.cuda.is_initialized()"),
    ("lightning.fabric", "accelerators/cuda.py", 38, "torch.cuda.set_device(device)"),
    ("lightning.fabric", "fabric.py", 1124, "self._strategy.setup_environment()"),
    ("torch", "cuda/__init__.py", 53, '_is_in_bad_fork = getattr(torch._C, "_cuda_isInBadFork"'),
    ("torch", "cuda/__init__.py", 454, "return _initialized and not _is_in_bad_fork()"),
    ("torch", "cuda/__init__.py", 516, "if _is_in_bad_fork():"),
    ("torch", "cuda/__init__.py", 518, '"Cannot re-initialize CUDA in forked subprocess. To use CUDA with "'),
]


def _citations(text: str) -> list[tuple[str, int, int]]:
    """``file.py:12-14`` and ``file.py:12`` in the text, and ``:30`` after one (same file)."""
    found, last_file = [], ""
    for match in re.finditer(r"([\w/.]+\.py)?:(\d+)(?:-(\d+))?", text):
        last_file = match.group(1) or last_file
        first = int(match.group(2))
        found.append((last_file, first, int(match.group(3) or first)))
    return found


@pytest.mark.parametrize(("package", "relative", "line", "text"), CITED, ids=lambda v: str(v))
def test_the_cited_lines_say_what_the_record_says(package, relative, line, text):
    assert text in _source_line(package, relative, line)
    citations = _citations(get_record("FAB031").documentation)
    assert any(
        (relative.endswith(path) or path.endswith(relative)) and first <= line <= last
        for path, first, last in citations
    ), f"the record does not cite {relative}:{line}"
