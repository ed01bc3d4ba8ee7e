"""From the arguments of one ``Fabric(...)`` call to the strategy Lightning builds.

Follows ``_Connector`` (connector.py in lightning 2.6.6): registry lookup,
``"auto"`` selection from accelerator and devices, the TPU and CPU fallbacks.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from fabric_ls.analysis.strategies import REGISTRY, is_subclass

PRECISION_ALIASES = {"16": "16-mixed", "bf16": "bf16-mixed", "32": "32-true", "64": "64-true"}
PRECISIONS = (
    "transformer-engine",
    "transformer-engine-float16",
    "16-true",
    "16-mixed",
    "bf16-true",
    "bf16-mixed",
    "32-true",
    "64-true",
)
# What ``Fabric(precision=...)`` accepts (connector.py ``_convert_precision_to_unified_args``).
PRECISION_VALUES: tuple[Any, ...] = (*PRECISIONS, 64, 32, 16, "64", "32", "16", "bf16")
# The accelerator registry's names, in the order Lightning lists them (connector.py:204), and the two
# names the connector accepts beside them. Compared as written: "GPU" is no name.
ACCELERATOR_REGISTRY = ("tpu", "cuda", "mps", "cpu")
ACCELERATOR_NAMES = frozenset({"auto", "gpu", *ACCELERATOR_REGISTRY})
_XLA_STRATEGIES = ("SingleDeviceXLAStrategy", "XLAStrategy", "XLAFSDPStrategy")


@dataclass(frozen=True)
class FabricConfig:
    """The constant arguments of a ``Fabric(...)`` call (None where not constant)."""

    strategy_name: Optional[str] = None  # a string argument, lower-cased
    strategy_class: Optional[str] = None  # a strategy object's Lightning class
    strategy_user_class: Optional[str] = None
    strategy_options: tuple[tuple[str, Any], ...] = ()
    strategy_package: str = "lightning.fabric"
    strategy_given: bool = False
    strategy_known: bool = True
    accelerator: Optional[str] = "auto"
    devices: Any = "auto"
    devices_known: bool = True
    num_nodes: Any = 1
    precision: Any = None
    precision_known: bool = True
    fabric_package: str = "lightning.fabric"
    script_dir: str = ""
    # ``plugins=``: each one's kind and package (fabric_strategies._plugin_kinds); None: not known.
    plugins: Optional[tuple[tuple[str, str], ...]] = ()
    # What the strategy object was built with, of what the connector also takes from its own
    # arguments: "accelerator", "precision", "checkpoint_io", "cluster_environment" (connector.py:261).
    strategy_sets: tuple[str, ...] = ()
    # The accelerator the strategy object was built with ("cuda" for ``CUDAAccelerator()``), if known.
    strategy_accelerator: Optional[str] = None
    # ``accelerator=`` given an Accelerator object (it is not "auto"), or given None (no name).
    accelerator_object: bool = False
    accelerator_none: bool = False
    # ``devices=None`` given (a YAML ``devices: null``): every accelerator refuses it.
    devices_none: bool = False
    # ``num_nodes=None`` given: ``int(None)`` fails first of all (connector.py:112).
    num_nodes_none: bool = False
    # The class of the precision plugin in ``plugins=`` ("MixedPrecision"), where one is known.
    precision_plugin: Optional[str] = None
    # The script runs in an interactive session (a notebook): "auto" on several devices forks.
    interactive: bool = False


@dataclass(frozen=True)
class ResolvedStrategy:
    """What ``Fabric(...)`` builds in one run, or why that cannot be known."""

    class_name: Optional[str]
    registry_name: Optional[str] = None
    user_class: Optional[str] = None
    zero_stage: Optional[int] = None
    start_method: Optional[str] = None
    options: tuple[tuple[str, Any], ...] = ()
    accelerator: Optional[str] = None  # "cuda" | "cpu" | "tpu" | "mps" | None (unknown)
    device_count: Optional[int] = None
    precision: Optional[str] = None  # unified name, None when unknown
    unknown_reason: Optional[str] = None
    assumed: bool = False
    # The declared strategy, standing for `fabric run --strategy` (not a what-if of the portability
    # matrix): the CLI has created the processes, so `launch()` raises (fabric.py:990).
    cli: bool = False
    # devices * num_nodes where both are constants (``fabric.world_size`` before launch).
    world_size: Optional[int] = None
    # A precision plugin given in ``plugins=`` (its class): Fabric uses it as it is.
    precision_plugin: Optional[str] = None
    # Constructor problems: (rule, message args), in Lightning's order.
    problems: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = field(default=())

    def is_a(self, base: str) -> bool:
        return self.class_name is not None and is_subclass(self.class_name, base)

    @property
    def label(self) -> str:
        if self.class_name is None:
            return "unknown"
        name = self.user_class or self.class_name
        return f"{name} · ZeRO-{self.zero_stage}" if self.zero_stage is not None else name

    def option(self, name: str, default: Any = None) -> Any:
        for key, value in self.options:
            if key == name:
                return value
        return default


def _count_devices(devices: Any) -> Optional[int]:
    if isinstance(devices, bool):
        return None
    if isinstance(devices, int):
        return devices if devices >= 0 else None
    if isinstance(devices, (list, tuple)):
        return len(devices)
    if isinstance(devices, str):
        text = devices.strip()
        if text in ("auto", "-1"):
            return None
        if "," in text:
            return len([part for part in text.split(",") if part.strip()])
        if text.isdigit():
            return int(text)
    return None


def _normal_accelerator(accelerator: Any) -> Optional[str]:
    if accelerator is None:
        return "auto"
    if not isinstance(accelerator, str):
        return None
    name = accelerator.lower()
    return "cuda" if name == "gpu" else name


def _normal_precision(precision: Any) -> Optional[str]:
    if precision is None:
        return "32-true"
    text = str(precision)
    text = PRECISION_ALIASES.get(text, text)
    return text if text in PRECISIONS else None


def _zero_stage(options: dict[str, Any], script_dir: str) -> tuple[Optional[int], Optional[str]]:
    """ZeRO stage of a DeepSpeedStrategy (deepspeed.py 267-325): config wins over ``stage``."""
    config = options.get("config", None)
    if isinstance(config, dict):
        zero = config.get("zero_optimization", {})
        return (zero.get("stage") if isinstance(zero, dict) else None), None
    if isinstance(config, str):
        path = config if os.path.isabs(config) else os.path.join(script_dir, config)
        try:
            with open(path, encoding="utf-8") as handle:
                loaded = json.load(handle)
            zero = loaded.get("zero_optimization", {})
            return (zero.get("stage") if isinstance(zero, dict) else None), None
        except (OSError, ValueError, AttributeError):
            return None, f"the DeepSpeed config file {config!r} could not be read"
    if "config" in options and config is not None:
        return None, "the DeepSpeed config is not a literal"
    if options.get("zero_optimization", True) is False:
        return None, None
    stage = options.get("stage", 2)
    return (stage if isinstance(stage, int) else None), None


def resolve(config: FabricConfig) -> ResolvedStrategy:
    """Resolve one run's ``Fabric(...)`` arguments to a strategy."""
    accelerator = _normal_accelerator(config.accelerator)
    if accelerator == "auto" and config.strategy_accelerator is not None:
        accelerator = config.strategy_accelerator  # connector.py:265: the strategy's accelerator
    precision = _normal_precision(config.precision) if config.precision_known else None
    problems: list[tuple[str, tuple[tuple[str, Any], ...]]] = []
    count = _count_devices(config.devices) if config.devices_known else None

    if config.num_nodes_none:
        # The connector converts ``num_nodes`` with ``int()`` before any other check.
        return ResolvedStrategy(
            None,
            unknown_reason="`num_nodes=None` is no number",
            problems=(("FAB038", (("argument", "num_nodes_none"), ("value", None))),),
        )
    if not config.strategy_known:
        return ResolvedStrategy(
            None,
            accelerator=accelerator,
            precision=precision,
            unknown_reason="the strategy is not a constant in the script",
        )

    class_name: Optional[str] = None
    registry_name: Optional[str] = None
    zero_stage: Optional[int] = None
    start_method: Optional[str] = None
    options = dict(config.strategy_options)
    unknown_reason: Optional[str] = None

    if config.strategy_class is not None:
        if config.strategy_package != config.fabric_package:
            problems.append(
                ("FAB021", (("name", f"{config.strategy_class}(...) from {config.strategy_package}"),))
            )
        class_name = config.strategy_class
        if is_subclass(class_name, "DeepSpeedStrategy"):
            zero_stage, unknown_reason = _zero_stage(options, config.script_dir)
        if is_subclass(class_name, "DDPStrategy") and not is_subclass(class_name, "DeepSpeedStrategy"):
            start_method = options.get("start_method", "popen")
    else:
        name = (config.strategy_name or "auto").lower()
        # ``strategy=None`` (a YAML ``strategy: null``) or ``""`` is no registered name (connector.py:192).
        if (name != "auto" and name not in REGISTRY) or (config.strategy_given and not config.strategy_name):
            problems.append(("FAB021", (("name", config.strategy_name),)))
            return ResolvedStrategy(
                None,
                accelerator=accelerator,
                precision=precision,
                unknown_reason=f"`strategy={config.strategy_name!r}` is not a registered strategy",
                problems=tuple(problems),
            )
        if name == "fsdp" and accelerator == "tpu":
            name = "xla_fsdp"
        if name == "dp" and accelerator == "cpu":
            name = "ddp"
        if name == "auto":
            class_name, registry_name, unknown_reason = _auto(accelerator, count, config)
            if registry_name in REGISTRY:
                start_method = REGISTRY[registry_name].start_method
        else:
            entry = REGISTRY[name]
            registry_name = name
            class_name = entry.class_name
            zero_stage = entry.zero_stage
            start_method = entry.start_method
            if entry.broken:
                unknown_reason = f"`{name}` cannot be built from a string ({entry.broken})"

    argument_problem = _argument_problem(config)
    if argument_problem is None and accelerator == "tpu" and class_name is not None:
        # connector.py:536: on a TPU only the XLA strategies (where none is available, an earlier error).
        if not any(is_subclass(class_name, xla) for xla in _XLA_STRATEGIES):
            argument_problem = (("argument", "tpu_strategy"), ("value", class_name))
    if argument_problem is None and registry_name is not None and REGISTRY[registry_name].broken:
        # registry.py:94 builds the class with no arguments; it needs a device.
        argument_problem = (("argument", "strategy_unbuildable"), ("value", registry_name))
    if argument_problem is not None:
        problems.append(("FAB038", argument_problem))
    if class_name is not None and accelerator not in (None, "auto", "cuda"):
        # connector.py:436: the exact FSDPStrategy type (or its names) needs CUDA.
        exact_fsdp = class_name == "FSDPStrategy" and (
            config.strategy_user_class is None
            and (config.strategy_class == "FSDPStrategy" or registry_name in ("fsdp", "fsdp_cpu_offload"))
        )
        if exact_fsdp and accelerator != "tpu":
            problems.append(("FAB018", (("accelerator", accelerator),)))
    if precision == "16-mixed" and accelerator == "cpu":
        precision = "bf16-mixed"
    return ResolvedStrategy(
        class_name,
        registry_name=registry_name,
        user_class=config.strategy_user_class,
        zero_stage=zero_stage,
        start_method=start_method,
        options=tuple(sorted(options.items(), key=lambda kv: kv[0])) if options else (),
        accelerator=accelerator if accelerator != "auto" else None,
        device_count=count,
        precision=precision,
        unknown_reason=unknown_reason,
        problems=tuple(problems),
        precision_plugin=config.precision_plugin,
        world_size=count * config.num_nodes
        if count is not None and isinstance(config.num_nodes, int)
        else None,
    )


