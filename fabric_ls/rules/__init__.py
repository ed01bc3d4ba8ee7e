"""The rules, one module each, and the order Lightning checks them in.

Each module has ``RULE`` (its id), ``METHODS`` (the calls it inspects), ``check(event)``
and the ``VALID``/``INVALID`` samples that prove it.
"""

from __future__ import annotations

from types import ModuleType
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.rules import (
    clip_gradients_misuse,
    deepspeed_backward_needs_model,
    deepspeed_backward_without_setup,
    deepspeed_requires_cuda,
    deepspeed_single_optimizer,
    fsdp_joint_setup_orig_params,
    fsdp_meta_joint_setup,
    fsdp_requires_gpu,
    invalid_strategy_name,
    joint_setup_required,
    launch_misuse,
    launch_needs_function,
    launch_required,
    meta_optimizer_setup,
    model_set_up_twice,
    no_backward_sync_before_setup,
    optimizer_before_sharded_setup,
    optimizer_set_up_twice,
    setup_dataloaders_misuse,
    unsupported_precision,
    use_fabric_backward,
    xla_fsdp_separate_setup,
    xla_single_device_pjrt,
    zero3_empty_init_false,
)

ALL_RULES: tuple[ModuleType, ...] = (
    joint_setup_required,
    fsdp_meta_joint_setup,
    zero3_empty_init_false,
    deepspeed_backward_without_setup,
    deepspeed_backward_needs_model,
    launch_needs_function,
    model_set_up_twice,
    optimizer_set_up_twice,
    launch_required,
    meta_optimizer_setup,
    xla_fsdp_separate_setup,
    optimizer_before_sharded_setup,
    fsdp_joint_setup_orig_params,
    deepspeed_single_optimizer,
    setup_dataloaders_misuse,
    use_fabric_backward,
    launch_misuse,
    fsdp_requires_gpu,
    deepspeed_requires_cuda,
    xla_single_device_pjrt,
    invalid_strategy_name,
    unsupported_precision,
    clip_gradients_misuse,
    no_backward_sync_before_setup,
)

BY_ID = {module.RULE: module for module in ALL_RULES}

# The order of Lightning's own checks inside each call (FABRIC_RULES.md §3): the first that
# fires is the exception the user would see, so later ones are not reported for that call.
CHECK_ORDER: dict[str, tuple[str, ...]] = {
    "Fabric": ("FAB021", "FAB018", "FAB022"),
    "launch": ("FAB017", "FAB006", "FAB019", "FAB020"),
    "setup": ("FAB009", "FAB007", "FAB008", "FAB002", "FAB011", "FAB013", "FAB014"),
    "setup_module": ("FAB009", "FAB007"),
    "setup_optimizers": ("FAB009", "FAB001", "FAB015", "FAB008", "FAB010", "FAB012"),
    "setup_dataloaders": ("FAB009", "FAB015"),
    "init_module": ("FAB009", "FAB003"),
    "backward": ("FAB004", "FAB005"),
    "clip_gradients": ("FAB023",),
    "no_backward_sync": ("FAB024",),
    "tensor.backward": ("FAB016",),
    "barrier": ("FAB009",),
    "broadcast": ("FAB009",),
    "all_gather": ("FAB009",),
    "all_reduce": ("FAB009",),
    "save": ("FAB009",),
    "load": ("FAB009",),
}


def first_violation(event: CallEvent, wanted: frozenset[str]) -> Optional[tuple[str, Violation]]:
    """The first rule, in Lightning's order, that fires on this call."""
    unfinished = event.parsed.unfinished(event.node)
    for rule in CHECK_ORDER.get(event.method, ()):
        if unfinished and getattr(BY_ID[rule], "JUDGES_MISSING_ARGUMENTS", False):
            continue  # the arguments it misses may be the ones still being typed
        violation = BY_ID[rule].check(event)
        if violation is not None:
            # A rule the user turned off still stops the call, as the real exception would.
            return (rule, violation) if rule in wanted else None
    return None


def default_severity(rule: str) -> Optional[str]:
    return getattr(BY_ID[rule], "DEFAULT_SEVERITY", None)
