"""Small facts about event arguments that several rules share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.analysis.values import Obj, Params, SetupOptimizer, Value


@dataclass(frozen=True)
class Case:
    """An INVALID sample: the script, the 1-based line the finding sits on, the fixed script."""

    source: str
    line: int
    fixed: Optional[str] = None
    profile: str = "gpu8"


def constructor_problem(event: CallEvent, rule: str) -> Optional[Violation]:
    """A problem the strategy resolver found in the ``Fabric(...)`` arguments for ``rule``."""
    for found, args in event.strategy.problems:
        if found == rule:
            return Violation(event.node, dict(args))
    return None


def is_raw_module(value: Any) -> bool:
    """An object known to be a module itself, not Fabric's wrapper of it: it was set up (the wrapper
    went elsewhere), or it is an instance of a class in the workspace, or of a ``torch.nn`` module
    class (``torch.nn.Linear``)."""
    from fabric_ls.analysis.values import Obj

    return isinstance(value, Obj) and (
        "__setup__" in value.attrs or value.cls is not None or is_torch_module_class(value.library_class)
    )


def is_torch_module_class(qualname: str) -> bool:
    """A ``torch.nn`` module class (``torch.nn.Linear``, ``torch.nn.modules.conv.Conv2d``): what it
    builds is a plain module, never one Fabric set up."""
    package, _, name = qualname.rpartition(".")
    return (package == "torch.nn" or package.startswith("torch.nn.modules")) and name[:1].isupper()


def optimizers_of(event: CallEvent) -> list[Value]:
    if event.method == "setup":
        return list(event.args[1:])
    if event.method == "setup_optimizers":
        return list(event.args)
    return []


def params_of(optimizer: Value) -> tuple[Params, ...]:
    if isinstance(optimizer, SetupOptimizer):
        return optimizer.inner.params
    if isinstance(optimizer, Obj):
        return optimizer.params
    return ()


def has_meta_params(optimizer: Value) -> bool:
    return any(p.meta for p in params_of(optimizer))


def built_before_setup(optimizer: Value) -> bool:
    """The optimizer holds parameters of a module that was not set up when it was built."""
    params = params_of(optimizer)
    return bool(params) and all(not p.set_up for p in params)


def strategy_known(event: CallEvent) -> bool:
    return event.strategy.class_name is not None


def lightning_sentence(rule: str, fragment: str) -> str:
    """Lightning's own sentence of a rule's variant that contains ``fragment`` (from the record)."""
    from fabric_ls.records import get_record

    record = get_record(rule)
    sentences = [record.error_message, *(site.error_message for site in record.other_sites)]
    for sentence in sentences:
        if fragment in sentence:
            return sentence
    return record.error_message
