"""What the command line gives a script: argparse's namespace, click's, typer's and tyro's parameters.

``args.<dest>`` of ``parser.parse_args()`` (argparse's parser or a drop-in one) is the option's
default unless the flag is given (its choices, where listed); with sub-commands, one value per
sub-command. ``@click.option("--strategy", default="deepspeed")`` on ``def main(strategy)`` means:
called as ``main()``, click reads ``sys.argv`` and passes ``strategy`` the same way.
``def train(strategy: str = typer.Option("deepspeed"))``: the default is the option's first argument.
``tyro.cli(Config)``: each field of the dataclass is an option with the field's default.
"""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.values import (
    ArgOption,
    ArgParser,
    Choice,
    ClassRef,
    Const,
    External,
    Merged,
    Subcommands,
    Unknown,
    Value,
)


def option_value(option: ArgOption) -> Value:
    """``args.<dest>``: the default unless the user passes the flag; choices when listed."""
    default = option.default
    key = f"argparse:{id(option.node)}"
    if option.choices:
        ordered = list(option.choices)
        if isinstance(default, Const):
            ordered.sort(key=lambda c: 0 if isinstance(c, Const) and c.value == default.value else 1)
        descriptions = []
        texts = []
        for choice in ordered:
            shown = repr(choice.value) if isinstance(choice, Const) else "?"
            is_default = (
                isinstance(default, Const) and isinstance(choice, Const) and choice.value == default.value
            )
            suffix = " (the default)" if is_default else ""
            descriptions.append(f"`{option.flag}` is {shown}{suffix}")
            texts.append(f"{shown}{suffix}")
        return Choice(key, tuple(ordered), tuple(descriptions), f"`{option.flag}`", tuple(texts))
    if isinstance(default, Const):
        # A boolean flag given on the command line is its opposite (``store_true``).
        given: Value = (
            Const(not default.value)
            if isinstance(default.value, bool)
            else Unknown(text=option.flag, key=f"{key}:given")
        )
        return Choice(
            key,
            (default, given),
            (f"`{option.flag}` left at its default {default.value!r}", f"`{option.flag}` given"),
        )
    return Unknown(text=option.flag)


def namespace_value(parser: ArgParser, attr: str, text: str) -> Value:
    """``args.<attr>`` of ``parser.parse_args()``.

    With sub-commands (``add_subparsers``), one of them runs: the value is one per sub-command,
    under the decision which one the command line names. A sub-command's own option or
    ``set_defaults`` comes first (argparse copies the sub-parser's namespace over the main one)."""
    found = _namespace_value(parser, attr, text, 0)
    return found if found is not None else Unknown(text=text)


def _namespace_value(parser: ArgParser, attr: str, text: str, depth: int) -> Optional[Value]:
    own = _parser_value(parser, attr, text)
    subcommands = parser.subcommands
    if not isinstance(subcommands, Subcommands) or not subcommands.parsers or depth > 4:
        return own
    names = list(subcommands.parsers)
    per_command: list[Value] = []
    for name in names:
        value: Optional[Value] = Const(name) if attr == subcommands.dest else None
        if value is None:
            value = _namespace_value(subcommands.parsers[name], attr, text, depth + 1)
        if value is None:
            value = own
        per_command.append(value if value is not None else Unknown(text=text))
    if all(value is per_command[0] for value in per_command):
        return per_command[0]
    subject = f"`{subcommands.dest}`" if subcommands.dest else "the sub-command"
    return Choice(
        f"subcommand:{id(subcommands.node)}",
        tuple(per_command),
        tuple(f"{subject} is {name!r}" for name in names),
        subject,
        tuple(repr(name) for name in names),
    )


def _parser_value(parser: ArgParser, attr: str, text: str) -> Optional[Value]:
    """What one parser itself gives ``args.<attr>``: its option (``set_defaults`` changes that
    option's default, as argparse does), else its ``set_defaults``; None when it gives nothing."""
    option = parser.options.get(attr)
    default = parser.defaults.get(attr)
    if isinstance(option, Merged):
        # Added on some paths only (``if ...: parser.add_argument(...)``): per path.
        values = tuple(
            option_value(o) if isinstance(o, ArgOption) else Unknown(text=text) for o in option.options
        )
        return Merged(option.key, values, option.descriptions, guards=option.guards)
    if isinstance(option, ArgOption):
        if default is not None:
            option = ArgOption(option.dest, option.flag, default, option.choices, option.node)
        return option_value(option)
    return default


