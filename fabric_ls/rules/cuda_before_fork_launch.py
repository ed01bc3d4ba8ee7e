"""FAB031: CUDA initialised in the parent process before a fork launch (``ddp_fork``, ``ddp_notebook``).

A CUDA context in the parent makes every forked child a "bad fork" for torch: the child's first
CUDA call (Lightning's ``CUDAAccelerator.setup_device``) raises, and ``launch()`` re-raises it
(record FAB031 cites the lines in Lightning and torch). Found from the calls that run before the
launch in this file, following module-level functions called by name.
"""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.rules.common import Case
from fabric_ls.rules.launch_path import LaunchPath

RULE = "FAB031"
METHODS = ("launch",)
# The samples' failure is torch's CUDA-in-fork behaviour, which a CPU machine cannot show: the
# differential test proves Lightning's side and the cited source lines instead.
DIFFERENTIAL_LIMIT = (
    "a CUDA context in the parent needs a GPU; see tests/test_launch_rules_under_lightning.py"
)

# torch.cuda functions that run torch's lazy CUDA initialisation (torch/cuda/__init__.py `_lazy_init`);
# `is_available`, `device_count`, `manual_seed*` and `empty_cache` do not create a context.
_INITIALISING = frozenset(
    {
        "init",
        "set_device",
        "current_device",
        "synchronize",
        "get_device_properties",
        "get_device_name",
        "get_device_capability",
        "current_stream",
        "default_stream",
        "mem_get_info",
        "Stream",
        "Event",
        "is_bf16_supported",  # it asks current_device() (torch/cuda/__init__.py is_bf16_supported)
        "get_rng_state",
    }
)
_ACCELERATORS_ON_CUDA = ("auto", "cuda", "gpu")


def forks(event: CallEvent) -> bool:
    """The launch forks: a fork start method, or ``"auto"`` on several devices in an interactive
    session, where the connector picks ``ddp_fork`` (connector.py:411-412)."""
    strategy = event.strategy
    if not strategy.is_a("DDPStrategy") or strategy.is_a("DeepSpeedStrategy"):
        return False
    if strategy.start_method == "fork":
        return True
    return (
        event.parsed.interactive and strategy.registry_name == "ddp" and _strategy_is_auto(event.fabric.node)
    )


def _strategy_is_auto(fabric: ast.Call) -> bool:
    """``Fabric(...)`` leaves the strategy to Lightning (no ``strategy`` argument, or ``"auto"``)."""
    flag = next((k.value for k in fabric.keywords if k.arg == "strategy"), None)
    if flag is None and len(fabric.args) > 1:
        flag = fabric.args[1]
    return flag is None or (isinstance(flag, ast.Constant) and flag.value == "auto")


def check(event: CallEvent) -> Optional[Violation]:
    if event.via is not None or not forks(event) or not _children_use_cuda(event):
        return None
    if not (event.args or "function" in event.keywords):
        return None  # FAB006 first: launch() without a function
    walker = LaunchPath(event.parsed.tree, as_main=True)
    path = walker.path_to(event.node)
    if path is None:
        return None
    devices = _cuda_names(event.parsed.tree)
    for node in walker.ran_before(path):
        if _initialises_cuda(node, devices, event.fabric_text):
            where = f"`{_short(event.parsed, node)}` (the call at line {node.lineno})"  # type: ignore[attr-defined]
            return Violation(event.node, {"initializer": where})
    return None


def _children_use_cuda(event: CallEvent) -> bool:
    """The launched processes set up a CUDA device (``accelerator`` "cuda", "gpu" or "auto")."""
    fabric = event.fabric.node
    accelerator = next((k.value for k in fabric.keywords if k.arg == "accelerator"), None)
    if accelerator is None and fabric.args:
        accelerator = fabric.args[0]
    if accelerator is None:
        return True
    return isinstance(accelerator, ast.Constant) and str(accelerator.value).lower() in _ACCELERATORS_ON_CUDA


def _is_cuda_device(node: ast.AST, devices: frozenset[str]) -> bool:
    """A literal CUDA device (``"cuda:1"``, ``torch.device("cuda", 0)``, a device index ``0``) or a
    name bound to one."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value == "cuda" or node.value.startswith("cuda:")
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return True  # ``tensor.to(0)``: torch reads an index as a CUDA device
    if isinstance(node, ast.Name):
        return node.id in devices
    if isinstance(node, ast.Call) and _dotted(node.func) in ("torch.device", "device") and node.args:
        return _is_cuda_device(node.args[0], devices)
    return False


def _cuda_names(tree: ast.Module) -> frozenset[str]:
    """Module-level names only ever assigned a literal CUDA device (``device = torch.device("cuda")``)."""
    assigned: dict[str, bool] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    cuda = _is_cuda_device(statement.value, frozenset())
                    assigned[target.id] = assigned.get(target.id, True) and cuda
    return frozenset(name for name, cuda in assigned.items() if cuda)


def _initialises_cuda(node: ast.AST, devices: frozenset[str], fabric_text: str) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _dotted(node.func)
    if name.startswith("torch.cuda.") and name.split(".")[2] in _INITIALISING and name.count(".") == 2:
        return True
    if isinstance(node.func, ast.Attribute):
        method = node.func.attr
        if method == "cuda":
            return True
        if method == "to":
            targets = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "device")]
            return any(_is_cuda_device(t, devices) or _dotted(t) == f"{fabric_text}.device" for t in targets)
        if method == "to_device" and _dotted(node.func.value) == fabric_text:
            return True
    device = next((k.value for k in node.keywords if k.arg == "device"), None)
    return device is not None and name.startswith("torch.") and _is_cuda_device(device, devices)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _short(parsed: ParsedSource, node: ast.AST) -> str:
    text = " ".join(parsed.segment(node).split())
    return text if len(text) <= 60 else text[:57] + "..."


VALID = [
    """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = fabric.setup(torch.nn.Linear(4, 2))
    batch = torch.randn(8, 4, device=fabric.device)
    model(batch)


fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_notebook")
fabric.launch(train)
""",
    """import torch
from lightning.fabric import Fabric


def train(fabric):
    pass


if torch.cuda.is_available():
    print(torch.cuda.device_count())
torch.cuda.manual_seed_all(0)
fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_fork")
fabric.launch(train)
""",
    """import torch
from lightning.fabric import Fabric


def train(fabric, model):
    model = fabric.setup(model)


model = torch.nn.Linear(4, 2).cuda()
fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
if __name__ == "__main__":
    fabric.launch(train, model)
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric, model):
    model = fabric.setup(model)


model = torch.nn.Linear(4, 2).cuda()
fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_notebook")
fabric.launch(train, model)
""",
        11,
    ),
    Case(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy

device = torch.device("cuda", 0)


def train(fabric, batch):
    pass


def main():
    batch = torch.zeros(8, 4).to(device)
    fabric = Fabric(accelerator="cuda", devices=2, strategy=DDPStrategy(start_method="fork"))
    fabric.launch(train, batch)


if __name__ == "__main__":
    main()
""",
        15,
    ),
    # Asking whether the GPU supports bf16 asks for the current device: a CUDA context.
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    pass


precision = "bf16-mixed" if torch.cuda.is_bf16_supported() else "16-mixed"
fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_notebook", precision=precision)
fabric.launch(train)
""",
        11,
    ),
]
