"""Abstract values the interpreter computes while it walks a script."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from fabric_ls.analysis.trail import uids as _ids
from fabric_ls.model import Origin


class Evidence:
    """Where a value came from, kept cheap: the span is only computed when a message needs it."""

    __slots__ = ("parsed", "node", "note")

    def __init__(self, parsed: Any, node: ast.AST, note: str) -> None:
        self.parsed = parsed
        self.node = node
        self.note = note

    def to_origin(self) -> Origin:
        return Origin(self.parsed.path, self.parsed.span(self.node), self.note)


class Value:
    """Base of every abstract value."""


@dataclass(eq=False)
class Unknown(Value):
    """Nothing is known (a value from outside the script, or beyond our reach)."""

    reason: str = ""
    # Source text of the expression, for conditions ("`args.big`").
    text: str = ""
    # What it is, where that is known (a parameter, an attribute of an object): tests of the
    # same unknown value anywhere are one decision ("`hw.tpu`" in two helpers).
    key: str = ""
    # Certainly True or False (a comparison, a ``not``): where it is not true, it is False.
    boolean: bool = False


UNKNOWN = Unknown()


@dataclass(eq=False)
class Const(Value):
    """A Python literal (str, int, float, bool, None, or containers of literals)."""

    value: Any
    origins: tuple[Evidence, ...] = ()


@dataclass(eq=False)
class Choice(Value):
    """A value picked from outside with known options (argparse choices, parameter defaults).

    Read lazily: the run forks only where a concrete value is needed.
    """

    key: str
    options: tuple[Value, ...]
    descriptions: tuple[str, ...]
    # For conditions that name several options at once: "`--strategy` is 'ddp' or 'fsdp'".
    subject: Optional[str] = None
    option_texts: Optional[tuple[str, ...]] = None


@dataclass(eq=False)
class Merged(Choice):
    """What a place holds after two paths met: each option with the guard it holds under.

    Made where both sides of an ``if`` ran on one state and bound a name (or an
    attribute) differently; read lazily, like a Choice, but its options carry guards
    (fabric_ls.analysis.guards) instead of being one decision's options.
    """

    guards: tuple[int, ...] = ()


@dataclass(eq=False)
class Seq(Value):
    """A list or tuple of abstract values."""

    items: list[Value]
    is_tuple: bool = False
    uid: int = field(default_factory=lambda: next(_ids))
    # Written with an element of its own (``["a"]``, not ``[*rest]``): never empty, whatever is appended
    # (a loop's appends may not happen: a list filled by one is not known to be non-empty).
    nonempty: bool = False
    # A display without ``*rest``: how many items it was written with (-1: not one). While it still
    # holds that many, they are all it holds (an append in a loop that may not run changes the count).
    written_length: int = -1

    @property
    def exact_length(self) -> bool:
        return self.written_length == len(self.items)


@dataclass(eq=False)
class Mapping(Value):
    """A dict literal with constant keys."""

    items: dict[Any, Value]
    uid: int = field(default_factory=lambda: next(_ids))


class LazyItems(dict):
    """A configuration node's items, each built when first read: a composition has thousands of
    values (every option of every group), and a script reads a few. Whole-mapping reads build them
    all, in the files' order."""

    def __init__(self, builders: dict[str, Callable[[], "Value"]]) -> None:
        super().__init__()
        self._order = list(builders)
        self._builders = builders

    def _build(self, key: Any) -> None:
        builder = self._builders.pop(key, None) if self._builders else None
        if builder is not None:
            dict.__setitem__(self, key, builder())

    def _build_all(self) -> None:
        if not self._builders:
            return
        for key in list(self._builders):
            self._build(key)
        built = {key: dict.pop(self, key) for key in self._order if dict.__contains__(self, key)}
        rest = dict(dict.items(self))
        dict.clear(self)
        dict.update(self, built)
        dict.update(self, rest)

    def __getitem__(self, key: Any) -> Value:
        self._build(key)
        return dict.__getitem__(self, key)

    def get(self, key: Any, default: Any = None) -> Any:
        self._build(key)
        return dict.get(self, key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._builders or dict.__contains__(self, key)

    def __setitem__(self, key: Any, value: Value) -> None:
        self._builders.pop(key, None)
        dict.__setitem__(self, key, value)

    def __delitem__(self, key: Any) -> None:
        if self._builders.pop(key, None) is None:
            dict.__delitem__(self, key)

    def pop(self, key: Any, *default: Any) -> Any:
        self._build(key)
        return dict.pop(self, key, *default)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._build(key)
        return dict.setdefault(self, key, default)

    def update(self, *others: Any, **more: Any) -> None:
        for key, value in dict(*others, **more).items():
            self[key] = value

    def __len__(self) -> int:
        return dict.__len__(self) + len(self._builders)

    def __iter__(self) -> Iterator[Any]:
        self._build_all()
        return dict.__iter__(self)

    def keys(self) -> Any:
        self._build_all()
        return dict.keys(self)

    def values(self) -> Any:
        self._build_all()
        return dict.values(self)

    def items(self) -> Any:
        self._build_all()
        return dict.items(self)

    def copy(self) -> dict:
        self._build_all()
        return dict(dict.items(self))

    def __repr__(self) -> str:
        self._build_all()
        return dict.__repr__(self)

    def built_values(self) -> list[Value]:
        """The values read (or written) so far, without building the rest."""
        return list(dict.values(self))


@dataclass(eq=False)
class ConfigStore(Value):
    """Hydra's ``ConfigStore.instance()``: the configs the script stores, by ``group/name`` (each as
    plain data, what its dataclass's defaults or its dict give)."""

    entries: dict[str, Any] = field(default_factory=dict)
    uid: int = field(default_factory=lambda: next(_ids))


@dataclass(eq=False)
class CommandLineConfig(Value):
    """``OmegaConf.from_cli()``: whatever the command line sets (``fabric.strategy=ddp``)."""


@dataclass(eq=False)
class ConfigMapping(Mapping):
    """A node of a Hydra/OmegaConf configuration: a mapping whose keys read as attributes too
    (``cfg.fabric.strategy`` and ``cfg["fabric"]["strategy"]``)."""

    path: str = ""


# The ``library_class`` of what ``model.state_dict()`` gives: tensors by name, never a module.
STATE_DICT = "torch.nn.Module.state_dict"


@dataclass(eq=False)
class Obj(Value):
    """An object the script creates: a model, an optimizer, a dataloader, anything.

    What it is becomes clear from how it is used; what matters is recorded at birth.
    """

    created_at: Optional[ast.AST] = None
    created_path: str = ""
    name: str = ""
    # Parameters were on the meta device at creation (init_module(empty_init=True)
    # under FSDP/ModelParallel, or ``with torch.device("meta")``).
    meta: bool = False
    # Built inside ``init_module(empty_init=True)``, whatever this path's strategy made of it (under
    # another strategy of the same Fabric its parameters are on the meta device).
    under_empty_init: bool = False
    # Parameter snapshots this object was built from (an optimizer over a model).
    params: tuple["Params", ...] = ()
    is_dataloader: bool = False
    is_optimizer_class: bool = False
    # The library class or function that built it, where the call resolved to one
    # (``torch.optim.lr_scheduler.StepLR``): rules tell schedulers from optimizers by it.
    library_class: str = ""
    attrs: dict[str, Value] = field(default_factory=dict)
    cls: Optional["ClassRef"] = None
    # Where it was built and where it was set up (StatementPlace), for fixes.
    created_place: Any = None
    setup_place: Any = None
    uid: int = field(default_factory=lambda: next(_ids))
    # Where the object exists (a guard, fabric_ls.analysis.guards): built on one side of a branch.
    existence_guard: int = 1
    # Once bound to a name, its truth is one decision wherever it is tested (StatementsMixin._identified).
    truth_key: str = ""


@dataclass(eq=False)
class FilePath(Obj):
    """A file the script names and may read a configuration from (fabric_ls.analysis.config_files):
    ``Path("configs/train.yaml")`` (form "path"), ``open(...)`` of it (form "handle"), or the text
    ``.read()`` gave (form "text"). ``relative``: the path as the script writes it."""

    relative: str = ""
    form: str = "path"


@dataclass(eq=False)
class Params(Value):
    """``model.parameters()`` taken at one moment: meta then? set up then?"""

    source: Obj
    meta: bool
    set_up: bool
    at: Optional[ast.AST] = None


@dataclass(eq=False)
class SetupModule(Value):
    """What ``fabric.setup``/``setup_module`` returned for a model."""

    inner: Obj
    fabric: "FabricObj"
    at: Optional[ast.AST] = None


@dataclass(eq=False)
class SetupOptimizer(Value):
    inner: Obj
    fabric: "FabricObj"


@dataclass(eq=False)
class SetupDataLoader(Value):
    inner: Value
    fabric: "FabricObj"


@dataclass(eq=False)
class LoaderBatch(Value):
    """An item of a DataLoader that was not set up (``for x, y in loader``), or a part of it: its
    tensors stay where the loader made them (the CPU) until moved (FAB037)."""

    loader: "Obj"


@dataclass(eq=False)
class ModelOutput(Value):
    """A tensor computed through a set-up model: ``loss.backward()`` on it hooks Fabric."""

    fabric: "FabricObj"


@dataclass(eq=False)
class StrategyObj(Value):
    """A strategy object such as ``DeepSpeedStrategy(stage=3)``."""

    class_name: str
    user_class: Optional[str] = None
    options: dict[str, Value] = field(default_factory=dict)
    package: str = "lightning.fabric"
    origins: tuple[Evidence, ...] = ()
    node: Optional[ast.Call] = None
    path: str = ""


@dataclass(eq=False)
class StrategyAttr(Value):
    """``fabric.strategy``: isinstance checks against it are decided per run."""

    fabric: "FabricObj"
    # Which of the Fabric's strategies, where it has several (FabricState.options).
    chosen: Any = None  # fabric_ls.analysis.resolve_strategy.ResolvedStrategy

    @property
    def strategy(self) -> Any:
        return self.chosen if self.chosen is not None else self.fabric.site.strategy

    def read_key(self) -> tuple[Any, ...]:
        """What the interpreter reads from it: isinstance (the class) and ``zero_stage_3``. Two
        strategies alike in these are one value (a read of anything else is an unknown value)."""
        strategy = self.strategy
        return (strategy.class_name, strategy.user_class, strategy.zero_stage)


@dataclass(eq=False)
class FabricObj(Value):
    """One ``Fabric(...)`` object in one run."""

    site: Any  # fabric_ls.analysis.events.FabricState
    uid: int = field(default_factory=lambda: next(_ids))


@dataclass(eq=False)
class ContextValue(Value):
    """A context manager that changes how models are created in its body."""

    kind: str  # "init_module" | "meta_device" | "no_backward_sync" | "hydra_initialize" | "other"
    fabric: Optional[FabricObj] = None
    empty_init: Optional[bool] = None
    # ``with hydra.initialize(config_path=...)``: where ``compose`` finds the config files.
    config_dir: str = ""


@dataclass(eq=False)
class FunctionRef(Value):
    node: ast.AST  # FunctionDef | AsyncFunctionDef | Lambda
    module: Any  # fabric_ls.analysis.state.ModuleEnv
    owner: Optional["ClassRef"] = None
    # A function defined inside another: the frame it was defined in, whose names it reads (a closure).
    closure: Any = None  # fabric_ls.analysis.state.Frame


@dataclass(eq=False)
class BoundMethod(Value):
    function: FunctionRef
    receiver: Value


@dataclass(eq=False)
class StrategyClass(Value):
    """``type(fabric.strategy)``, ``fabric.strategy.__class__`` of a strategy whose class is known."""

    name: str  # the user's subclass, else Lightning's class


@dataclass(eq=False)
class FabricMethod(Value):
    """A Fabric method not called where it is read (``setup = getattr(fabric, "setup_module")``):
    calling it is that Fabric call."""

    fabric: Value  # FabricObj
    name: str


@dataclass(eq=False)
class Partial(Value):
    """``functools.partial(train, cfg)``: a function of the script with its first arguments given
    (``fabric.launch(partial(train, cfg))`` runs ``train(cfg, fabric)``), or Fabric's class with
    some of its arguments (``partial(Fabric, accelerator="cuda")``)."""

    function: Value  # FunctionRef | BoundMethod | External (a Fabric class)
    args: list[Value]
    keywords: dict[str, Value]


@dataclass(eq=False)
class ClassRef(Value):
    node: ast.ClassDef
    module: Any
    bases: list[Value] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.node.name


@dataclass(eq=False)
class External(Value):
    """Something imported from a package we know by its import path (``torch.optim.Adam``)."""

    qualname: str


@dataclass(eq=False)
class ModuleRef(Value):
    """A workspace module imported as a whole (``import helpers``)."""

    module: Any


@dataclass(eq=False)
class ArgParser(Value):
    """An ``argparse.ArgumentParser`` (or one sub-command's parser) and the options added so far."""

    options: dict[str, "ArgOption"] = field(default_factory=dict)
    uid: int = field(default_factory=lambda: next(_ids))
    # ``set_defaults(func=train)``: attributes of the namespace no option gives.
    defaults: dict[str, Value] = field(default_factory=dict)
    # ``add_subparsers()``: the sub-commands, one of which each command line runs.
    subcommands: Optional["Subcommands"] = None


@dataclass(eq=False)
class Subcommands(Value):
    """What ``parser.add_subparsers(dest=...)`` returns: a parser per sub-command (``add_parser``)."""

    node: ast.AST
    dest: Optional[str] = None
    parsers: dict[str, ArgParser] = field(default_factory=dict)
    uid: int = field(default_factory=lambda: next(_ids))


@dataclass
class ArgOption:
    dest: str
    flag: str
    default: Value
    choices: Optional[tuple[Value, ...]]
    node: ast.AST


@dataclass(eq=False)
class Namespace(Value):
    """``parser.parse_args()``."""

    parser: ArgParser
    # ``args.<attr>`` as the parse gave it (kept once read) or as the script set it since.
    read: dict[str, Value] = field(default_factory=dict)
    uid: int = field(default_factory=lambda: next(_ids))