# argparse's parser and the drop-in parsers built on it (``add_argument``, ``parse_args`` alike).
ARGUMENT_PARSERS = frozenset(
    {
        "argparse.ArgumentParser",
        "configargparse.ArgumentParser",
        "configargparse.ArgParser",
        "jsonargparse.ArgumentParser",
        "simple_parsing.ArgumentParser",
    }
)
CLICK_PARAMETERS = frozenset({"click.option", "click.argument"})
TYPER_PARAMETERS = frozenset({"typer.Option", "typer.Argument"})
# ``tyro.cli(Config)``: a dataclass whose fields are the options; ``tyro.cli(main)``: the function's.
TYRO_CLI = frozenset({"tyro.cli"})


def click_parameter(declarations: list[str], is_argument: bool) -> Optional[tuple[str, str]]:
    """The parameter a ``@click.option``/``@click.argument`` fills, and the flag a person types.

    As click names it: an identifier among the declarations, else the first long flag (its
    ``--x/--no-x`` on part), else the first short one; dashes become underscores."""
    names = [d for d in declarations if d.isidentifier()]
    flags = [d.split("/")[0].strip() for d in declarations if d.startswith("-")]
    long_flags = [f for f in flags if f.startswith("--")]
    if is_argument:
        if not names:
            return None
        return names[0].lower(), names[0].upper()
    shown = (long_flags or flags)[0] if flags else None
    if names:
        name = names[0]
    elif shown is not None:
        name = shown.lstrip("-")
    else:
        return None
    return name.replace("-", "_").lower(), shown or name


def click_choices(given: dict[str, ast.expr]) -> Optional[tuple[Value, ...]]:
    """``type=click.Choice(["ddp", "fsdp"])``: the values the option takes."""
    kind = given.get("type")
    if not (isinstance(kind, ast.Call) and kind.args):
        return None
    if not (isinstance(kind.func, ast.Attribute) and kind.func.attr == "Choice") and not (
        isinstance(kind.func, ast.Name) and kind.func.id == "Choice"
    ):
        return None
    values = [item for item in getattr(kind.args[0], "elts", [])]
    if not values or not all(isinstance(v, ast.Constant) for v in values):
        return None
    return tuple(Const(v.value) for v in values)  # type: ignore[attr-defined]


def is_boolean_switch(declarations: list[str]) -> bool:
    """``"--compile/--no-compile"``: a flag that is on or off."""
    return any("/" in d and d.startswith("-") for d in declarations)


def dataclass_fields(cls: ClassRef) -> list[ast.AnnAssign]:
    """The annotated fields of a dataclass and of the dataclasses it derives from, base first."""
    chain: list[ClassRef] = []
    current: Optional[ClassRef] = cls
    while current is not None and len(chain) < 8:
        chain.append(current)
        current = next((b for b in current.bases if isinstance(b, ClassRef)), None)
    fields: dict[str, ast.AnnAssign] = {}
    for klass in reversed(chain):
        for statement in klass.node.body:
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                fields[statement.target.id] = statement
    return list(fields.values())


def literal_choices(annotation: ast.expr) -> Optional[tuple[Value, ...]]:
    """``Literal["ddp", "deepspeed"]``: the values a field may take."""
    if not isinstance(annotation, ast.Subscript):
        return None
    head = annotation.value
    if not (
        (isinstance(head, ast.Name) and head.id == "Literal")
        or (isinstance(head, ast.Attribute) and head.attr == "Literal")
    ):
        return None
    items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if not all(isinstance(item, ast.Constant) for item in items):
        return None
    return tuple(Const(item.value) for item in items)  # type: ignore[attr-defined]


def parser_base(cls: ClassRef, depth: int = 0) -> bool:
    """``class Parser(argparse.ArgumentParser)``: a parser of the script's own, used as argparse's."""
    if depth > 8:
        return False
    for base in cls.bases:
        if isinstance(base, External) and base.qualname in ARGUMENT_PARSERS:
            return True
        if isinstance(base, ClassRef) and parser_base(base, depth + 1):
            return True
    return False
