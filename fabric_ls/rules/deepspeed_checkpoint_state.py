"""FAB026: DeepSpeed, FSDP or XLA-FSDP ``fabric.save(path, state)`` whose state, written out in the call (or a
``model.state_dict()``), holds no set-up model or more than one, or that passes a ``filter`` DeepSpeed
refuses (sharded FSDP too); DeepSpeed or FSDP ``fabric.load(path)`` with no state to load into
(``load_checkpoint``: ``if not state: raise``).

Only a state whose every value is known counts: a value the analysis cannot see may be a module
that holds the engine. A strategy object whose option is not a literal leaves its checkpoint format unknown.
"""

from __future__ import annotations

from typing import Any, Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import (
    STATE_DICT,
    Const,
    Mapping,
    Obj,
    Seq,
    SetupDataLoader,
    SetupModule,
    SetupOptimizer,
    Value,
)
from fabric_ls.rules.common import Case, is_torch_module_class, lightning_sentence

RULE = "FAB026"
METHODS = ("save", "load")
# Values that are certainly not a module holding a DeepSpeed engine (a dict of models is not: the
# strategies look at the state's own values only).
_NOT_A_MODEL = (Const, SetupOptimizer, SetupDataLoader, Mapping, Seq)


def check(event: CallEvent) -> Optional[Violation]:
    if event.method == "load":
        return _load_without_state(event)
    strategy = event.strategy
    if len(event.args) > 3 or any(k.arg is None for k in event.node.keywords):
        return None
    if strategy.is_a("DeepSpeedStrategy"):
        name = "DeepSpeed"
    elif strategy.is_a("FSDPStrategy"):
        name = "FSDP"
    elif strategy.is_a("XLAFSDPStrategy"):
        name = "XLAFSDP"
    else:
        return None
    given_filter = event.args[2] if len(event.args) > 2 else event.keywords.get("filter")
    if (
        given_filter is not None
        and not (isinstance(given_filter, Const) and given_filter.value is None)
        and name != "XLAFSDP"  # XLA-FSDP saves its shards through the filter
    ):
        # Checked before the state: fabric.py:858 (not a dict), then the strategy's own refusal.
        if not isinstance(given_filter, Mapping):
            return None
        if name == "DeepSpeed":
            return Violation(
                event.node, {"problem": lightning_sentence(RULE, "filter=...)` is not supported")}
            )
        if _state_dict_type(strategy) != "sharded":
            return None  # a full FSDP checkpoint takes a filter
        return Violation(event.node, {"problem": lightning_sentence(RULE, "sharded filtered checkpoints")})
    state = event.args[1] if len(event.args) > 1 else event.keywords.get("state")
    if _is_state_dict(state):
        values: list[Value] = []  # ``fabric.save(path, model.state_dict())``: tensors, no module
    elif isinstance(state, Mapping):
        values = list(state.items.values())
    else:
        return None
    models = [v for v in values if isinstance(v, SetupModule)]
    if not all(
        isinstance(v, (*_NOT_A_MODEL, SetupModule)) or _is_state_dict(v) or _raw_module(v) for v in values
    ):
        return None
    if not models:
        fragment = f"Could not find a {name} model"
    elif len({id(m.inner) for m in models}) > 1:
        fragment = {
            "DeepSpeed": "multiple DeepSpeed engine",
            "FSDP": "multiple FSDP models",
            "XLAFSDP": "multiple XLAFSDP modules",
        }[name]
    else:
        return None
    return Violation(event.node, {"problem": lightning_sentence(RULE, fragment)})


def _raw_module(value: Value) -> bool:
    """A ``torch.nn`` module never set up (``{"model": model}`` with the original ``model``): no engine,
    no FSDP module in it."""
    return (
        isinstance(value, Obj)
        and "__setup__" not in value.attrs
        and is_torch_module_class(value.library_class)
    )


def _is_state_dict(value: Optional[Value]) -> bool:
    return isinstance(value, Obj) and value.library_class == STATE_DICT


