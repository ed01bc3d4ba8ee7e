"""FAB038: ``Fabric(...)`` given an accelerator name, a precision, ``num_nodes`` or ``devices`` that the
connector refuses (``accelerator="GPU"``, ``precision="fp16"``, ``devices=0``)."""

from __future__ import annotations

import ast
import re
from difflib import get_close_matches
from typing import Any, Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.resolve_strategy import (
    ACCELERATOR_NAMES,
    ACCELERATOR_REGISTRY,
    PRECISION_VALUES,
    PRECISIONS,
)
from fabric_ls.fixes import make_fix
from fabric_ls.model import Fix, TextEdit
from fabric_ls.rules.common import Case, lightning_sentence

RULE = "FAB038"
# A placeholder of a sentence in the record: ``{accelerator!r}``, ``{', '.join(names)}``.
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
METHODS = ("Fabric",)
# Raised whatever the strategy: the message is not tagged with it.
NAMES_STRATEGY = False

# Precision names of other tools, and the Fabric name that means the same.
_PRECISION_SYNONYMS = {
    "fp16": "16-mixed",
    "float16": "16-mixed",
    "half": "16-mixed",
    "amp": "16-mixed",
    "mixed": "16-mixed",
    "16-bit": "16-mixed",
    "bfloat16": "bf16-mixed",
    "bf16_mixed": "bf16-mixed",
    "fp32": "32-true",
    "float32": "32-true",
    "full": "32-true",
    "32-bit": "32-true",
    "fp64": "64-true",
    "float64": "64-true",
    "double": "64-true",
}


def check(event: CallEvent) -> Optional[Violation]:
    strategy = event.strategy
    for found, args in strategy.problems:
        if found == RULE:
            values = dict(args)
            if strategy.cli and values["argument"] not in _CHECKED_UNDER_CLI:
                return None  # `fabric run` sets LT_DEVICES and LT_NUM_NODES: the script's give way
            problem, advice, replacement = _explained(values)
            if replacement is not None and replacement.endswith("-mixed") and _xla(strategy):
                # XLA's precision plugin takes "16-true" and "bf16-true", not the mixed ones (FAB022).
                replacement = replacement.replace("-mixed", "-true")
                advice = f'Under `{strategy.class_name}` write `precision="{replacement}"`.'
            fix = None
            if replacement is not None:
                # Only a change of case is sure to mean the same; another tool's name may not.
                same = str(values["value"]).lower() == replacement
                fix = _replace_fix(event, values["argument"], replacement, safe=same)
            return Violation(event.node, {"problem": problem, "advice": advice}, fix)
    return None


def _xla(strategy: Any) -> bool:
    return any(strategy.is_a(name) for name in ("SingleDeviceXLAStrategy", "XLAStrategy", "XLAFSDPStrategy"))


# What ``fabric run`` leaves to the script unless given on its command line (cli.py
# ``_set_env_variables``): the accelerator, the precision, the plugins.
_CHECKED_UNDER_CLI = frozenset(
    {"accelerator", "precision", "plugin_type", "plugins_twice", "precision_and_plugin", "tpu_strategy"}
)


