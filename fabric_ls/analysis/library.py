"""Calls into packages known by name: torch, argparse, isinstance, sys.exit."""

from __future__ import annotations

import ast
from typing import Optional

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
)
from fabric_ls.analysis.values import (
    UNKNOWN,
    ArgOption,
    ArgParser,
    Choice,
    ClassRef,
    Const,
    ContextValue,
    External,
    Mapping,
    Namespace,
    Obj,
    Seq,
    SetupModule,
    StrategyAttr,
    StrategyObj,
    Unknown,
    Value,
)


class LibraryMixin(RunState):
    """Part of ``Run`` (fabric_ls.analysis.run); its methods use the run's state."""

    # ----- known externals ---------------------------------------------------------

    def _external_call(self, qualname: str, node: ast.Call, frame: Frame) -> Value:
        if qualname in FABRIC_CLASSES:
            return self._make_fabric(node, frame, qualname=qualname)
        tail = qualname.rsplit(".", 1)[-1]
        if tail in STRATEGY_CLASSES and qualname.startswith(("lightning", "lightning_fabric")):
            args, keywords, _ = self._eval_args(node, frame)
            return self._strategy_object(qualname, keywords, node, frame)
        if qualname in ("argparse.ArgumentParser",):
            self._eval_args(node, frame)
            return ArgParser()
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
            self.exited = True
            raise StopRun()
        if qualname in ("isinstance",):
            return self._isinstance(node, frame)
        args, keywords, opaque = self._eval_args(node, frame)
        if qualname == "dict" and not opaque and len(args) <= 1:
            copied = args[0] if args else Mapping({})
            if isinstance(copied, Mapping):
                # ``dict(accelerator="cuda", devices=2)``: a dict with those keys, like the literal.
                return Mapping({**copied.items, **keywords})
        if qualname in ("os.environ.get", "os.getenv") and len(args) == 2 and not keywords:
            environment = _environment_default(args[0], args[1])
            if environment is not None:
                return environment
        if qualname == "setattr" and len(args) == 3 and isinstance(args[0], Obj):
            if isinstance(args[1], Const) and isinstance(args[1].value, str):
                self.trail.set_item(args[0].attrs, args[1].value, args[2], args[0])
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
            return Unknown(text=frame.module.parsed.segment(node))
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
        if attr == "add_argument":
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
        return UNKNOWN


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
