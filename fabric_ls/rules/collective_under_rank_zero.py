"""FAB033: a collective (``save``, ``load``, ``barrier``, ``broadcast``, ``all_gather``, ``all_reduce``)
that only rank zero reaches: the other processes never join it and the job hangs."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.events import CallEvent, Violation
from fabric_ls.fixes import alone_on_lines, indent_of, make_fix, names_in
from fabric_ls.model import Fix, Span, TextEdit
from fabric_ls.rules.common import Case
from fabric_ls.rules.rank_branches import (
    ZERO,
    RankZeroOnly,
    other_ranks_call_beside,
    other_side_calls,
    rank_test,
    rank_zero_only,
)

RULE = "FAB033"
# Every one waits for all processes: save and load end in ``self.barrier()`` (fabric.py:867, 915).
METHODS = ("save", "load", "barrier", "broadcast", "all_gather", "all_reduce")
_COLLECTIVES = frozenset(METHODS)


def _single_process(event: CallEvent) -> bool:
    strategy = event.strategy
    if strategy.class_name is None:
        return False  # the strategy is not known: it may run several processes
    if not strategy.is_a("ParallelStrategy") or strategy.is_a("DataParallelStrategy"):
        return True  # one process (DataParallel drives its GPUs from one)
    return strategy.world_size == 1


def _where(event: CallEvent) -> Optional[tuple[RankZeroOnly, ast.Call]]:
    """The innermost reason the call runs on rank zero only, and the call it holds: the collective
    itself, or a helper call on the way to it."""
    places = [(event.parsed, event.node)]
    places += [(parsed, call) for parsed, call in reversed(event.callers) if call is not event.node]
    for parsed, node in places:
        found = rank_zero_only(parsed, node)
        if found is not None:
            if other_side_calls(found, _COLLECTIVES) or other_ranks_call_beside(found, _COLLECTIVES):
                return None  # the other ranks call a collective too: the ranks stay in step
            return found, node
    return None


def _local_rank_only(found: RankZeroOnly) -> bool:
    """The test names the local rank and no global one (``if fabric.local_rank == 0``)."""
    text = found.parsed.segment(found.reason)
    return "local_rank" in text and not any(
        word in text for word in ("global_rank", "is_global_zero", "get_rank")
    )


def check(event: CallEvent) -> Optional[Violation]:
    # Where the call is first: most collectives are not under a rank test, and then the strategy
    # is not read at all (a call on a Fabric with several strategies is checked once, not per one).
    located = _where(event)
    if located is None or _single_process(event):
        return None
    found, held = located
    if event.strategy.device_count == 1 and _local_rank_only(found):
        return None  # one process per machine: every process is local rank zero
    where = found.describe()
    if held is not event.node:
        line = found.parsed.span(held).start_line + 1
        where = f"`{found.parsed.segment(held.func)}(...)` at line {line} leads here, {where}"
    args = {"collective": f"{event.fabric_text or 'fabric'}.{event.method}", "where": where}
    return Violation(event.node, args, _move_out_fix(event, found) if held is event.node else None)


def _move_out_fix(event: CallEvent, found: RankZeroOnly) -> Optional[Fix]:
    """Dedent the collective out of ``if <rank zero>:`` when that keeps everything else as it was.

    Only the branch's last statement, a bare call on one line, whose arguments use nothing the
    branch binds, under a test that is a rank test alone (``and step % 100 == 0`` would be lost).
    """
    branch, parsed, place = found.branch, event.parsed, event.place
    if branch is None or found.parsed is not parsed or place is None or branch.orelse:
        return None
    statement = place.statement
    if (
        not isinstance(statement, ast.Expr)
        or statement.value is not event.node
        or branch.body[-1] is not statement
        or rank_test(branch.test, parsed) != ZERO
        or isinstance(branch.test, ast.BoolOp)
    ):
        return None
    span, branch_span = parsed.span(statement), parsed.span(branch)
    if span.start_line != span.end_line or not alone_on_lines(parsed, statement):
        return None
    bound = {
        target.id
        for node in branch.body
        for target in ast.walk(node)
        if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store)
    }
    if bound & names_in(event.node):
        return None
    text = indent_of(parsed, branch) + parsed.segment(statement)
    if len(branch.body) == 1:  # nothing else in the branch: the whole ``if`` goes
        return make_fix(RULE, [TextEdit(Span(branch_span.start_line, 0, span.end_line, span.end_col), text)])
    return make_fix(RULE, [TextEdit(Span(span.start_line, 0, span.end_line, span.end_col), text)])


_HEAD = """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
fabric.launch()
model = torch.nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
"""
_LOOP = """for step in range(3):
    loss = model(torch.randn(2, 4, device=fabric.device)).sum()
    fabric.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
