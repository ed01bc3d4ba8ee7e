"""FAB015: ``setup_dataloaders`` (and ``setup_optimizers``) called with nothing, twice on one loader, or
with something that is not a ``DataLoader``."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import ClassRef, Const, External, Mapping, Obj, Seq, SetupDataLoader, Value
from fabric_ls.rules.common import Case, lightning_sentence

RULE = "FAB015"
METHODS = ("setup_dataloaders", "setup_optimizers")
# Raised whatever the strategy: the message is not tagged with it.
NAMES_STRATEGY = False
# Fires on arguments that are absent: not on a call whose closing bracket is not typed yet.
JUDGES_MISSING_ARGUMENTS = True


def check(event: CallEvent) -> Optional[Violation]:
    if any(isinstance(a, ast.Starred) for a in event.node.args):
        return None
    if event.method == "setup_optimizers":
        if event.args or event.keywords:
            return None
        # fabric.py:1232 raises the optimizer twin of this check.
        return Violation(event.node, {"problem": lightning_sentence(RULE, "requires at least one optimizer")})
    if not event.args:
        return Violation(event.node, {"problem": lightning_sentence(RULE, "requires at least one")})
    if any(isinstance(a, SetupDataLoader) for a in event.args):
        return Violation(event.node, {"problem": lightning_sentence(RULE, "passed only once")})
    if any(_not_a_loader(a) for a in event.args):
        # fabric.py:1253: ``isinstance(dl, DataLoader)`` for each (a dataset, a list of loaders).
        return Violation(event.node, {"problem": lightning_sentence(RULE, "Only PyTorch DataLoader")})
    return None


def _not_a_loader(value: Value) -> bool:
    """Known not to be a ``DataLoader``: a literal, a list or dict (of loaders, say), what a builtin
    such as ``range`` gives, or an object of a ``torch.utils.data`` class other than ``DataLoader``
    (a dataset) or of a workspace class whose bases are all known and none of them a ``DataLoader``."""
    if isinstance(value, (Const, Seq, Mapping)):
        return True
    if not isinstance(value, Obj) or value.is_dataloader:
        return False
    if value.cls is not None:
        return _class_is_not_a_loader(value.cls, 0)
    return _dataset_class(value.library_class) or value.library_class in _BUILTIN_ITERABLES


# Builtins that give iterables, never a DataLoader (``setup_dataloaders(range(8))``).
_BUILTIN_ITERABLES = frozenset(
    {"range", "list", "tuple", "dict", "set", "zip", "map", "enumerate", "filter", "iter"}
)


def _dataset_class(qualname: str) -> bool:
    module, _, name = qualname.rpartition(".")
    return module.startswith("torch.utils.data") and name[:1].isupper() and "DataLoader" not in name


def _class_is_not_a_loader(cls: ClassRef, depth: int) -> bool:
    if depth > 8:
        return False
    for base in cls.bases:
        if isinstance(base, ClassRef):
            if not _class_is_not_a_loader(base, depth + 1):
                return False
        elif not (
            isinstance(base, External) and (_dataset_class(base.qualname) or base.qualname == "object")
        ):
            return False
    return True


VALID = [
    """from torch.utils.data import DataLoader
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
loader = fabric.setup_dataloaders(DataLoader(list(range(8)), batch_size=2))
""",
]
INVALID = [
    Case(
        """from torch.utils.data import DataLoader
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
loader = fabric.setup_dataloaders(DataLoader(list(range(8)), batch_size=2))
loader = fabric.setup_dataloaders(loader)
""",
        6,
        profile="cpu",
    ),
    Case(
        """from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
optimizers = fabric.setup_optimizers()
""",
        4,
        profile="cpu",
    ),
    # A dataset where its loader belongs (fabric.py:1253).
    Case(
        """import torch
from torch.utils.data import TensorDataset
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
dataset = TensorDataset(torch.arange(8.0))
loader = fabric.setup_dataloaders(dataset)
""",
        7,
        profile="cpu",
    ),
    # A dataset class of the workspace.
    Case(
        """import torch
from torch.utils.data import Dataset
from lightning.fabric import Fabric


class Numbers(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return torch.tensor(float(index))


fabric = Fabric(accelerator="cpu", devices=1)
loader = fabric.setup_dataloaders(Numbers())
""",
        15,
        profile="cpu",
    ),
    # The loaders in a list: each is its own argument.
    Case(
        """from torch.utils.data import DataLoader
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
loaders = [DataLoader(list(range(8)), batch_size=2), DataLoader(list(range(4)), batch_size=2)]
train, val = fabric.setup_dataloaders(loaders)
""",
        6,
        profile="cpu",
    ),
]
