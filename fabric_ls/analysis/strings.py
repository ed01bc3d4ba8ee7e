"""Strings the script builds: f-strings, ``"...".format(...)``, ``"..." % x``, ``"_".join([...])``,
``"a" + str(b)`` — a constant where every part is one, one per option where a part is a choice
(``strategy=f"deepspeed_stage_{args.stage}"`` with ``--stage`` in 1, 2, 3)."""

from __future__ import annotations

import ast
import re
from typing import Any, Callable, Optional

from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import Frame
from fabric_ls.analysis.values import Choice, Const, Seq, Unknown, Value

# Choices in one string: their options are combined, up to this many results.
MAX_COMBINED = 64
# A width or precision of five digits or more in a template: the string is not built.
_WIDE = re.compile(r"\d{5,}")
_CONVERSIONS: dict[int, Callable[[Any], str]] = {ord("r"): repr, ord("s"): str, ord("a"): ascii}


class StringsMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    def _expr_JoinedStr(self, node: ast.JoinedStr, frame: Frame) -> Value:
        formatted = [part for part in node.values if isinstance(part, ast.FormattedValue)]
        if not all(_simple(part.value) for part in formatted):
            # ``f"loss {meter.compute():.3f}"``: a log line, not a name Fabric reads; not evaluated.
            return Unknown(text=frame.module.parsed.segment(node))
        parts = [self._eval(part.value, frame) for part in formatted]
        return self._combined(parts, lambda values: _joined(node, values), frame.module.parsed.segment(node))

    def _string_method(
        self, receiver: Const, attr: str, args: list[Value], keywords: dict[str, Value], text: str
    ) -> Optional[Value]:
        """``"{}_{}".format(a, b)``, ``"_".join(parts)`` on a constant string; None: another method."""
        template: str = receiver.value
        if attr == "format":
            count, names = len(args), list(keywords)

            def formatted(values: list[Any]) -> Any:
                return template.format(*values[:count], **dict(zip(names, values[count:])))

            return self._combined(
                [receiver, *args, *keywords.values()], lambda values: formatted(values[1:]), text
            )
        if attr == "join" and len(args) == 1 and not keywords and isinstance(args[0], Seq):
            return self._combined([receiver, *args[0].items], lambda values: template.join(values[1:]), text)
        return None

    def _combined(self, parts: list[Value], build: Callable[[list[Any]], Any], text: str) -> Value:
        """``build`` of the parts' values: a constant string, or a choice of them where parts are
        choices (each option under its conditions); unknown where a part is, or past MAX_COMBINED."""
        count = 1
        for part in parts:
            count *= _option_count(part) if isinstance(part, Choice) else 1
        if count > MAX_COMBINED:
            return Unknown(text=text)
        return self._combine(parts, build, text)

    def _combine(self, parts: list[Value], build: Callable[[list[Any]], Any], text: str) -> Value:
        for index, part in enumerate(parts):
            if isinstance(part, Choice):
                return self._lift(
                    part,
                    lambda option, index=index: self._combine(  # type: ignore[misc]
                        [*parts[:index], option, *parts[index + 1 :]], build, text
                    ),
                )
        constants = [part for part in parts if isinstance(part, Const)]
        if len(constants) < len(parts):
            return Unknown(text=text)
        if any(isinstance(part.value, str) and _WIDE.search(part.value) for part in constants):
            return Unknown(text=text)  # ``"{:>999999999}"``: a field that wide is not built
        try:
            built = build([part.value for part in constants])
        except Exception:
            return Unknown(text=text)
        if not isinstance(built, str):
            return Unknown(text=text)
        return Const(built, tuple(origin for part in constants for origin in part.origins))


def _joined(node: ast.JoinedStr, values: list[Any]) -> str:
    pieces: list[str] = []
    remaining = iter(values)
    for part in node.values:
        if isinstance(part, ast.Constant):
            pieces.append(str(part.value))
            continue
        assert isinstance(part, ast.FormattedValue)
        value = next(remaining)
        if part.conversion in _CONVERSIONS:
            value = _CONVERSIONS[part.conversion](value)
        spec = part.format_spec
        if isinstance(spec, ast.JoinedStr):
            if not all(isinstance(piece, ast.Constant) for piece in spec.values):
                raise ValueError("a format spec that is not constant")
            written = "".join(str(getattr(piece, "value", "")) for piece in spec.values)
            if _WIDE.search(written):
                raise ValueError("a field too wide to build")
            pieces.append(format(value, written))
        else:
            pieces.append(format(value))
    return "".join(pieces)


def _option_count(choice: Choice) -> int:
    return sum(_option_count(option) if isinstance(option, Choice) else 1 for option in choice.options)


def builds_text(left: Value, right: Value) -> bool:
    """``"deepspeed_stage_" + str(args.stage)``: a choice added to a string, or a choice of strings (a
    choice of numbers added to one stays unknown: nothing the rules read is built that way)."""
    if not (isinstance(left, Choice) or isinstance(right, Choice)):
        return False
    return any(
        _text(side) or (isinstance(side, Choice) and any(map(_text, side.options))) for side in (left, right)
    )


def _text(value: Value) -> bool:
    return isinstance(value, Const) and isinstance(value.value, str)


# Calls an f-string part may make and still be a plain value: ``f"deepspeed_stage_{str(stage)}"``.
_PLAIN_CALLS = frozenset({"str", "int", "repr", "len"})


def _simple(node: ast.AST) -> bool:
    """A name, an attribute or item of one, a constant, or a conversion of those."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.Attribute):
        return _simple(node.value)
    if isinstance(node, ast.Subscript):
        return _simple(node.value) and isinstance(node.slice, ast.Constant)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _PLAIN_CALLS:
        return not node.keywords and all(_simple(arg) for arg in node.args)
    return False