def _explained(values: dict[str, Any]) -> tuple[str, str, Optional[str]]:
    """Lightning's sentence for the argument, what to write instead, and a replacement where one is sure."""
    argument, value = values["argument"], values["value"]
    if argument == "accelerator":
        problem = _sentence("invalid accelerator name", repr(value), ", ".join(ACCELERATOR_REGISTRY))
        if not isinstance(value, str):
            return problem, 'Leave it out for `"auto"`, or name one: `"cuda"`, `"cpu"`, `"tpu"`.', None
        lower = value.lower()
        if lower in ACCELERATOR_NAMES:
            return problem, f'Names are case-sensitive: use `accelerator="{lower}"`.', lower
        close = get_close_matches(lower, sorted(ACCELERATOR_NAMES), n=1, cutoff=0.6)
        if close:
            return problem, f'Did you mean `accelerator="{close[0]}"`?', None
        return problem, "Use `auto`, `cpu`, `cuda` (or `gpu`), `mps` or `tpu`.", None
    if argument == "precision":
        problem = _sentence("Precision", repr(value), repr(PRECISION_VALUES)) + "."
        text = str(value).lower()
        meant = text if text in PRECISIONS else _PRECISION_SYNONYMS.get(text)
        if meant is not None:
            return problem, f'Fabric calls it `precision="{meant}"`.', meant
        return problem, "Use one of " + ", ".join(f"`{name!r}`" for name in PRECISIONS) + ".", None
    if argument == "plugin_type":
        problem = _sentence("invalid type for plugin", "in `plugins=`")
        return problem, "Pass strategies as `strategy=` and accelerators as `accelerator=`.", None
    if argument == "plugins_twice":
        problem = _sentence("Received multiple values", value)
        return problem, "Keep one plugin of each kind.", None
    if argument == "precision_and_plugin":
        problem = _sentence("Received both", value, "<a precision plugin>")
        return problem, "The plugin sets the precision: leave `precision=` out (or `None`).", None
    if argument == "set_twice":
        problem = _sentence(f"{value} set through both") + "."
        where = "`accelerator=` here" if value == "accelerator" else "the plugin from `plugins=`"
        return problem, f"Give it once: drop {where}, or the strategy's `{value}=`.", None
    if argument == "strategy_unbuildable":
        # SingleTPUStrategy inherits the constructor: Python names the class that defines it.
        problem = _sentence("missing 1 required positional argument") + "."
        problem += f' `strategy="{value}"` names a class the registry cannot build without a device.'
        advice = (
            'On one TPU core write `strategy="auto"` with `devices=1` (Fabric builds it with its device),'
            " or pass `SingleDeviceXLAStrategy(device=...)`."
        )
        return problem, advice, None
    if argument == "num_nodes_none":
        # Python's own TypeError, at connector.py:112 (``int(...)`` of the argument).
        problem = "int() argument must be a string, a bytes-like object or a real number, not 'NoneType'."
        return problem, "Leave `num_nodes` out for one machine, or give a count: `num_nodes=2`.", None
    if argument == "devices_none":
        # The record's site quotes ``f"{msg} None"``: Lightning builds the sentence from a variable.
        problem = "Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed None."
        return problem, 'Leave `devices` out for `"auto"`, or give a count: `devices=1`.', None
    if argument == "num_nodes":
        problem = _sentence("`num_nodes` must be", str(value))
        return problem, "It counts machines: `num_nodes=1` (the default) for one.", None
    if argument == "cpu_devices":
        problem = _sentence("selected with `CPUAccelerator`")[:-1] + f" (got `devices={value!r}`)."
        return problem, "On the CPU, `devices` is the number of processes: `devices=2`.", None
    if argument == "tpu_devices":
        problem = _sentence("for TPUs", "N (the number of cores)", "N-1", repr(value)) + "."
        return problem, 'Use `devices=1`, `devices="auto"` (every core), or one core: `devices=[0]`.', None
    if argument == "tpu_strategy":
        problem = _sentence("can only be used with a `SingleDeviceXLAStrategy`", value)
        return problem, 'On a TPU use `strategy="xla"` (or `"xla_fsdp"`, or `"auto"`).', None
    problem = _sentence("value is not a valid input", repr(value), values.get("accelerator", "auto"))
    return problem, "For the first GPU write `devices=[0]`; for one device, `devices=1`.", None


def _sentence(fragment: str, *fills: str) -> str:
    """Lightning's sentence (the record's) that holds ``fragment``, its placeholders filled in order."""
    parts = _PLACEHOLDER.split(lightning_sentence(RULE, fragment))
    filled = [parts[0]]
    for index, part in enumerate(parts[1:]):
        filled.append(fills[index] if index < len(fills) else "...")
        filled.append(part)
    return "".join(filled)


def _replace_fix(event: CallEvent, argument: str, replacement: str, safe: bool) -> Optional[Fix]:
    """``accelerator="GPU"`` → ``accelerator="gpu"``, ``precision="fp16"`` → ``precision="16-mixed"``:
    only where the literal is written in this call."""
    for keyword in event.node.keywords:
        if keyword.arg == argument and isinstance(keyword.value, ast.Constant):
            return make_fix(RULE, [TextEdit(event.parsed.span(keyword.value), f'"{replacement}"')], safe=safe)
    return None


