"""FAB001: ``setup_optimizers`` under DeepSpeed or XLA, which need ``fabric.setup(model, optimizer)``."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, StatementPlace, Violation
from fabric_ls.analysis.strategies import is_subclass
from fabric_ls.analysis.values import Obj, SetupOptimizer
from fabric_ls.fixes import (
    alone_on_lines,
    delete_lines,
    indent_of,
    insert_at_end,
    make_fix,
    names_in,
    newline_of,
    same_block,
    single_target,
)
from fabric_ls.model import Fix, TextEdit
from fabric_ls.rules.common import Case

RULE = "FAB001"
METHODS = ("setup_optimizers",)


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    if not (strategy.is_a("DeepSpeedStrategy") or strategy.is_a("XLAStrategy")):
        return None
    return Violation(event.node, {}, join_setup_fix(event))


def fix_declined_beside(classes: set[str], event: CallEvent) -> bool:
    """Whether the joint setup would fail under another strategy the same ``Fabric(...)`` may get
    (asked by the engine with every strategy the site gets, on any path or as one Fabric's options):
    XLA-FSDP refuses it always (FAB011), FSDP and ModelParallel for a model built inside
    ``init_module(empty_init=True)`` (FAB002). The right code branches on the strategy."""
    if any(is_subclass(name, "XLAFSDPStrategy") for name in classes):
        return True
    meta_elsewhere = ("FSDPStrategy", "ModelParallelStrategy")
    if not any(is_subclass(name, base) for name in classes for base in meta_elsewhere):
        return False
    optimizer = event.args[0] if event.args else None
    inner = optimizer.inner if isinstance(optimizer, SetupOptimizer) else optimizer
    sources = [params.source for params in inner.params] if isinstance(inner, Obj) else []
    return any(getattr(source, "under_empty_init", False) for source in sources)


def join_setup_fix(event: CallEvent) -> Optional[Fix]:
    """FAB001: ``model = setup_module(m)`` (or ``setup(m)``) + ``opt = setup_optimizers(o)`` →
    ``model, opt = setup(m, o)``.

    When ``setup_optimizers`` is the body of an ``if`` that follows the model's setup, the joint
    setup goes into the ``if`` and an ``else`` sets the model up alone, as before.
    """
    place = event.place
    parsed = event.parsed
    if place is None or place.statement is None or not event.fabric_text or len(event.args) != 1:
        return None
    statement = place.statement
    optimizer_target, constants = _optimizer_target(statement, event.node)
    if optimizer_target is None:
        return None
    optimizer_name = parsed.segment(optimizer_target)  # as written (``ast`` normalises identifiers)
    optimizer = event.args[0]
    inner = optimizer.inner if isinstance(optimizer, SetupOptimizer) else optimizer
    if not isinstance(inner, Obj) or not inner.params:
        return None
    setup_place = inner.params[0].source.setup_place
    if setup_place is None:
        return None
    conditional = None if same_block(setup_place, place) else _if_holding(setup_place, place)
    if conditional is None and not same_block(setup_place, place):
        return None
    setup_statement = setup_place.statement
    model_name = single_target(setup_statement)
    setup_call = getattr(setup_statement, "value", None)
    if model_name is None or not isinstance(setup_call, ast.Call) or len(setup_call.args) != 1:
        return None
    if not isinstance(setup_call.func, ast.Attribute) or setup_call.func.attr not in (
        "setup_module",
        "setup",
    ):
        return None
    if setup_call.keywords or not alone_on_lines(parsed, setup_statement):
        return None  # keywords such as move_to_device= would be lost in the joint call
    module_arg = setup_call.args[0]
    edits: list[TextEdit] = []
    if isinstance(module_arg, ast.Name):
        if module_arg.id != model_name:
            return None
        edits.append(delete_lines(parsed, setup_statement))
    else:
        edits.append(TextEdit(parsed.span(setup_call), parsed.segment(module_arg)))
    # Code between the two calls that uses the set-up model would now see the raw one.
    end = place.index if conditional is None else setup_place.block.index(conditional)
    between = setup_place.block[setup_place.index + 1 : end]
    if conditional is not None:
        if model_name in names_in(conditional.test) or _other_setups(conditional, statement):
            return None
        between = [*between, *conditional.body[: place.index]]
    safe = conditional is None and not any(_uses_beyond_parameters(model_name, s) for s in between)
    optimizer_text = parsed.segment(event.node.args[0]) if event.node.args else ""
    if not optimizer_text:
        return None
    new_text = f"{model_name}, {optimizer_name} = {event.fabric_text}.setup({model_name}, {optimizer_text})"
    if constants:
        lines = [f"{parsed.segment(target)} = {parsed.segment(value)}" for target, value in constants]
        new_text = (newline_of(parsed) + indent_of(parsed, statement)).join([*lines, new_text])
    edits.append(TextEdit(parsed.span(statement), new_text))
    if conditional is not None:
        newline = newline_of(parsed)
        alone = f"{model_name} = {parsed.segment(setup_call.func)}({model_name})"
        text = f"{newline}{indent_of(parsed, conditional)}else:{newline}{indent_of(parsed, statement)}{alone}"
        edits.append(insert_at_end(parsed, conditional, text))
    return make_fix(RULE, edits, safe)


def _optimizer_target(
    statement: ast.stmt, call: ast.Call
) -> tuple[Optional[ast.expr], list[tuple[ast.expr, ast.expr]]]:
    """The name ``setup_optimizers`` assigns to, and the other (name, constant) pairs of a tuple
    assignment such as ``step, optimizer = 0, fabric.setup_optimizers(optimizer)``: split into one
    assignment each, which is the same when the other values are constants."""
    if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
        return None, []
    target, value = statement.targets[0], statement.value
    if isinstance(target, ast.Name):
        return (target, []) if value is call else (None, [])
    if not (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)):
        return None, []
    if len(target.elts) != len(value.elts) or not all(isinstance(e, ast.Name) for e in target.elts):
        return None, []
    if call not in value.elts:
        return None, []
    index = value.elts.index(call)
    others = [(t, v) for k, (t, v) in enumerate(zip(target.elts, value.elts)) if k != index]
    if not all(isinstance(v, ast.Constant) for _, v in others):
        return None, []
    return target.elts[index], others


def _uses_beyond_parameters(name: str, statement: ast.stmt) -> bool:
    """``statement`` uses ``name`` other than as ``name.parameters()`` (the same tensors, set up or not)."""
    harmless = {
        id(node.func.value)
        for node in ast.walk(statement)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("parameters", "named_parameters")
        and isinstance(node.func.value, ast.Name)
    }
    return any(
        isinstance(node, ast.Name) and node.id == name and id(node) not in harmless
        for node in ast.walk(statement)
    )


def _other_setups(conditional: ast.If, statement: ast.stmt) -> bool:
    """The ``if`` sets up more than this optimizer: the ``else`` would not mirror it."""
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("setup", "setup_module", "setup_optimizers")
        for other in conditional.body
        if other is not statement
        for node in ast.walk(other)
    )


def _if_holding(setup_place: StatementPlace, place: StatementPlace) -> Optional[ast.If]:
    """The ``if`` without ``else``, after the setup in its block, whose body holds ``place``."""
    for statement in setup_place.block[setup_place.index + 1 :]:
        if isinstance(statement, ast.If) and statement.body is place.block and not statement.orelse:
            return statement
    return None


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
""",
    """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import DeepSpeedStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
if isinstance(fabric.strategy, DeepSpeedStrategy):
    model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
else:
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
]
INVALID = [
    # ZeRO-3: at stage 1/2 DeepSpeed itself rejects the optimizer-less `setup_module` first (FAB034).
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
""",
        8,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    model = fabric.setup_module(model)
    optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
fabric.launch(train)
""",
        8,
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = torch.nn.Linear(4, 2)
    model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
fabric.launch(train)
""",
        profile="tpu8",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup(model)
optimizer = fabric.setup_optimizers(optimizer)
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
optimizer = fabric.setup_optimizers(optimizer)
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
if fabric.world_size > 1:
    optimizer = fabric.setup_optimizers(optimizer)
""",
        10,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
if fabric.world_size > 1:
    model, optimizer = fabric.setup(model, optimizer)
else:
    model = fabric.setup_module(model)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
model = fabric.setup_module(model)
step, optimizer = 0, fabric.setup_optimizers(optimizer)
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.Adam(model.parameters())
step = 0
model, optimizer = fabric.setup(model, optimizer)
""",
    ),
]