def _state_dict_type(strategy: Any) -> Optional[str]:
    """FSDP's checkpoint format: "sharded" by default (fsdp.py:152), "full" where the strategy says so;
    unknown for an object whose option is not a literal."""
    options = dict(strategy.options)
    if "state_dict_type" in options:
        return str(options["state_dict_type"])
    return "sharded" if strategy.registry_name else None


def _load_without_state(event: CallEvent) -> Optional[Violation]:
    """``fabric.load(path)`` (or an empty state): DeepSpeed and FSDP have nothing to load into."""
    strategy = event.strategy
    if len(event.node.args) > 2 or any(k.arg is None for k in event.node.keywords):
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
    elif strategy.is_a("XLAFSDPStrategy"):
        name = "`XLAFSDPStrategy"  # xla_fsdp.py:529 quotes the call
    else:
        return None
    shown = repr(None) if isinstance(state, Const) else "{}"
    problem = lightning_sentence(RULE, f"Got {name}.load_checkpoint").replace("{state!r}", shown)
    return Violation(event.node, {"problem": problem})


VALID = [
    # XLA-FSDP with the set-up model in the state; the filter picks what is saved.
    """import os
import tempfile

import torch
from lightning.fabric import Fabric


def train(fabric):
    model = fabric.setup_module(torch.nn.Linear(4, 4))
    optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))
    path = os.path.join(tempfile.mkdtemp(), "checkpoint")
    fabric.save(path, {"model": model, "optimizer": optimizer}, filter={"model": lambda k, v: True})


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
fabric.launch(train)
""",
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"model": model, "optimizer": optimizer, "step": 1})
""",
    # A full FSDP checkpoint takes a filter.
    """import torch
from lightning.fabric import Fabric
from lightning.fabric.strategies import FSDPStrategy

fabric = Fabric(accelerator="cuda", devices=2, strategy=FSDPStrategy(state_dict_type="full"))
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.save("checkpoint.pt", {"model": model}, filter={"model": lambda name, value: "weight" in name})
""",
]
INVALID = [
    # The model one level down: the strategy looks at the state's own values only.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"modules": {"model": model}, "optimizer": optimizer})
""",
        8,
    ),
    # XLA-FSDP with the state dicts instead of the set-up model (the MNIST XLA-FSDP example's shape).
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = fabric.setup_module(torch.nn.Linear(4, 4))
    optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))
    state = {"model": model._forward_module.state_dict(), "optimizer": optimizer.state_dict()}
    fabric.save("checkpoint", state)


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
fabric.launch(train)
""",
        9,
        profile="tpu8",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric


def train(fabric):
    model = fabric.setup_module(torch.nn.Linear(4, 4))
    fabric.load("checkpoint")


fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
fabric.launch(train)
""",
        7,
        profile="tpu8",
    ),
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
    # The model's state dict instead of the model, under DeepSpeed and under FSDP.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"model": model.state_dict(), "optimizer": optimizer})
""",
        8,
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.save("checkpoint", model.state_dict())
""",
        7,
    ),
    # Two FSDP models in one checkpoint.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
student = fabric.setup_module(torch.nn.Linear(4, 2))
teacher = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.save("checkpoint", {"student": student, "teacher": teacher})
""",
        8,
    ),
    # A filter: DeepSpeed refuses it, and so does FSDP's sharded checkpoint (the default).
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("checkpoint", {"model": model}, filter={"model": lambda name, value: True})
""",
        8,
    ),
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
fabric.save("checkpoint", {"model": model}, filter={"model": lambda name, value: True})
""",
        7,
    ),
    # A module never set up (an EMA copy) holds no engine.
    Case(
        """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
fabric.launch()
model = torch.nn.Linear(4, 2)
ema = torch.nn.Linear(4, 2)
model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
fabric.save("ema_checkpoint", {"ema": ema, "step": 10})
""",
        9,
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