VALID = [
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="gpu", devices=2, precision="bf16")
""",
    """from lightning.fabric import Fabric
from lightning.fabric.plugins import HalfPrecision

fabric = Fabric(accelerator="cuda", devices=1, plugins=HalfPrecision("bf16-true"))
""",
    """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=-1, num_nodes=1, precision=16)
""",
    # The accelerator given once, to the strategy: Fabric takes the strategy's.
    """from lightning.fabric import Fabric
from lightning.fabric.accelerators import CUDAAccelerator
from lightning.fabric.strategies import DDPStrategy

fabric = Fabric(strategy=DDPStrategy(accelerator=CUDAAccelerator()), devices=2, precision="bf16-mixed")
fabric.launch()
""",
]
INVALID = [
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="GPU", devices=2)
""",
        3,
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="gpu", devices=2)
""",
    ),
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, precision="fp16")
""",
        3,
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, precision="16-mixed")
""",
    ),
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=0)
""",
        3,
    ),
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, num_nodes=0)
""",
        3,
    ),
    # ``devices=-1`` means every GPU; the CPU accelerator takes a number of processes only.
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=-1, strategy="ddp")
""",
        3,
        profile="cpu",
    ),
    # A precision plugin beside ``precision=`` (litgpt sets ``precision = None`` for this reason).
    Case(
        """from lightning.fabric import Fabric
from lightning.fabric.plugins import HalfPrecision

fabric = Fabric(accelerator="cuda", devices=1, precision="bf16-true", plugins=HalfPrecision("bf16-true"))
""",
        4,
    ),
    # Two precision plugins; a strategy among the plugins.
    Case(
        """from lightning.fabric import Fabric
from lightning.fabric.plugins import DoublePrecision, HalfPrecision

fabric = Fabric(accelerator="cuda", devices=1, plugins=[HalfPrecision("bf16-true"), DoublePrecision()])
""",
        4,
    ),
    Case(
        """from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy

fabric = Fabric(accelerator="cuda", devices=2, plugins=[DDPStrategy()])
""",
        4,
    ),
    # A strategy object built with an accelerator, and ``accelerator=`` beside it.
    Case(
        """from lightning.fabric import Fabric
from lightning.fabric.accelerators import CUDAAccelerator
from lightning.fabric.strategies import DDPStrategy

fabric = Fabric(strategy=DDPStrategy(accelerator=CUDAAccelerator()), accelerator="cuda", devices=2)
""",
        5,
    ),
    # A strategy object built with a precision plugin, and a precision plugin in ``plugins=``.
    Case(
        """from lightning.fabric import Fabric
from lightning.fabric.plugins import HalfPrecision
from lightning.fabric.strategies import DDPStrategy

strategy = DDPStrategy(precision=HalfPrecision("bf16-true"))
fabric = Fabric(accelerator="cuda", devices=2, strategy=strategy, plugins=[HalfPrecision("bf16-true")])
""",
        6,
    ),
    # No machine count at all (``num_nodes: null`` in a config): ``int(None)`` comes first.
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, num_nodes=None)
""",
        3,
    ),
    # No device count at all (``devices: null`` in a config).
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=None)
""",
        3,
    ),
    # No accelerator name at all (``accelerator: null`` in a config).
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator=None, devices=2)
""",
        3,
    ),
    # Another tool's name under XLA: the fix names the precision XLA takes ("16-true", not "16-mixed").
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="tpu", devices=8, strategy="xla", precision="fp16")
""",
        3,
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="tpu", devices=8, strategy="xla", precision="16-true")
""",
        profile="tpu8",
    ),
    # A strategy name given as a plugin: the string is iterated, and its letters are no plugins.
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=2, plugins="deepspeed_stage_2")
""",
        3,
    ),
    # A registered name whose class needs a device: the registry builds it without one.
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1, strategy="single_xla")
""",
        3,
    ),
    # Two TPU cores picked by index: a TPU takes one core's index, or a number of cores.
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="tpu", devices=[0, 1])
""",
        3,
        profile="tpu8",
    ),
    # A TPU with a strategy that is not an XLA one.
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="tpu", devices=8, strategy="ddp")
""",
        3,
        profile="tpu8",
    ),
]
