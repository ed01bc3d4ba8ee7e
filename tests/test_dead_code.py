"""Dead statements (fabric_ls.analysis.dead_code): what the evaluator skips, what it must keep running,
and, under the real Lightning, that skipping them changes no finding."""

from __future__ import annotations

import ast
import textwrap

import pytest

from fabric_ls.analysis.dead_code import dead_statements, live_forms
from fabric_ls.analysis.source import parse_source
from fabric_ls.engine import analyze_source


def _dead_lines(source: str) -> list[int]:
    parsed = parse_source(textwrap.dedent(source), "/nowhere/train.py")
    dead = dead_statements(parsed)
    return sorted(node.lineno for node in ast.walk(parsed.tree) if id(node) in dead)


@pytest.mark.parametrize(
    ("source", "dead"),
    [
        # Nothing reads it, and only builtins and value methods run.
        ("def f(loss):\n    n = len(str(loss.item()))\n    return loss\n", [2]),
        ('def f(x):\n    print("step", x)\n    return x\n', [2]),
        # A chain that only feeds a log line goes as a whole.
        ("def f(loss):\n    a = loss.item()\n    b = a * 2\n    print(b)\n    return loss\n", [2, 3, 4]),
        ('def f():\n    """Doc."""\n    pass\n', [2, 3]),
        ("def f(logger, x):\n    logger.info(f'{x:.3f}')\n    return x\n", [2]),
        # Nested functions have their own.
        ("def f():\n    def g(y):\n        z = abs(y)\n        return y\n    return g\n", [3]),
        # A parameter is bound before the body runs.
        ("def f(lr):\n    lr = lr * 2\n    return 1\n", [2]),
    ],
)
def test_dead_statements(source: str, dead: list[int]) -> None:
    assert _dead_lines(source) == dead


@pytest.mark.parametrize(
    "source",
    [
        # Read by a statement the engine runs.
        "def f(model):\n    n = len(model)\n    return n\n",
        # The script's own code, or a method that is not a plain read.
        "def g(x):\n    return x\n\ndef f(x):\n    y = g(x)\n    return x\n",
        "def f(batch):\n    b = batch.to('cuda')\n    return batch\n",
        "def f(items, x):\n    items.append(x)\n    return items\n",
        "def f(loss):\n    loss.backward()\n",
        "class M:\n    def item(self):\n        return 1\n\ndef f(m):\n    v = m.item()\n    return m\n",
        "import helpers\n\ndef f(x):\n    helpers.info(x)\n    return x\n",
        # A builtin the module or the function replaced.
        "print = lambda *a: None\n\ndef f(x):\n    print(x)\n    return x\n",
        "def f(x, log):\n    len = log\n    n = len(x)\n    return x\n",
        "def f(x, len):\n    n = len(x)\n    return x\n",
        "def f(xs, key):\n    m = max(xs, key=key)\n    return xs\n",
        # Python raises UnboundLocalError at a read before the binding: that ends the path.
        "def f():\n    print(name)\n    name = 'x'\n    return name\n",
        # Reads a function's locals by name.
        "def f(x):\n    y = str(x)\n    return locals()\n",
        # An attribute a rule looks for in the source; a tensor made on a device.
        "def f(model):\n    p = model.parameters\n    return model\n",
        "def f(torch):\n    t = torch.zeros(2, device='cuda')\n    return torch\n",
        # ``del`` and a nested function read it.
        "def f(x):\n    y = abs(x)\n    del y\n    return x\n",
        "def f(x):\n    y = abs(x)\n    def g():\n        return y\n    return g\n",
    ],
)
def test_kept(source: str) -> None:
    parsed = parse_source(source, "/nowhere/train.py")
    function = parsed.tree.body[-1]
    dead = dead_statements(parsed)
    kept = [s for s in function.body if isinstance(s, (ast.Assign, ast.Expr, ast.AugAssign))]  # type: ignore[attr-defined]
    assert kept and not any(id(s) in dead for s in kept[:1])