def _argument_problem(config: FabricConfig) -> Optional[tuple[tuple[str, Any], ...]]:
    """The first of the connector's checks after the strategy name that a constant argument fails
    (connector.py, in its order): the accelerator name, the precision, ``num_nodes``, ``devices``."""
    accelerator = config.accelerator
    if config.accelerator_none or (isinstance(accelerator, str) and accelerator not in ACCELERATOR_NAMES):
        return (("argument", "accelerator"), ("value", None if config.accelerator_none else accelerator))
    if config.precision_known and config.precision is not None:
        try:
            valid = config.precision in PRECISION_VALUES
        except TypeError:
            valid = False
        if not valid:
            return (("argument", "precision"), ("value", config.precision))
    plugin_problem = _plugin_problem(config) or _set_twice(config)
    if plugin_problem is not None:
        return plugin_problem
    nodes = config.num_nodes
    if isinstance(nodes, int) and nodes < 1:
        return (("argument", "num_nodes"), ("value", nodes))
    if config.devices_none:
        # device_parser.py:199 for GPUs and TPUs, cpu.py:99 on the CPU: a TypeError either way.
        return (("argument", "cpu_devices" if accelerator == "cpu" else "devices_none"), ("value", None))
    if config.devices_known and _is_no_device(config.devices):
        return (("argument", "devices"), ("value", config.devices), ("accelerator", accelerator or "auto"))
    if accelerator == "cpu" and config.devices_known and not _cpu_cores(config.devices):
        return (("argument", "cpu_devices"), ("value", config.devices))  # accelerators/cpu.py:99
    if accelerator == "tpu" and config.devices_known and _never_tpu_cores(config.devices):
        return (("argument", "tpu_devices"), ("value", config.devices))  # accelerators/xla.py:166
    return None


