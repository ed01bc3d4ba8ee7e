"""Walk a script the way Python would, with abstract values, and report Fabric calls.

One *run* executes the program once. Where the path depends on something the source
does not fix (an ``if`` on a CLI flag, on ``torch.cuda.is_available()``), both sides
run on one state (undone between them through ``trail``) and are joined where they meet
(``join``): a name bound differently becomes a ``Merged`` value whose options carry
guards (``guards``), and Fabric calls are recorded with the guard they happen under.
A statement that needs one of several values runs once per value and is joined; the
run itself forks (``Decisions``, and ``explore`` runs the others) only where two sides
cannot be one state. Loops run their body once (one over a short known sequence whose body sets
something up runs it per item).

The evaluator is split by concern into mixins (statements, conditions, expressions, calls,
parameters, library, fabric_calls, fabric_strategies, hydra_calls, config_files, comprehensions);
``Run`` holds the state they share.
"""

from __future__ import annotations

import ast
import os
from typing import Optional

from fabric_ls.analysis.calls import CallsMixin
from fabric_ls.analysis.comprehensions import ComprehensionsMixin
from fabric_ls.analysis.conditions import ConditionsMixin
from fabric_ls.analysis.config_files import ConfigFilesMixin
from fabric_ls.analysis.events import FabricState, StatementPlace
from fabric_ls.analysis.exits import Handlers
from fabric_ls.analysis.expressions import ExpressionsMixin
from fabric_ls.analysis.fabric_calls import FabricMixin
from fabric_ls.analysis.fabric_strategies import FabricStrategiesMixin
from fabric_ls.analysis.guards import TRUE, Guards
from fabric_ls.analysis.hydra_calls import HydraMixin
from fabric_ls.analysis.join import Break as _Break
from fabric_ls.analysis.join import Continue as _Continue
from fabric_ls.analysis.join import (
    PendingReturn,
    StopRun,
)
from fabric_ls.analysis.join import Return as _Return
from fabric_ls.analysis.library import LibraryMixin
from fabric_ls.analysis.parameters import ParametersMixin
from fabric_ls.analysis.project import Project
from fabric_ls.analysis.resolve_strategy import FabricConfig, ResolvedStrategy, resolve
from fabric_ls.analysis.source import ParsedSource
from fabric_ls.analysis.state import (
    Checker,
    Decisions,
    ExitPoint,
    Frame,
    ModuleEnv,
    Observed,
    SharedAcrossRuns,
    _NoForks,
)
from fabric_ls.analysis.statements import StatementsMixin
from fabric_ls.analysis.strings import StringsMixin
from fabric_ls.analysis.trail import Trail
from fabric_ls.analysis.value_ops import (
    _looks_like_fabric_param,
)
from fabric_ls.analysis.values import (
    ConfigStore,
    Const,
    ContextValue,
    FabricObj,
    FunctionRef,
    Obj,
    Value,
)