def test_live_forms_ignore_dead_statements_and_positions() -> None:
    before = "def f(loss):\n    total = loss.sum()\n    return total\n"
    after = "\n\ndef f(loss):\n    n = loss.numel()\n    total = loss.sum()\n    print(n)\n    return total\n"
    changed = "def f(loss):\n    total = loss.mean()\n    return total\n"
    forms = live_forms(parse_source(before, "/nowhere/a.py"))
    assert live_forms(parse_source(after, "/nowhere/a.py")) == forms
    assert live_forms(parse_source(changed, "/nowhere/a.py")) != forms


# Each: a script whose dead-looking statement matters (or does not), the finding fabric-ls gives,
# and where the real Lightning stops it (gpu2: two GPUs, faked).
PROOFS = [
    (
        # ``print(fabric)`` launches nothing: the setup without launch() raises (FAB009).
        """
        import torch
        from lightning.fabric import Fabric


        def main():
            fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
            print("running on", fabric)
            model = fabric.setup(torch.nn.Linear(2, 2))


        main()
        """,
        ["FAB009"],
        8,
    ),
    (
        # The read of ``label`` before its binding raises UnboundLocalError first: the separate
        # DeepSpeed setup after it is never reached, and fabric-ls says nothing.
        """
        import torch
        from lightning.fabric import Fabric


        def main():
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
            fabric.launch()
            print(label)
            label = "run"
            model = fabric.setup_module(torch.nn.Linear(2, 2))
            optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))


        main()
        """,
        [],
        8,
    ),
]


def test_dead_statements_change_no_finding_under_lightning() -> None:
    from lightning_harness import run_many

    sources = [textwrap.dedent(source).lstrip("\n") for source, _, _ in PROOFS]
    outcomes = run_many(sources, profile="gpu2")
    for source, (_, codes, line), outcome in zip(sources, PROOFS, outcomes):
        analysis = analyze_source(source, "/nowhere/train.py")
        assert [f.code for f in analysis.findings] == codes, source
        assert outcome.line == line, (outcome, source)
        if codes:
            assert outcome.raised_by_lightning, outcome
            assert [f.span.start_line + 1 for f in analysis.findings] == [line]
        else:
            assert outcome.error_class == "UnboundLocalError", outcome


def _compared_attributes(tree: ast.Module) -> set[str]:
    """Every string a rule compares an attribute's name with (``node.attr == "x"``, ``func.attr in
    ("a", "b")``, ``node.attr in NAMES``), module-level and imported sets of names resolved."""
    import fabric_ls.analysis.fabric_api as fabric_api

    sets: dict[str, set[str]] = {
        name: set(value) for name, value in vars(fabric_api).items() if isinstance(value, frozenset)
    }
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            strings = {n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant)}
            sets[node.targets[0].id] = {s for s in strings if isinstance(s, str)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and node.left.attr == "attr":
            for compared in node.comparators:
                for inner in ast.walk(compared):
                    if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                        found.add(inner.value)
                    elif isinstance(inner, ast.Name):
                        found |= sets.get(inner.id, set())
    return found


def test_every_attribute_a_rule_reads_in_the_source_keeps_its_statement_alive() -> None:
    # A rule that reads the source sees every statement, dead or not: an edit of a statement naming
    # what it reads must be analysed again, never answered from the last result.
    from pathlib import Path

    import fabric_ls.rules as rules_package
    from fabric_ls.analysis.dead_code import RULE_WATCHED_ATTRIBUTES, SAFE_METHODS

    read: set[str] = set()
    for path in sorted(Path(rules_package.__file__).parent.glob("*.py")):
        read |= _compared_attributes(ast.parse(path.read_text(encoding="utf-8")))
    assert {"setup_optimizers", "global_rank", "step"} <= read  # the scan finds what rules compare
    assert read <= RULE_WATCHED_ATTRIBUTES, sorted(read - RULE_WATCHED_ATTRIBUTES)
    assert not SAFE_METHODS & RULE_WATCHED_ATTRIBUTES
    # And such a statement is not dead, even where it only binds a name nothing reads.
    assert _dead_lines("def f(opt):\n    s = opt.step\n    return opt\n") == []
