"""Lightning Fabric's strategy registry and class tree, as data.

Checked against lightning 2.6.6 (``strategies/__init__.py``, ``connector.py``);
see ``docs/strategies.md``. Nothing here imports lightning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class RegistryEntry:
    class_name: str
    zero_stage: Optional[int] = None
    start_method: Optional[str] = None
    # Set when the name cannot be constructed from a string at all.
    broken: Optional[str] = None


REGISTRY: dict[str, RegistryEntry] = {
    "ddp": RegistryEntry("DDPStrategy", start_method="popen"),
    "ddp_spawn": RegistryEntry("DDPStrategy", start_method="spawn"),
    "ddp_fork": RegistryEntry("DDPStrategy", start_method="fork"),
    "ddp_notebook": RegistryEntry("DDPStrategy", start_method="fork"),
    "ddp_find_unused_parameters_true": RegistryEntry("DDPStrategy", start_method="popen"),
    "dp": RegistryEntry("DataParallelStrategy"),
    "deepspeed": RegistryEntry("DeepSpeedStrategy", zero_stage=2),
    "deepspeed_stage_1": RegistryEntry("DeepSpeedStrategy", zero_stage=1),
    "deepspeed_stage_1_offload": RegistryEntry("DeepSpeedStrategy", zero_stage=1),
    "deepspeed_stage_2": RegistryEntry("DeepSpeedStrategy", zero_stage=2),
    "deepspeed_stage_2_offload": RegistryEntry("DeepSpeedStrategy", zero_stage=2),
    "deepspeed_stage_3": RegistryEntry("DeepSpeedStrategy", zero_stage=3),
    "deepspeed_stage_3_offload": RegistryEntry("DeepSpeedStrategy", zero_stage=3),
    "deepspeed_stage_3_offload_nvme": RegistryEntry("DeepSpeedStrategy", zero_stage=3),
    "fsdp": RegistryEntry("FSDPStrategy"),
    "fsdp_cpu_offload": RegistryEntry("FSDPStrategy"),
    "xla": RegistryEntry("XLAStrategy"),
    "xla_fsdp": RegistryEntry("XLAFSDPStrategy"),
    "single_xla": RegistryEntry("SingleDeviceXLAStrategy", broken="missing required argument 'device'"),
    "single_tpu": RegistryEntry("SingleTPUStrategy", broken="missing required argument 'device'"),
}

# Each class and its Lightning base class (strategies/*.py class statements).
PARENT: dict[str, Optional[str]] = {
    "Strategy": None,
    "SingleDeviceStrategy": "Strategy",
    "SingleDeviceXLAStrategy": "SingleDeviceStrategy",
    "SingleTPUStrategy": "SingleDeviceXLAStrategy",
    "ParallelStrategy": "Strategy",
    "DDPStrategy": "ParallelStrategy",
    "DeepSpeedStrategy": "DDPStrategy",
    "DataParallelStrategy": "ParallelStrategy",
    "FSDPStrategy": "ParallelStrategy",
    "XLAStrategy": "ParallelStrategy",
    "XLAFSDPStrategy": "ParallelStrategy",
    "ModelParallelStrategy": "ParallelStrategy",
}

STRATEGY_CLASSES = frozenset(PARENT)

# Names that `fabric run --strategy` accepts are not restricted here: the
# assumed strategy of a setting may be any registry name.
MATRIX_NAMES: tuple[str, ...] = (
    "ddp",
    "ddp_spawn",
    "dp",
    "deepspeed",
    "deepspeed_stage_3",
    "fsdp",
    "xla",
    "xla_fsdp",
)


def is_known_strategy_name(name: str) -> bool:
    return name.lower() in REGISTRY or name.lower() == "auto"


def is_subclass(class_name: Optional[str], base: str) -> bool:
    """``issubclass`` over Lightning's strategy class tree."""
    while class_name is not None:
        if class_name == base:
            return True
        class_name = PARENT.get(class_name)
    return False


def uses_spawn_launcher(class_name: str, start_method: Optional[str]) -> bool:
    """Whether ``launch()`` must be given a function (FAB006)."""
    if class_name in ("XLAStrategy", "XLAFSDPStrategy"):
        return True
    if is_subclass(class_name, "DDPStrategy") and not is_subclass(class_name, "DeepSpeedStrategy"):
        return start_method in ("spawn", "fork", "forkserver")
    return False


def is_single_process(class_name: str) -> bool:
    """Strategies exempt from the launch check (FAB009)."""
    return is_subclass(class_name, "SingleDeviceStrategy") or is_subclass(class_name, "DataParallelStrategy")


# Classes whose ``module_init_context(empty_init=True)`` enters ``torch.device("meta")``
# (fsdp.py:346, model_parallel.py:204); XLAFSDPStrategy only skips initialisation (xla_fsdp.py:233).
META_AT_EMPTY_INIT = ("FSDPStrategy", "ModelParallelStrategy")


def creates_meta_at_empty_init(class_name: Optional[str]) -> bool:
    """``fabric.init_module(empty_init=True)`` puts parameters on the meta device under this class."""
    return any(is_subclass(class_name, base) for base in META_AT_EMPTY_INIT)