"""

VALID = [
    # Printing and logging on rank zero is fine; the save is outside the branch.
    _HEAD
    + _LOOP
    + """    if fabric.global_rank == 0:
        print(f"step {step}: loss {loss.item():.3f}")
    fabric.save("checkpoint.ckpt", {"model": model, "step": step})
""",
    # Both sides reach a barrier.
    _HEAD
    + """if fabric.is_global_zero:
    print("rank zero prepares the data")
    fabric.barrier()
else:
    fabric.barrier()
""",
    # One process: rank zero is everyone.
    """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=1)
model = fabric.setup(torch.nn.Linear(4, 2))
if fabric.global_rank == 0:
    fabric.save("checkpoint.ckpt", {"model": model})
""",
]
INVALID = [
    Case(
        _HEAD
        + _LOOP
        + """    if fabric.global_rank == 0:
        fabric.save("checkpoint.ckpt", {"model": model, "step": step})
""",
        15,
        _HEAD
        + _LOOP
        + """    fabric.save("checkpoint.ckpt", {"model": model, "step": step})
""",
        profile="cpu",
    ),
    Case(
        _HEAD
        + """rank = fabric.global_rank
if rank == 0:
    print("saving")
    fabric.save("checkpoint.ckpt", {"model": model})
""",
        12,
        _HEAD
        + """rank = fabric.global_rank
if rank == 0:
    print("saving")
fabric.save("checkpoint.ckpt", {"model": model})
""",
        profile="cpu",
    ),
    Case(
        # The function's own `rank` is its own: the module's alias still names the rank.
        _HEAD
        + """rank = fabric.global_rank


def describe():
    rank = "worker"
    return rank


if rank == 0:
    fabric.save("checkpoint.ckpt", {"model": model})
""",
        18,
        profile="cpu",
    ),
    Case(
        _HEAD
        + """

def evaluate(fabric, model):
    if fabric.global_rank != 0:
        return None
    total = fabric.all_reduce(model(torch.ones(1, 4)).sum())
    return total


evaluate(fabric, model)
""",
        14,
        profile="cpu",
    ),
    Case(
        _HEAD
        + """

def save_checkpoint(fabric, state):
    fabric.save("checkpoint.ckpt", state)


if fabric.is_global_zero:
    save_checkpoint(fabric, {"model": model})
""",
        12,
        profile="cpu",
    ),
    Case(
        _HEAD
        + """if fabric.global_rank != 0:
    print("the other ranks wait")
else:
    fabric.barrier()
""",
        12,
        profile="cpu",
    ),
    Case(
        """import torch
from lightning.fabric import Fabric
from lightning.fabric.utilities.rank_zero import rank_zero_only

fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
fabric.launch()
model = fabric.setup(torch.nn.Linear(4, 2))


@rank_zero_only
def save_checkpoint(fabric, model):
    fabric.save("checkpoint.ckpt", {"model": model})


save_checkpoint(fabric, model)
""",
        12,
        profile="cpu",
    ),
]
