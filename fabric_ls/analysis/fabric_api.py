"""The names of Fabric's API the engine and the rules know, in one place (the module that runs the
calls, the rules that read the source, and dead_code, which must leave both alone, import them)."""

from __future__ import annotations

FABRIC_METHODS = frozenset(
    {
        "setup",
        "setup_module",
        "setup_optimizers",
        "setup_dataloaders",
        "launch",
        "backward",
        "init_module",
        "clip_gradients",
        "no_backward_sync",
        # Collectives and checkpoints check the launch too (FAB009).
        "barrier",
        "broadcast",
        "all_gather",
        "all_reduce",
        "save",
        "load",
    }
)
PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})
# What a rank test reads (fabric_ls.rules.rank_branches): ``fabric.global_rank``, ``fabric.is_global_zero``,
# ``torch.distributed.get_rank()``.
RANK_ATTRIBUTES = frozenset({"global_rank", "local_rank"})
ZERO_FLAGS = frozenset({"is_global_zero"})
RANK_CALLS = frozenset({"get_rank"})