def _never_tpu_cores(devices: Any) -> bool:
    """``devices`` no TPU takes, whatever its number of cores (xla.py ``_check_tpu_devices_valid``):
    a count below 1, or a list that is not one core's index."""
    if isinstance(devices, str):
        text = devices.strip()
        try:
            devices = int(text)
        except ValueError:
            parts = [part.strip() for part in text.split(",") if part]
            if not all(part.lstrip("-").isdigit() for part in parts):
                return False
            devices = [int(part) for part in parts]
    if isinstance(devices, bool):
        return False
    if isinstance(devices, int):
        return devices < 1
    if isinstance(devices, (list, tuple)):
        return len(devices) != 1 or (isinstance(devices[0], int) and devices[0] < 0)
    return False


def _cpu_cores(devices: Any) -> bool:
    """What the CPU accelerator takes for ``devices``: "auto", an int > 0, or its digits."""
    if devices == "auto" or devices is None:
        return True
    if isinstance(devices, str) and devices.strip().isdigit():
        devices = int(devices)
    return isinstance(devices, int) and devices > 0


def _plugin_problem(config: FabricConfig) -> Optional[tuple[tuple[str, Any], ...]]:
    """connector.py:229-256, in its order: a plugin of no known kind (or of the other package), two of
    one kind, a precision plugin beside ``precision=``."""
    if not config.plugins:
        return None
    kinds = [kind for kind, _ in config.plugins]
    for kind, package in config.plugins:
        if kind == "invalid" or package != config.fabric_package:
            return (("argument", "plugin_type"), ("value", kind))
    twice = sorted({kind for kind in kinds if kinds.count(kind) > 1})
    if twice:
        return (("argument", "plugins_twice"), ("value", ", ".join(twice)))
    if "Precision" in kinds and config.precision_known and config.precision is not None:
        return (("argument", "precision_and_plugin"), ("value", config.precision))
    return None


