"""The packages fabric-ls knows by their import path alone: modelled by name, never parsed."""

from __future__ import annotations

import sys

EXTERNAL_PREFIXES = (
    "torch",
    "lightning",
    "lightning_fabric",
    "pytorch_lightning",
    "lightning_utilities",
    "numpy",
    "transformers",
    "deepspeed",
    "hydra",
    "omegaconf",
    "torch_xla",
    "os",
    "sys",
    "argparse",
    "typing",
    "dataclasses",
    "functools",
    "math",
    "time",
    "json",
    "pathlib",
    "logging",
)

_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ()))


def is_external(dotted: str) -> bool:
    """Known by import path, never parsed: the big ML packages and the standard library."""
    head = dotted.split(".", 1)[0]
    return head in EXTERNAL_PREFIXES or head in _STDLIB