class Run(
    StatementsMixin,
    ConditionsMixin,
    ExpressionsMixin,
    ComprehensionsMixin,
    CallsMixin,
    ParametersMixin,
    LibraryMixin,
    StringsMixin,
    FabricMixin,
    FabricStrategiesMixin,
    HydraMixin,
    ConfigFilesMixin,
):
    """One execution of a program; both sides of undecided branches, joined."""

    def __init__(
        self,
        project: Project,
        main: ParsedSource,
        decisions: Decisions,
        check: Checker,
        assumed_strategy: Optional[str] = None,
        force_strategy: bool = False,
        shared: Optional[SharedAcrossRuns] = None,
        guards: Optional[Guards] = None,
    ) -> None:
        self.project = project
        self.main = main
        self.decisions = decisions
        self.check = check
        self.reporting = True
        self.guards = guards if guards is not None else Guards()
        # The combinations of decisions this point of the run is reached under.
        self.guard = TRUE
        self.trail = Trail()
        self.try_depth = 0
        # What the handlers of each ``try`` around this point catch; and the class of the end of the
        # path being taken (the script's ``raise ValueError``), where it is known (exits.py).
        self.try_handlers: list[Handlers] = []
        self.exit_class: Optional[str] = None
        # Of those ``try`` blocks, how many catch what Lightning's checks raise (CallEvent.caught).
        self.catching_fabric_errors = 0
        # Where ``hydra.initialize(...)``, called outside a ``with``, points ``compose``.
        self.hydra_config_dir: Optional[str] = None
        # Hydra's ``ConfigStore.instance()``: one per run, what the script stores in it.
        self.config_store = ConfigStore()
        # Statements being executed that can split on a value (see _exec_statement).
        self.splittable = 0
        # The innermost call of the analysed script being evaluated (CallEvent.via).
        self.script_call: Optional[ast.Call] = None
        # The innermost call being evaluated, and how many Fabric-free helpers are running.
        self.call_node: Optional[ast.Call] = None
        # Every call being evaluated, outermost first, with its file (CallEvent.callers).
        self.call_stack: list[tuple[ParsedSource, ast.Call]] = []
        self.fabric_free_depth = 0
        # Per loop being run: the sides that left its body early (break/continue), to join.
        self.loop_exits: list[list[PendingReturn]] = []
        # Per ``try`` being run: the sides that raised in its body what it may catch, to join after it.
        self.try_exits: list[Optional[list[PendingReturn]]] = []
        # Logs: only grow; both sides of a branch keep what they added.
        self.observed: list[Observed] = []
        self.fabric_records: list[tuple[FabricState, int]] = []
        self.exit_guards: list[ExitPoint] = []
        self.assumed_strategy = assumed_strategy
        self.force_strategy = force_strategy
        # The run ended at the script's own ``raise``/``sys.exit``: a path the author rules out.
        self.exited = False
        self.steps = 0
        self.depth = 0
        # Calls being evaluated, by function: a recursion is followed MAX_RECURSION_DEPTH deep.
        self.active_calls: dict[int, int] = {}
        # A call past MAX_DEPTH was not followed: the analysis is not complete.
        self.calls_too_deep = False
        self.modules: dict[str, ModuleEnv] = {}
        self.shared = shared if shared is not None else SharedAcrossRuns()
        self.helper_modules = self.shared.helper_modules
        self.executed_functions: set[int] = set()
        self.dependencies: set[str] = set()
        self.places: list[StatementPlace] = []
        # Context managers in force (``with fabric.init_module()``): dynamic, so helpers
        # called inside the ``with`` build their models under it too.
        self.contexts: list[ContextValue] = []
        self.eval_depth = 0
        self._relevance = self.shared.statement_relevance
        self._function_relevant = self.shared.function_relevance
        self.main_env = ModuleEnv(main, is_main=True)
        self.modules[main.path] = self.main_env

    # ----- entry points -------------------------------------------------------------

    def run_module(self) -> None:
        self._exec_module(self.main_env)

    def define_module(self) -> None:
        """Run the module's top level for its definitions only: no forks, no reports.

        As a module that something else imports runs it (the entry functions are called from
        outside): ``__name__`` is the module's name, so ``if __name__ == "__main__":`` is not run
        (the run of the module itself runs it)."""
        saved_decisions, saved_reporting = self.decisions, self.reporting
        self.decisions, self.reporting = _NoForks(), False
        globals_ = self.main_env.globals
        saved_name = globals_["__name__"]
        globals_["__name__"] = Const(os.path.splitext(os.path.basename(self.main.path))[0])
        try:
            self._exec_module(self.main_env)
        except StopRun:
            pass
        finally:
            globals_["__name__"] = saved_name
            self.decisions, self.reporting = saved_decisions, saved_reporting
            self.executed_functions.clear()
            self.exited = False
            self.guard = TRUE
            self.steps = 0

    def adopt_definitions(self, env: ModuleEnv) -> int:
        """Take the module's top level as another run defined it (``define_module``), and return
        the trail mark to restore at the end (``Trail.restore_older``): every write to the
        module's objects is recorded after it, so the next run gets the definitions as they were made."""
        self.main_env = env
        self.modules[env.path] = env
        return self.trail.mark()

    def run_function(self, function: FunctionRef, fabric: Optional[FabricState]) -> None:
        """Run a function nobody calls (an entry point such as a CLI target)."""
        if not self.main_env.executed:
            self.define_module()
        args: list[Value] = []
        node = function.node
        params = node.args.args if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if function.owner is not None:
            args.append(Obj(None, self.main.path, cls=function.owner))
            params = params[1:]
        if params and _looks_like_fabric_param(params[0]):
            # Nobody in the program calls it: its Fabric comes from outside.
            if fabric is None:
                fabric = self._outside_fabric()
            args.append(FabricObj(fabric))
        self._call_function(function, args, {}, entry=True)

    def _outside_fabric(self) -> FabricState:
        strategy = ResolvedStrategy(
            None, unknown_reason="the Fabric object is passed in from outside the script"
        )
        if self.assumed_strategy:
            assumed = resolve(FabricConfig(strategy_name=self.assumed_strategy, strategy_given=True))
            strategy = ResolvedStrategy(
                **{**assumed.__dict__, "assumed": True, "cli": not self.force_strategy}
            )
        # Whoever passes it in has launched it, or it is single-device: do not guess FAB009.
        return FabricState(self.main.path, None, strategy, launched=True, escaped=True)  # type: ignore[arg-type]

    # ----- modules -----------------------------------------------------------------

    def _exec_module(self, env: ModuleEnv) -> None:
        env.executed = True
        frame = Frame(env, trail=self.trail)
        try:
            self._exec_block(env.parsed.tree.body, frame)
        except (_Return, _Break, _Continue):
            pass

    def _module_env(self, path: str) -> Optional[ModuleEnv]:
        env = self.modules.get(path) or self.helper_modules.get(path)
        if env is not None:
            self.modules[path] = env
            self.dependencies.add(path)
            return env
        parsed = self.project.read(path)
        if parsed is None:
            return None
        self.dependencies.add(path)
        env = ModuleEnv(parsed, is_main=False)
        self.modules[path] = env
        self.helper_modules[path] = env
        # Helper modules run without forking or reporting: their top level defines things
        # (their own findings belong to their own analysis). On a trail of their own: the module is
        # shared by every run, so no branch or entry function that imported it may undo its top level.
        saved, saved_reporting, saved_steps = self.decisions, self.reporting, self.steps
        saved_guard, saved_exited, saved_trail = self.guard, self.exited, self.trail
        self.decisions, self.reporting, self.trail = _NoForks(), False, Trail()
        try:
            self._exec_module(env)
        except StopRun:
            pass
        finally:
            self.decisions, self.reporting, self.steps = saved, saved_reporting, saved_steps
            self.guard, self.exited, self.trail = saved_guard, saved_exited, saved_trail
        return env
