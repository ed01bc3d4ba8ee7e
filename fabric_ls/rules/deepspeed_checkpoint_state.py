"""FAB026: DeepSpeed ``fabric.save(path, state)`` whose state, written out in the call, holds no
set-up model or more than one (``DeepSpeedStrategy.save_checkpoint``); DeepSpeed or FSDP
``fabric.load(path)`` with no state to load into (``load_checkpoint``: ``if not state: raise``).

Only a state whose every value is known counts: a value the analysis cannot see may be a module
that holds the DeepSpeed engine. The FSDP ``save`` variants of the record are not checked yet.
"""

from __future__ import annotations

from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import Const, Mapping, SetupDataLoader, SetupModule, SetupOptimizer
from fabric_ls.rules.common import Case, lightning_sentence

RULE = "FAB026"
METHODS = ("save", "load")
# Values that are certainly not a module holding a DeepSpeed engine.
_NOT_A_MODEL = (Const, SetupOptimizer, SetupDataLoader)


def check(event: CallEvent) -> Optional[Violation]:
    if event.method == "load":
        return _load_without_state(event)
    if not event.strategy.is_a("DeepSpeedStrategy") or event.strategy.cli:
        return None
    state = event.args[1] if len(event.args) > 1 else event.keywords.get("state")
    if "filter" in event.keywords or len(event.args) > 2 or not isinstance(state, Mapping):
        return None  # a filter is checked before the state (fabric.py and deepspeed.py:434)
    values = list(state.items.values())
    models = [v for v in values if isinstance(v, SetupModule)]
    if not all(isinstance(v, (*_NOT_A_MODEL, SetupModule)) for v in values):
        return None
    if not models:
        fragment = "Could not find a DeepSpeed model"
    elif len({id(m.inner) for m in models}) > 1:
        fragment = "multiple DeepSpeed engine"
    else:
        return None
    return Violation(event.node, {"problem": lightning_sentence(RULE, fragment)})


def _load_without_state(event: CallEvent) -> Optional[Violation]:
    """``fabric.load(path)`` (or an empty state): DeepSpeed and FSDP have nothing to load into."""
    strategy = event.strategy
    if strategy.cli or len(event.node.args) > 2 or any(k.arg is None for k in event.node.keywords):
        return None
    state = event.args[1] if len(event.args) > 1 else event.keywords.get("state", Const(None))
    empty = (isinstance(state, Const) and state.value is None) or (
        isinstance(state, Mapping) and not state.items
    )
    if not empty:
        return None
    if strategy.is_a("DeepSpeedStrategy"):
        # ZeRO-3 with ``load_full_weights=True`` loads a consolidated file instead (deepspeed.py:498);
        # a strategy object's option that is not a literal is not known.
        full_weights = dict(strategy.options).get(
            "load_full_weights", False if strategy.registry_name else None
        )
        if strategy.zero_stage == 3 and full_weights is not False:
            return None
        name = "DeepSpeedStrategy"
    elif strategy.is_a("FSDPStrategy"):
        name = "FSDPStrategy"
    else:
        return None
    shown = repr(None) if isinstance(state, Const) else "{}"
    problem = lightning_sentence(RULE, f"Got {name}.load_checkpoint").replace("{state!r}", shown)
    return Violation(event.node, {"problem": problem})


VALID = [
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"model": model, "optimizer": optimizer, "step": 1})
""",
]
INVALID = [
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"optimizer": optimizer, "step": 1})
""",
        8,
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
generator = torch.nn.Linear(4, 4)
critic = torch.nn.Linear(4, 1)
generator, g_opt = fabric.setup(generator, torch.optim.Adam(generator.parameters()))
critic, c_opt = fabric.setup(critic, torch.optim.Adam(critic.parameters()))
fabric.save("checkpoint", {"generator": generator, "critic": critic})
""",
        10,
    ),
    # ``load`` with nothing to load into, under DeepSpeed and under FSDP.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"model": model, "optimizer": optimizer})
checkpoint = fabric.load("checkpoint")
""",
        9,
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"model": model, "optimizer": optimizer})
checkpoint = fabric.load("checkpoint")
""",
        9,
    ),
]
