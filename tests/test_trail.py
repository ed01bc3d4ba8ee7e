"""The undo log: a mark restored puts back the objects older than it, and only those."""

from __future__ import annotations

from fabric_ls.analysis.trail import Trail
from fabric_ls.analysis.values import Const, Obj


def test_restoring_a_mark_puts_back_what_was_older_and_keeps_what_was_made_after():
    trail = Trail()
    defined = Obj(name="defined")
    trail.set_item(defined.attrs, "x", Const(1), defined)  # before any mark: never recorded
    log: list[str] = []
    mark = trail.mark()
    made = Obj(name="made")  # born after the mark: the run's own
    inner = trail.mark()  # a statement's mark, as the interpreter opens one per statement
    trail.set_item(defined.attrs, "x", Const(2), defined)
    trail.set_item(defined.attrs, "y", Const(3), defined)
    trail.set_attr(made, "name", "renamed")
    trail.extend(log, ["event"])
    trail.release(inner)
    trail.restore_older(mark)
    assert defined.attrs["x"].value == 1 and "y" not in defined.attrs
    assert made.name == "renamed" and log == ["event"]
    assert not trail.active
