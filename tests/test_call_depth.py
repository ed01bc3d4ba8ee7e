"""Calls nested deep (a class-based trainer: fit → loop → epoch → batch → step → backward → ...) are
followed; a recursion is followed a bounded depth; past the nesting limit the analysis says so."""

from __future__ import annotations

from pathlib import Path

from fabric_ls.analysis.state import MAX_DEPTH
from fabric_ls.engine import analyze_source


def _chain(depth: int) -> str:
    """``step0`` calls ``step1`` ... ``step<depth-1>``, which calls ``loss.backward()`` under DeepSpeed."""
    lines = [
        "import torch",
        "import lightning as L",
        "",
        "",
        "class Trainer:",
        "    def __init__(self, fabric, model):",
        "        self.fabric, self.model = fabric, model",
    ]
    for level in range(depth - 1):
        lines += ["", f"    def step{level}(self, x):", f"        return self.step{level + 1}(x)"]
    lines += [
        "",
        f"    def step{depth - 1}(self, x):",
        "        loss = self.model(x).sum()",
        "        loss.backward()",
        "",
        "",
        'fabric = L.Fabric(accelerator="cuda", devices=2, strategy="deepspeed")',
        "fabric.launch()",
        "model = torch.nn.Linear(4, 4)",
        "model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))",
        "Trainer(fabric, model).step0(torch.randn(2, 4, device=fabric.device))",
    ]
    return "\n".join(lines) + "\n"


def _backward_line(script: str) -> int:
    return script.splitlines().index("        loss.backward()") + 1


def test_a_call_chain_of_sixteen_methods_is_followed(tmp_path: Path) -> None:
    from lightning_harness import run_with_lightning

    script = _chain(16)
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path))
    found = [(f.code, f.span.start_line + 1) for f in analysis.findings]
    assert found == [("FAB016", _backward_line(script))]
    assert analysis.notes == []
    outcome = run_with_lightning(script, profile="gpu8")
    assert (outcome.error_class, outcome.raised_by_lightning, outcome.line) == (
        "RuntimeError",
        True,
        _backward_line(script),
    )


def test_past_the_nesting_limit_the_analysis_says_so(tmp_path: Path) -> None:
    script = _chain(MAX_DEPTH + 2)
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path))
    assert analysis.findings == []
    assert analysis.notes == ["the script has more paths than fabric-ls follows; some were not checked"]


def test_a_recursion_is_followed_a_bounded_depth(tmp_path: Path) -> None:
    script = """import torch
import lightning as L


def count(node):
    if node is None:
        return 0
    return 1 + count(node.left) + count(node.right)


fabric = L.Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
size = count(torch.nn.Module())
model = fabric.setup_module(torch.nn.Linear(4, 4))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path))
    found = [(f.code, f.span.start_line + 1, f.severity) for f in analysis.findings]
    assert found == [("FAB001", 15, "error")]
    assert analysis.notes == []
