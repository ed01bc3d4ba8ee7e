"""Comprehensions: ``[fabric.setup(m) for m in models]`` sets each model up.

A comprehension's element is run only where it calls a Fabric method itself; its value is the list
of what it gave for each item of a short known sequence, and otherwise what it was before this
module (the parameters it collects, or an unknown value).
"""

from __future__ import annotations

import ast
import weakref
from typing import Any, Optional

from fabric_ls.analysis.fabric_api import FABRIC_METHODS
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import (
    Frame,
)
from fabric_ls.analysis.value_ops import _collect_params, _first_item, known_items
from fabric_ls.analysis.values import Const, External, Mapping, Params, Seq, Unknown, Value


class ComprehensionsMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    def _expr_ListComp(self, node: ast.ListComp, frame: Frame) -> Value:
        return self._comprehension(node, frame)

    _expr_SetComp = _expr_ListComp
    _expr_GeneratorExp = _expr_ListComp

    def _expr_DictComp(self, node: ast.DictComp, frame: Frame) -> Value:
        return self._comprehension(node, frame)

    def _comprehension(self, node: Any, frame: Frame) -> Value:
        params: list[Params] = []
        sources: list[Value] = []
        for generator in node.generators:
            source = self._eval(generator.iter, frame)
            params.extend(_collect_params(source))
            sources.append(source)
        elements = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        if any(_calls_fabric(element) for element in elements) or self._library_objects(
            node, elements, frame
        ):
            known = self._comprehension_elements(node, sources, elements, frame)
            if known is not None:
                return known
        if params:
            return Seq(list(params))
        return Unknown(text=frame.module.parsed.segment(node))

    def _library_objects(self, node: Any, elements: list[ast.expr], frame: Frame) -> bool:
        """``[torch.nn.Linear(4, 4) for _ in range(2)]``: objects a library builds, one per item of a
        short known sequence (models that are set up one by one later)."""
        if isinstance(node, ast.DictComp) or len(node.generators) != 1 or node.generators[0].ifs:
            return False
        call = elements[0]
        if not isinstance(call, ast.Call):
            return False
        root: ast.AST = call.func
        while isinstance(root, ast.Attribute):
            root = root.value
        return isinstance(root, ast.Name) and isinstance(frame.lookup(root.id), External)

    def _comprehension_elements(
        self, node: Any, sources: list[Value], elements: list[ast.expr], frame: Frame
    ) -> Optional[Value]:
        """``[fabric.setup(m) for m in models]``: the element runs, in a scope of its own (its names
        do not leak), once per item of a short known sequence (the list it gives is known then), else
        once, on the first item, as a loop's body is (its value is then not known: None)."""
        inner = Frame(frame.module, frame.function, self.trail)
        inner.locals = dict(frame.locals) if frame.locals is not None else {}
        generator = node.generators[0]
        items = known_items(sources[0])
        per_item = (
            len(node.generators) == 1
            and not generator.ifs
            and items is not None
            and 0 < len(items) <= MAX_UNROLLED_ITEMS
        )
        if not per_item:
            for generator, source in zip(node.generators, sources):
                self._assign(generator.target, _first_item(source), inner, node)
            for element in elements:
                self._eval(element, inner)
            return None
        results: list[Value] = []
        keys: list[Value] = []
        for item in items:  # type: ignore[union-attr]
            self._assign(generator.target, item, inner, node)
            values = [self._eval(element, inner) for element in elements]
            results.append(values[-1])
            keys.append(values[0])
        if isinstance(node, ast.DictComp):
            if not all(isinstance(key, Const) and isinstance(key.value, (str, int)) for key in keys):
                return None
            return Mapping({key.value: value for key, value in zip(keys, results)})  # type: ignore[attr-defined]
        return Seq(results)


# A comprehension over a known sequence this long or shorter runs its element once per item.
MAX_UNROLLED_ITEMS = 8


def _calls_fabric(element: ast.AST) -> bool:
    """The element calls a Fabric method itself (``fabric.setup(m)``): only then is it run. Other
    elements (``Block(config, i) for i in range(n)``) stay unevaluated, as the value they give is
    not followed into the list anyway. Kept per node: a comprehension in a loop or a helper is asked often."""
    found = _CALLS_FABRIC.get(element)
    if found is None:
        found = _CALLS_FABRIC[element] = _finds_fabric_call(element)
    return found


_CALLS_FABRIC: weakref.WeakKeyDictionary[ast.AST, bool] = weakref.WeakKeyDictionary()


def _finds_fabric_call(element: ast.AST) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in FABRIC_METHODS
        for node in ast.walk(element)
    )
