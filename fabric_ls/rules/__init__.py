"""The rules, discovered: every module in this package that defines ``RULE`` is one.

A rule module has ``RULE`` (its id, with a record ``fabric_ls/records/<RULE>.json``), ``METHODS``
(the calls it inspects), ``check(event)``, and the ``VALID``/``INVALID`` samples that prove it.
Optional attributes say how the engine presents it:

- ``DEFAULT_SEVERITY``: overrides the record's severity (e.g. a warning where ``fabric run`` may
  make the script right);
- ``MACHINE_DEPENDENT = True``: the outcome comes from the launcher or the hardware, so the
  strategy matrix (which changes the strategy, not the machine) leaves it out;
- ``NAMES_STRATEGY = False``: the message does not depend on the strategy, so it is not tagged with it;
- ``JUDGES_MISSING_ARGUMENTS = True``: the rule waits until a call being typed is closed.
- ``SAMPLES_INTERACTIVE = True``: the samples are notebook code (the engine's ``interactive``; the
  differential harness runs them in an interactive session);
- ``DIFFERENTIAL_LIMIT``: why the samples cannot run under Lightning on a CPU machine; a test of its
  own proves the rule instead.

``LIGHTNING_ORDER`` is the one place that says in which order Lightning runs its checks.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation

# Lightning's check order (FABRIC_RULES.md §3): within one call, the first check that fires is the
# exception the user sees, so later ones are not reported for that call. Rules are listed in the
# order Lightning reaches them; a call only consults the rules whose ``METHODS`` name it. A rule
# that shares no call with another needs no entry (tests/test_rules.py says when one is missing).
LIGHTNING_ORDER: tuple[str, ...] = (
    # Fabric(...): the connector validates names and flags, then the accelerator, then precision.
    "FAB021",
    # then the accelerator name, the precision, num_nodes and devices (connector.py:199-311)
    "FAB038",
    "FAB018",
    "FAB022",
    # then, once the strategy has its launcher, the interactive check (connector.py:522).
    "FAB030",
    # launch(): the CLI check, the function check, then the launcher's own checks.
    "FAB017",
    "FAB006",
    # the multiprocessing launcher's entry checks (launchers/multiprocessing.py:97-100)
    "FAB031",
    "FAB032",
    "FAB019",
    "FAB020",
    # ... then the strategy's setup_environment (DeepSpeed's device-index check).
    "FAB027",
    # save: the strategy reads the state first; with the path in its place it fails at once.
    "FAB039",
    # setup*, init_module and the collectives: `_validate_launched` runs first.
    "FAB009",
    "FAB001",
    "FAB015",
    "FAB007",
    "FAB008",
    "FAB002",
    "FAB010",
    "FAB011",
    # A scheduler among the optimizers (FAB035) is rejected by the validation's meta-device checks
    # under FSDP and in setup_optimizers, before the strategy's own checks (FAB012, FAB013); on
    # XLA-FSDP and DeepSpeed it passes them and those strategies' errors (FAB011, FAB014) win.
    "FAB014",
    "FAB035",
    "FAB012",
    "FAB013",
    # setup/setup_module without an optimizer under ZeRO 1/2: DeepSpeed asserts in the engine.
    "FAB034",
    "FAB003",
    # save: `_validate_launched` (in the strategy's barrier and setup), then the checkpoint state.
    "FAB026",
    # backward: ``model._forward_module`` is read first (fabric.py:505), then DeepSpeed's checks.
    "FAB040",
    "FAB004",
    "FAB005",
    # A collective only rank zero reaches hangs once it runs: after the launch check (FAB009).
    "FAB033",
)


def _discover() -> dict[str, ModuleType]:
    found: dict[str, ModuleType] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        rule = getattr(module, "RULE", None)
        if rule is None:
            continue  # a shared helper module (common.py)
        if rule in found:
            raise RuntimeError(f"{rule} is defined by both {found[rule].__name__} and {module.__name__}")
        found[rule] = module
    return dict(sorted(found.items()))


BY_ID: dict[str, ModuleType] = _discover()
ALL_RULES: tuple[ModuleType, ...] = tuple(BY_ID.values())


def _position(rule: str) -> tuple[int, str]:
    listed = LIGHTNING_ORDER.index(rule) if rule in LIGHTNING_ORDER else len(LIGHTNING_ORDER)
    return (listed, rule)


def _check_order() -> dict[str, tuple[str, ...]]:
    by_method: dict[str, list[str]] = {}
    for rule, module in BY_ID.items():
        for method in module.METHODS:
            by_method.setdefault(method, []).append(rule)
    return {method: tuple(sorted(rules, key=_position)) for method, rules in sorted(by_method.items())}


# For each Fabric call, the rules that inspect it, in Lightning's order.
CHECK_ORDER: dict[str, tuple[str, ...]] = _check_order()


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


def machine_dependent(rule: str) -> bool:
    return bool(getattr(BY_ID[rule], "MACHINE_DEPENDENT", False))


def names_strategy(rule: str) -> bool:
    return bool(getattr(BY_ID[rule], "NAMES_STRATEGY", True))


def default_severity(rule: str) -> Optional[str]:
    return getattr(BY_ID[rule], "DEFAULT_SEVERITY", None)
