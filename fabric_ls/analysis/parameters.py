"""Parameters: what a called function's parameters hold (arguments, defaults, the command line).

An entry point nobody calls gets its defaults as choices ("`lr` left at its default 0.1" or given
another value); a ``@click.option(...)``/``@click.argument(...)`` parameter gets what click passes.
"""

from __future__ import annotations

import ast

from fabric_ls.analysis.command_line import dataclass_fields
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import Frame
from fabric_ls.analysis.values import Choice, Const, Obj, Unknown, Value


class ParametersMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    def _bind_params(
        self,
        node: ast.AST,
        frame: Frame,
        args: list[Value],
        keywords: dict[str, Value],
        opaque: bool,
        entry: bool,
    ) -> None:
        arguments: ast.arguments = node.args  # type: ignore[attr-defined]
        positional = [*getattr(arguments, "posonlyargs", []), *arguments.args]
        defaults = arguments.defaults
        first_default = len(positional) - len(defaults)
        module_frame = Frame(frame.module)
        # ``@click.option(...)``: click passes what the decorators say, called with no arguments.
        from_command_line = (
            self._command_line_options(node, module_frame) if getattr(node, "decorator_list", None) else {}
        )
        for index, param in enumerate(positional):
            if index < len(args):
                frame.bind(param.arg, args[index])
            elif param.arg in keywords:
                frame.bind(param.arg, keywords[param.arg])
            elif param.arg in from_command_line:
                frame.bind(param.arg, from_command_line[param.arg])
            elif index >= first_default:
                default = self._eval(defaults[index - first_default], module_frame)
                frame.bind(
                    param.arg, self._entry_value(param.arg, default, node) if entry or opaque else default
                )
            else:
                # Entry points nobody calls (``cmd_train(args)``, ``cmd_eval(args)``) take their
                # arguments from one caller outside: one ``args`` is one value, tested by one decision.
                key = f"entry-param:{param.arg}" if entry else f"param:{id(node)}:{param.arg}"
                frame.bind(param.arg, Unknown(text=param.arg, key=key))
        for param, default_node in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if param.arg in keywords:
                frame.bind(param.arg, keywords[param.arg])
            elif param.arg in from_command_line:
                frame.bind(param.arg, from_command_line[param.arg])
            elif default_node is not None:
                default = self._eval(default_node, module_frame)
                frame.bind(
                    param.arg, self._entry_value(param.arg, default, node) if entry or opaque else default
                )
            else:
                frame.bind(param.arg, Unknown(text=param.arg))
        if arguments.vararg:
            frame.bind(arguments.vararg.arg, Unknown())
        if arguments.kwarg:
            frame.bind(arguments.kwarg.arg, Unknown())

    def _entry_value(self, name: str, default: Value, function: ast.AST) -> Value:
        """A parameter of an entry point: its default, or whatever the caller passes. A default that is
        an instance of the script's own class (``train: TrainArgs = TrainArgs()``, what jsonargparse
        exposes as ``--train.strategy``) has each plain field given or left at its default."""
        if isinstance(default, Obj) and default.cls is not None:
            class_frame = Frame(default.cls.module)
            for field in dataclass_fields(default.cls):
                field_name = field.target.id  # type: ignore[union-attr]
                value = default.attrs.get(field_name)
                if value is None and field.value is not None:
                    value = self._eval(field.value, class_frame)  # the class's default
                if isinstance(value, Const):
                    default.attrs[field_name] = self._entry_value(f"{name}.{field_name}", value, function)
            return default
        if not isinstance(default, Const):
            return default
        shown = repr(default.value)
        key = f"param:{id(function)}:{name}"
        if isinstance(default.value, bool):
            # A flag: the other value that matters is its opposite.
            return Choice(
                key,
                (default, Const(not default.value)),
                (f"`{name}` left at its default {shown}", f"`{name}` is {not default.value!r}"),
            )
        return Choice(
            key,
            (default, Unknown(text=name, key=f"{key}:other")),
            (f"`{name}` left at its default {shown}", f"`{name}` given another value"),
        )
