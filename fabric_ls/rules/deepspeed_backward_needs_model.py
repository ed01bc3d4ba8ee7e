"""FAB005: ``fabric.backward(loss)`` under DeepSpeed with several models set up."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import (
    bound_names,
    enclosing_scope,
    insert_at_end,
    make_fix,
    repaired_between,
    scope_statements,
)
from fabric_ls.model import Fix
from fabric_ls.rules.common import Case

RULE = "FAB005"
METHODS = ("backward",)


def check(event: CallEvent) -> Optional[Violation]:
    if not event.strategy.is_a("DeepSpeedStrategy") or "model" in event.keywords:
        return None
    if event.fabric.escaped:
        return None  # models may have been set up where we cannot see
    if event.fabric.models_setup <= 1:
        return None
    return Violation(event.node, {"count": event.fabric.models_setup}, backward_with_model_fix(event))


def backward_with_model_fix(event: CallEvent) -> Optional[Fix]:
    """``fabric.backward(loss)`` → ``fabric.backward(loss, model=generator)``.

    The model is the one set up (``generator, g_opt = fabric.setup(generator, g_opt)``) with the
    optimizer stepped right after the backward; without such a step, the one set-up model the
    loss is computed with; without that, the one model set up with an optimizer. Declined when
    the setups are not all visible in this scope, or when the choice is not one model.
    """
    place = event.place
    node = event.node
    if place is None or len(node.args) != 1 or node.keywords or not event.fabric_text.isidentifier():
        return None
    if repaired_between(event.parsed, node.lineno - 1, node.end_lineno - 1):  # type: ignore[operator]
        return None  # the call is still being typed
    scope = enclosing_scope(event.parsed, place.statement)
    if scope is None:
        return None
    before = [s for s in scope_statements(scope) if s.lineno < place.statement.lineno]
    models = _set_up_models(before, event.fabric_text)
    if len(models) != event.fabric.models_setup or any(name.startswith("<twice") for name in models):
        return None  # not every setup is in view, or one name holds two set-up models
    # A model name rebound after its setup may no longer hold the set-up model.
    for name in models:
        setup_line = models[name][0]
        if name in bound_names([s for s in before if s.lineno > setup_line]):
            return None
    chosen = _stepped_model(place.block, place.index, models)
    if chosen is None:
        used = _models_computing(node.args[0], place.block[: place.index], models)
        with_optimizer = [name for name, (_, optimizers) in models.items() if optimizers]
        chosen = used[0] if len(used) == 1 else with_optimizer[0] if len(with_optimizer) == 1 else None
    if chosen is None or not chosen.isidentifier():
        return None
    return make_fix(RULE, [insert_at_end(event.parsed, node.args[0], f", model={chosen}")])


def _set_up_models(statements: list[ast.stmt], fabric: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Each set-up model's name → (line of its setup, names of the optimizers set up with it)."""
    found: dict[str, tuple[int, tuple[str, ...]]] = {}
    for statement in statements:
        call = getattr(statement, "value", None)
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
            continue
        if not (isinstance(call.func.value, ast.Name) and call.func.value.id == fabric):
            continue
        if call.func.attr not in ("setup", "setup_module"):
            continue
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            found[f"<unnamed {statement.lineno}>"] = (statement.lineno, ())
            continue
        target = statement.targets[0]
        names = [e for e in target.elts] if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(n, ast.Name) for n in names):
            found[f"<unnamed {statement.lineno}>"] = (statement.lineno, ())
            continue
        ids = [n.id for n in names]  # type: ignore[attr-defined]
        optimizers = tuple(ids[1:]) if call.func.attr == "setup" else ()
        found[ids[0] if ids[0] not in found else f"<twice {ids[0]}>"] = (statement.lineno, optimizers)
    return found


def _stepped_model(block: list[ast.stmt], index: int, models: dict) -> Optional[str]:
    """The model set up with the optimizer whose ``.step()`` follows the backward in its block."""
    for statement in block[index + 1 :]:
        call = getattr(statement, "value", None)
        if not isinstance(statement, ast.Expr) or not isinstance(call, ast.Call):
            return None
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "step" and isinstance(func.value, ast.Name):
            stepped = func.value.id
            owners = [name for name, (_, optimizers) in models.items() if stepped in optimizers]
            return owners[0] if len(owners) == 1 else None
    return None


def _models_computing(loss: ast.expr, before: list[ast.stmt], models: dict) -> list[str]:
    """The set-up models called in the expression of the loss (one assignment followed back)."""
    expression: ast.AST = loss
    if isinstance(loss, ast.Name):
        for statement in reversed(before):
            if isinstance(statement, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == loss.id for t in statement.targets
            ):
                expression = statement.value
                break
    called = {
        n.func.id for n in ast.walk(expression) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    return sorted(name for name in models if name in called)


# ZeRO-3: the model set up without an optimizer is rejected by DeepSpeed at stage 1/2 (FAB034).
VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
a = torch.nn.Linear(4, 2)
a, opt_a = fabric.setup(a, torch.optim.Adam(a.parameters()))
b = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.backward(a(torch.randn(2, 4)).sum(), model=a)
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
a = torch.nn.Linear(4, 2)
a, opt_a = fabric.setup(a, torch.optim.Adam(a.parameters()))
b = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.backward(a(torch.randn(2, 4)).sum())
""",
        9,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
fabric.launch()
a = torch.nn.Linear(4, 2)
a, opt_a = fabric.setup(a, torch.optim.Adam(a.parameters()))
b = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.backward(a(torch.randn(2, 4)).sum(), model=a)
""",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
generator = torch.nn.Linear(8, 8)
critic = torch.nn.Linear(8, 1)
generator, g_opt = fabric.setup(generator, torch.optim.Adam(generator.parameters()))
critic, c_opt = fabric.setup(critic, torch.optim.Adam(critic.parameters()))
for _ in range(2):
    c_loss = critic(generator(torch.randn(4, 8, device=fabric.device)).detach()).mean()
    fabric.backward(c_loss)
    c_opt.step()
    c_opt.zero_grad()
""",
        12,
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
generator = torch.nn.Linear(8, 8)
critic = torch.nn.Linear(8, 1)
generator, g_opt = fabric.setup(generator, torch.optim.Adam(generator.parameters()))
critic, c_opt = fabric.setup(critic, torch.optim.Adam(critic.parameters()))
for _ in range(2):
    c_loss = critic(generator(torch.randn(4, 8, device=fabric.device)).detach()).mean()
    fabric.backward(c_loss, model=critic)
    c_opt.step()
    c_opt.zero_grad()
""",
    ),
]
