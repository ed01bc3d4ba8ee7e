"""Calls into packages known by name: torch, argparse (and click, typer, tyro), isinstance, sys.exit."""

from __future__ import annotations

import ast
from typing import Optional

from fabric_ls.analysis.command_line import (
    ARGUMENT_PARSERS,
    CLICK_PARAMETERS,
    TYPER_PARAMETERS,
    TYRO_CLI,
    click_choices,
    click_parameter,
    dataclass_fields,
    is_boolean_switch,
    literal_choices,
    option_value,
)
from fabric_ls.analysis.config_files import CONFIG_FILE_CALLS
from fabric_ls.analysis.hydra_calls import HYDRA_MAIN
from fabric_ls.analysis.join import (
    StopRun,
)
from fabric_ls.analysis.run_state import RunState
from fabric_ls.analysis.state import (
    FABRIC_CLASSES,
    PARAMS_PASSTHROUGH,
    Frame,
)
from fabric_ls.analysis.strategies import STRATEGY_CLASSES, is_subclass
from fabric_ls.analysis.value_ops import (
    _collect_params,
    _items,
    _lightning_base,
    mapping_keys,
)
from fabric_ls.analysis.values import (
    UNKNOWN,
    ArgOption,
    ArgParser,
    BoundMethod,
    Choice,
    ClassRef,
    Const,
    ContextValue,
    External,
    FunctionRef,
    Mapping,
    ModelOutput,
    Namespace,
    Obj,
    Partial,
    Seq,
    SetupModule,
    StrategyAttr,
    StrategyObj,
    Subcommands,
    Unknown,
    Value,
)


class LibraryMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    # ----- known externals ---------------------------------------------------------

    def _external_call(self, qualname: str, node: ast.Call, frame: Frame) -> Value:
        if qualname in FABRIC_CLASSES:
            return self._make_fabric(node, frame, qualname=qualname)
        if qualname.startswith(("hydra.", "omegaconf.")):
            configured = self._hydra_call(qualname, node, frame)
            if configured is not None:
                return configured
        if qualname in CONFIG_FILE_CALLS:
            return self._config_file_call(qualname, node, frame)
        tail = qualname.rsplit(".", 1)[-1]
        if tail in STRATEGY_CLASSES and qualname.startswith(("lightning", "lightning_fabric")):
            args, keywords, _ = self._eval_args(node, frame)
            return self._strategy_object(qualname, keywords, node, frame)
        if tail == "_is_using_cli" and qualname.startswith(("lightning", "lightning_fabric")):
            # Lightning's own test for `fabric run` (``if not _is_using_cli(): fabric.launch()``): true
            # exactly where fabric-ls takes the script to run under it, a declared strategy.
            self._eval_args(node, frame)
            return Const(bool(self.assumed_strategy) and not self.force_strategy)
        if qualname in ARGUMENT_PARSERS:
            _, keywords, _ = self._eval_args(node, frame)
            return new_parser(keywords)
        if qualname in ("torch.no_grad", "torch.inference_mode", "torch.enable_grad"):
            self._eval_args(node, frame)
            return ContextValue("no_grad" if qualname != "torch.enable_grad" else "other")
        if qualname in ("torch.device",):
            args, _, _ = self._eval_args(node, frame)
            first = self._concrete(args[0]) if args else UNKNOWN
            if isinstance(first, Const) and first.value == "meta":
                return ContextValue("meta_device")
            return Obj(node, frame.module.path)
        if qualname in ("sys.exit", "exit", "quit", "os._exit"):
            # ``sys.exit(main())``: the argument runs first.
            self._eval_args(node, frame)
            self.exited, self.exit_class = True, "SystemExit"
            raise StopRun()
        if qualname in ("isinstance",):
            return self._isinstance(node, frame)
        args, keywords, opaque = self._eval_args(node, frame)
        if qualname in ("torch.autograd.grad", "torch.autograd.backward"):
            # An autograd pass through a set-up model's output runs its backward hook, as
            # ``loss.backward()`` does (wrappers.py:230-241): the WGAN-GP gradient penalty.
            tensors = args[0] if args else keywords.get("outputs" if qualname.endswith("grad") else "tensors")
            items = tensors.items if isinstance(tensors, Seq) else [tensors]
            output = next((item for item in items if isinstance(item, ModelOutput)), None)
            if output is not None:
                self._emit(output.fabric, "tensor.backward", node, frame, [], {})
        if qualname == "len" and len(args) == 1 and isinstance(args[0], Seq) and args[0].exact_length:
            return Const(len(args[0].items))
        if qualname == "dataclasses.asdict" and len(args) == 1 and isinstance(args[0], Obj) and args[0].cls:
            # ``Fabric(**dataclasses.asdict(cfg))``: the fields, as set or as the class gives them.
            fields = {}
            for field in dataclass_fields(args[0].cls):
                name = field.target.id  # type: ignore[union-attr]
                value = args[0].attrs.get(name)
                if value is None and field.value is not None:
                    value = self._eval(field.value, Frame(args[0].cls.module))
                fields[name] = value if value is not None else Unknown(text=name)
            return Mapping(fields)
        if qualname == "type" and len(args) == 1 and not keywords:
            # ``type(fabric.strategy)``: its class, per strategy.
            subject = args[0]
            if isinstance(subject, Choice):
                return self._lift(subject, lambda one: self._attribute(one, "__class__", node, frame))
            return self._attribute(subject, "__class__", node, frame)
        if qualname == "getattr" and len(args) in (2, 3) and not keywords and not opaque:
            name = self._concrete(args[1])
            if isinstance(name, Const) and isinstance(name.value, str):
                found = self._attribute(self._concrete(args[0]), name.value, node, frame)
                # With a default, an attribute not known to exist may be the default.
                return found if len(args) == 2 or type(found) is not Unknown else Unknown(text=found.text)
        if qualname in _CONVERSIONS and len(args) == 1 and not keywords and not opaque:
            text = frame.module.parsed.segment(node)
            if isinstance(args[0], Choice):
                return self._lift(args[0], lambda option: _converted(qualname, option, text))
            return _converted(qualname, args[0], text)
        if (
            qualname == "functools.partial"
            and not opaque
            and args
            and (
                isinstance(args[0], (FunctionRef, BoundMethod))
                or (isinstance(args[0], External) and args[0].qualname in FABRIC_CLASSES)
            )
        ):
            return Partial(args[0], args[1:], keywords)
        if qualname == "dict" and not opaque and len(args) <= 1:
            copied = args[0] if args else Mapping({})
            if isinstance(copied, Mapping):
                # ``dict(accelerator="cuda", devices=2)``: a dict with those keys, like the literal.
                return Mapping({**copied.items, **keywords})
        if qualname in ("argparse.Namespace", "types.SimpleNamespace") and not args:
            # ``argparse.Namespace(strategy="deepspeed")`` (a notebook's stand-in for a command line).
            return Obj(node, frame.module.path, attrs=dict(keywords))
        if qualname in TYRO_CLI and args:
            if isinstance(args[0], ClassRef):
                return self._dataclass_from_command_line(args[0], node, frame)
            if isinstance(args[0], FunctionRef):
                # Called with what the command line gives: its defaults unless the flags say otherwise.
                return self._call_function(args[0], [], {}, entry=True)
        if qualname in TYPER_PARAMETERS:
            # ``typer.Option("deepspeed")``: the parameter's default; ``...`` (required) is not one.
            default = args[0] if args else keywords.get("default")
            if isinstance(default, Const) and default.value is not Ellipsis:
                return default
            return Unknown(text=frame.module.parsed.segment(node))
        if qualname in ("sorted", "list", "tuple") and len(args) == 1 and not keywords and not opaque:
            keys = mapping_keys(args[0], sort=qualname == "sorted", is_tuple=qualname == "tuple")
            if keys is not None:
                return keys  # ``choices=sorted(COMMANDS)``: the table's keys are the choices
        if qualname in ("os.environ.get", "os.getenv") and len(args) == 2 and not keywords:
            environment = _environment_default(args[0], args[1])
            if environment is not None:
                return environment
        if qualname == "setattr" and len(args) == 3 and isinstance(args[0], (Obj, Namespace)):
            if isinstance(args[1], Const) and isinstance(args[1].value, str):
                if isinstance(args[0], Namespace):
                    self._parsed_value(args[0], args[1].value, args[1].value)
                place = args[0].attrs if isinstance(args[0], Obj) else args[0].read
                self.trail.set_item(place, args[1].value, args[2], args[0])
                return Const(None)
        if qualname in ("torch.compile",) and args and isinstance(args[0], (Obj, SetupModule, Choice)):
            # The compiled module is the module for Fabric: setup unwraps it (_unwrap_compiled).
            return args[0]
        if qualname in PARAMS_PASSTHROUGH:
            passed = [p for value in args for p in _collect_params(value)]
            if passed:
                return Seq(list(passed))
        if tail in ("DataLoader",) or qualname.endswith("utils.data.DataLoader"):
            obj = Obj(node, frame.module.path, is_dataloader=True)
            return obj
        result = self._generic_result(node, frame, args, keywords)
        if isinstance(result, Obj):
            result.library_class = qualname
        if isinstance(result, Obj) and (qualname.startswith("torch.optim.") and tail[:1].isupper()):
            result.is_optimizer_class = True
        if qualname == "range" and isinstance(result, Obj) and len(args) == 1 and isinstance(args[0], Const):
            if isinstance(args[0].value, int) and not isinstance(args[0].value, bool):
                result.attrs["__length__"] = Const(max(args[0].value, 0))  # a loop may run per item
        return result

    def _isinstance(self, node: ast.Call, frame: Frame) -> Value:
        args, _, _ = self._eval_args(node, frame)
        if len(args) != 2:
            return UNKNOWN
        subject, classes = args
        if isinstance(subject, Choice):
            # ``fabric.strategy`` of one of several Fabric objects: the answer for each.
            return self._lift(subject, lambda option: self._isinstance_of(option, classes, node, frame))
        return self._isinstance_of(subject, classes, node, frame)

    def _isinstance_of(self, subject: Value, classes: Value, node: ast.Call, frame: Frame) -> Value:
        if not isinstance(subject, (StrategyAttr, StrategyObj)):
            return _plain_isinstance(subject, classes, frame.module.parsed.segment(node))
        if isinstance(subject, StrategyAttr):
            class_name = subject.strategy.class_name
        else:
            class_name = subject.class_name
        if class_name is None:
            return Unknown(text=frame.module.parsed.segment(node))
        names: list[str] = []
        for item in _items(classes) if isinstance(classes, Seq) else [classes]:
            if isinstance(item, External):
                names.append(item.qualname.rsplit(".", 1)[-1])
            elif isinstance(item, ClassRef):
                base = _lightning_base(item)
                if base is None:
                    return Unknown(text=frame.module.parsed.segment(node))
                # A user subclass: only the object's own user class matches.
                user = (
                    subject.strategy.user_class if isinstance(subject, StrategyAttr) else subject.user_class
                )
                if user == item.name:
                    return Const(True)
                continue
            else:
                return Unknown(text=frame.module.parsed.segment(node))
        return Const(any(is_subclass(class_name, name) for name in names))

    def _argparse_call(self, parser: ArgParser, attr: str, node: ast.Call, frame: Frame) -> Value:
        args, keywords, _ = self._eval_args(node, frame)
        if attr in ("add_argument", "add"):  # configargparse's ``add`` is ``add_argument``
            flags = [a.value for a in args if isinstance(a, Const) and isinstance(a.value, str)]
            long_flags = [f for f in flags if f.startswith("--")] or flags
            if not long_flags:
                return Const(None)
            flag = long_flags[0]
            dest_value = keywords.get("dest")
            dest = dest_value.value if isinstance(dest_value, Const) else flag.lstrip("-").replace("-", "_")
            default = keywords.get("default", Const(None))
            action = keywords.get("action")
            if isinstance(action, Const) and action.value == "store_true" and "default" not in keywords:
                default = Const(False)
            if isinstance(action, Const) and action.value == "store_false" and "default" not in keywords:
                default = Const(True)
            choices_value = keywords.get("choices")
            choices: Optional[tuple[Value, ...]] = None
            if isinstance(choices_value, Seq) and all(isinstance(c, Const) for c in choices_value.items):
                choices = tuple(choices_value.items)
            self.trail.set_item(parser.options, dest, ArgOption(dest, flag, default, choices, node), parser)
            return Const(None)
        if attr in ("parse_args", "parse_known_args"):
            namespace = Namespace(parser)
            return Seq([namespace, UNKNOWN], is_tuple=True) if attr == "parse_known_args" else namespace
        if attr in ("add_argument_group", "add_mutually_exclusive_group"):
            return parser
        if attr == "set_defaults":
            for dest, value in keywords.items():
                self.trail.set_item(parser.defaults, dest, value, parser)
            return Const(None)
        if attr == "add_subparsers":
            dest = keywords.get("dest")
            subcommands = Subcommands(node, dest.value if isinstance(dest, Const) else None)
            self.trail.set_attr(parser, "subcommands", subcommands)
            return subcommands
        return UNKNOWN

    def _command_line_options(self, function: ast.AST, module_frame: Frame) -> dict[str, Value]:
        """What click passes a function's parameters (its ``@click.option``/``@click.argument``
        decorators), by parameter name: the default unless the flag is given, as an argparse option."""
        found: dict[str, Value] = {}
        for decorator in getattr(function, "decorator_list", ()):
            if isinstance(decorator, ast.Call) and _hydra_main(decorator.func, module_frame):
                positional = [*getattr(function.args, "posonlyargs", []), *function.args.args]  # type: ignore[attr-defined]
                if positional:
                    found[positional[0].arg] = self._hydra_main_config(decorator, module_frame)
                continue
            # By name first: evaluating another decorator's callee could run a property of the script.
            if not (isinstance(decorator, ast.Call) and _names_click_parameter(decorator.func)):
                continue
            callee = self._eval(decorator.func, module_frame)
            if not (isinstance(callee, External) and callee.qualname in CLICK_PARAMETERS):
                continue
            declarations = [
                a.value for a in decorator.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            is_argument = callee.qualname == "click.argument"
            named = click_parameter(declarations, is_argument)
            if named is None:
                continue
            name, flag = named
            given = {k.arg: k.value for k in decorator.keywords if k.arg}
            flag_like = is_boolean_switch(declarations) or _is_true(given.get("is_flag"))
            if "default" in given:
                default = self._eval(given["default"], module_frame)
            elif flag_like:
                default = Const(False)
            elif is_argument or _is_true(given.get("required")):
                default = Unknown(text=flag)  # a value the command line must give
            else:
                default = Const(None)
            found[name] = option_value(ArgOption(name, flag, default, click_choices(given), decorator))
        return found

    def _dataclass_from_command_line(self, cls: ClassRef, node: ast.Call, frame: Frame) -> Value:
        """``tyro.cli(Config)``: an instance whose fields are options (``--num-nodes`` for ``num_nodes``),
        each its default unless the flag is given; a ``Literal[...]`` annotation lists the choices."""
        instance = Obj(node, frame.module.path, cls=cls)
        class_frame = Frame(cls.module)
        for field in dataclass_fields(cls):
            if field.value is None:
                continue
            default = self._eval(field.value, class_frame)
            if not isinstance(default, Const):
                continue
            name = field.target.id  # type: ignore[union-attr]
            flag = "--" + name.replace("_", "-")
            option = ArgOption(name, flag, default, literal_choices(field.annotation), field)
            instance.attrs[name] = option_value(option)
        return instance

    def _subcommand_call(self, subcommands: Subcommands, attr: str, node: ast.Call, frame: Frame) -> Value:
        """``commands.add_parser("train")``: the parser of one sub-command."""
        args, _, _ = self._eval_args(node, frame)
        name = self._concrete(args[0]) if args else None
        if attr != "add_parser" or not (isinstance(name, Const) and isinstance(name.value, str)):
            return UNKNOWN
        parser = ArgParser()
        self.trail.set_item(subcommands.parsers, name.value, parser, subcommands)
        return parser


def _environment_default(name: Value, default: Value) -> Optional[Value]:
    """``os.environ.get("STRATEGY", "deepspeed")``: the default unless the variable is set, which
    the script does not say (like an argparse option's default). One decision per variable, whatever
    default each read gives: every read of it sees the same environment."""
    if not (isinstance(name, Const) and isinstance(name.value, str) and isinstance(default, Const)):
        return None
    variable = name.value
    return Choice(
        f"environ:{variable}",
        (default, Unknown(text=variable, key=f"environ:{variable}:set")),
        (
            f"`{variable}` not set in the environment",
            f"`{variable}` set in the environment",
        ),
    )


def _is_true(node: Optional[ast.expr]) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _names_click_parameter(func: ast.expr) -> bool:
    """``click.option``, ``option`` (imported from click), ``click.argument``, ``argument``."""
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("option", "argument")


def _hydra_main(func: ast.expr, module_frame: Frame) -> bool:
    """``@hydra.main(...)`` or ``@main(...)`` imported from hydra: looked up by name, as imported (a
    decorator of the script's own is not evaluated: that could run a property of the script)."""
    if isinstance(func, ast.Name):
        callee = module_frame.lookup(func.id)
    elif isinstance(func, ast.Attribute) and func.attr == "main" and isinstance(func.value, ast.Name):
        owner = module_frame.lookup(func.value.id)
        callee = External(f"{owner.qualname}.main") if isinstance(owner, External) else None
    else:
        return False
    return isinstance(callee, External) and callee.qualname == HYDRA_MAIN


def new_parser(keywords: dict[str, Value]) -> ArgParser:
    """``ArgumentParser(...)``; with ``parents=[common]``, argparse copies their options (and defaults) in."""
    parser = ArgParser()
    for parent in _items(keywords["parents"]) if isinstance(keywords.get("parents"), Seq) else []:
        if isinstance(parent, ArgParser):
            parser.options.update(parent.options)
            parser.defaults.update(parent.defaults)
    return parser


# Builtin types a literal can be tested against exactly (``isinstance(devices, int)``).
_BUILTIN_TYPES: dict[str, type] = {
    t.__name__: t for t in (int, float, str, bool, bytes, list, tuple, dict, set, frozenset, complex)
}


def _plain_isinstance(subject: Value, classes: Value, text: str) -> Value:
    """``isinstance`` of something other than a strategy: exact for a literal tested against builtin
    types; for a value known only by what it is (a parameter), one answer wherever the same value is
    tested against the same classes (``isinstance(devices, int)`` in a function and in the helper it
    passes ``devices`` to); unknown otherwise."""
    items = _items(classes) if isinstance(classes, Seq) else [classes]
    names = [item.qualname if isinstance(item, External) else None for item in items]
    if isinstance(subject, Const) and names and all(name in _BUILTIN_TYPES for name in names):
        return Const(isinstance(subject.value, tuple(_BUILTIN_TYPES[name] for name in names)))  # type: ignore[index]
    if isinstance(subject, Unknown) and subject.key and names and all(names):
        return Unknown(text=text, key=f"isinstance:{subject.key}:{','.join(names)}")  # type: ignore[arg-type]
    return Unknown(text=text)


# ``int(os.environ.get("NGPU", "1"))``: a plain value, known where its argument is.
_CONVERSIONS: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}


def _converted(qualname: str, argument: Value, text: str) -> Value:
    """A builtin conversion: computed for a literal, an unknown value otherwise (never an object:
    its truth and comparisons are those of a plain value)."""
    if isinstance(argument, Const) and isinstance(argument.value, (str, int, float, bool, type(None))):
        try:
            return Const(_CONVERSIONS[qualname](argument.value), argument.origins)
        except (TypeError, ValueError, OverflowError):
            return Unknown(text=text)
    if isinstance(argument, Unknown) and argument.key:
        return Unknown(text=text, key=f"{argument.key}:{qualname}")  # one value, converted
    return Unknown(text=text)