def _set_twice(config: FabricConfig) -> Optional[tuple[tuple[str, Any], ...]]:
    """connector.py:261-281, in its order: what a strategy object was built with that ``Fabric``'s
    arguments give again (an accelerator other than "auto"; a plugin of the same kind)."""
    kinds = [kind for kind, _ in config.plugins or ()]
    given_again = {
        "accelerator": config.accelerator_object
        or (isinstance(config.accelerator, str) and config.accelerator != "auto"),
        "precision": "Precision" in kinds,
        "checkpoint_io": "CheckpointIO" in kinds,
        "cluster_environment": "ClusterEnvironment" in kinds,
    }
    for name in ("accelerator", "precision", "checkpoint_io", "cluster_environment"):
        if name in config.strategy_sets and given_again[name]:
            return (("argument", "set_twice"), ("value", name))
    return None


def _is_no_device(devices: Any) -> bool:
    """connector.py:305 ``devices in ([], 0, "0")`` (by equality, as Python's ``in``: False is 0)."""
    try:
        return bool(devices in ([], 0, "0"))
    except TypeError:
        return False


def _auto(
    accelerator: Optional[str], count: Optional[int], config: FabricConfig
) -> tuple[Optional[str], Optional[str], Optional[str]]:
    """``_choose_strategy`` for ``strategy="auto"`` (connector.py:394-413)."""
    nodes = config.num_nodes if isinstance(config.num_nodes, int) else None
    if accelerator == "tpu":
        if count == 1 or (isinstance(config.devices, (list, tuple)) and len(config.devices) == 1):
            return "SingleDeviceXLAStrategy", None, None
        if count is None and config.devices not in ("auto", None, -1, "-1"):
            return None, None, "`devices` is not a constant"
        return "XLAStrategy", "xla", None
    if nodes is not None and nodes > 1:
        return "DDPStrategy", "ddp", None
    if accelerator is None:
        return None, None, "the accelerator is not a constant"
    if accelerator == "cpu" and config.devices in ("auto", None):
        return "SingleDeviceStrategy", None, None
    if count is None:
        return None, None, "strategy `auto` depends on how many devices the machine has"
    if count <= 1:
        return "SingleDeviceStrategy", None, None
    if config.interactive:
        return "DDPStrategy", "ddp_fork", None  # connector.py:411, in a notebook
    return "DDPStrategy", "ddp", None
