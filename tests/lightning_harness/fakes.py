"""Fake the machine, never Lightning: make the real ``lightning`` 2.6.6 believe it runs on GPUs or TPUs.

This module follows the recipe in ``/work/shared/NOTES-fabric-on-cpu.md``. Only the environment is replaced:
environment variables, CUDA device discovery, the ``deepspeed``/``torch_xla`` packages, child-process
creation by the launchers, the process group (a real 1-rank gloo group over an in-memory ``HashStore``) and
torch's FSDP wrapper. Every ``Fabric`` method, every ``_validate_*`` check, the connector, and every
strategy's own checks and ``raise`` statements run unmodified, in ``lightning.fabric`` and
``lightning_fabric`` alike.

It runs inside the harness worker process (see ``_worker.py``), never in the pytest process.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import sys
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Callable, Iterator

from . import session, stubs

PACKAGES = ("lightning.fabric", "lightning_fabric")

# Variables that select a cluster environment, a rank, a strategy or a config from outside the script.
_CLEARED_PREFIXES = (
    "LT_",
    "SLURM_",
    "LSB_",
    "JSM_NAMESPACE_",
    "OMPI_",
    "PMI_",
    "PMIX_",
    "TORCHELASTIC_",
    "TPU_",
    "XLA_",
    "PJRT_",
)
_CLEARED_NAMES = (
    "PL_DEEPSPEED_CONFIG_PATH",
    "PL_GLOBAL_SEED",
    "PL_SEED_WORKERS",
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "NODE_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
)
# A fixed address and port: no port probing, and nothing listens on it (the process group is in memory).
_FIXED_ENV = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


@dataclass(frozen=True)
class Profile:
    """A fake machine: ``cuda_devices`` GPUs and ``tpu_cores`` TPU cores (both 0 is the real CPU machine)."""

    name: str
    cuda_devices: int
    tpu_cores: int


def parse_profile(name: str) -> Profile:
    """``"gpu<N>"`` (N fake CUDA GPUs), ``"tpu<N>"`` (N fake TPU cores) or ``"cpu"`` (no accelerator)."""
    if name == "cpu":
        return Profile(name, 0, 0)
    match = re.fullmatch(r"(gpu|tpu)([1-9][0-9]*)", name)
    if match is None:
        raise ValueError(
            f"Unknown profile {name!r}: use 'cpu', 'gpu<N>' (e.g. 'gpu8', 'gpu1') or 'tpu<N>' ('tpu8')."
        )
    count = int(match.group(2))
    return Profile(name, count, 0) if match.group(1) == "gpu" else Profile(name, 0, count)


def clean_environment(env: dict[str, str] | None = None) -> None:
    """Remove variables that would change strategy resolution, fix the master address, then apply ``env``."""
    for key in list(os.environ):
        if key.startswith(_CLEARED_PREFIXES) or key in _CLEARED_NAMES:
            del os.environ[key]
    os.environ.update(_FIXED_ENV)
    os.environ.update(env or {})


def init_memory_process_group(timeout: timedelta | None = None) -> None:
    """A real gloo process group of one rank over an in-memory store (no sockets), unless one exists."""
    import torch.distributed as dist

    if dist.is_initialized():
        return
    options: dict[str, Any] = {"timeout": timeout} if timeout is not None else {}
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1, **options)


class _PlaceholderChild:
    """Recorded instead of a ``subprocess.Popen`` child: the harness runs only global rank 0."""

    def __init__(self, local_rank: int) -> None:
        self.local_rank = local_rank
        self.pid = -1
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def kill(self) -> None:
        pass

    def send_signal(self, sig: int) -> None:
        pass


def _replace_in_loaded_modules(original: object, replacement: object) -> None:
    """Rebind every Lightning module-level name bound to ``original`` (``from ... import`` copies)."""
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith(("lightning", "lightning_fabric")):
            continue
        for attribute, value in list(vars(module).items()):
            if value is original:
                setattr(module, attribute, replacement)


def _set_requirement(requirement: Any, available: bool) -> None:
    """Decide a ``RequirementCache`` (shared by every module that imported it) without looking at the disk."""
    requirement.available = available
    requirement.message = (
        f"{requirement.requirement!r} {'met' if available else 'not met'} (faked by the harness)"
    )


def _fake_cuda(package: str, num_devices: int) -> None:
    import importlib

    import torch

    cuda = importlib.import_module(f"{package}.accelerators.cuda")

    def num_cuda_devices() -> int:
        return num_devices

    def is_cuda_available() -> bool:
        return num_devices > 0

    def get_parallel_devices(devices: list[int]) -> list[torch.device]:
        # CPU devices that keep the index, so DeepSpeed's device-index check (FAB027) stays real.
        return [torch.device("cpu", i) for i in devices]

    def setup_device(self: Any, device: torch.device) -> None:
        pass

    def teardown(self: Any) -> None:
        pass

    _replace_in_loaded_modules(cuda.num_cuda_devices, num_cuda_devices)
    _replace_in_loaded_modules(cuda.is_cuda_available, is_cuda_available)
    accelerator = cuda.CUDAAccelerator
    accelerator.get_parallel_devices = staticmethod(get_parallel_devices)
    accelerator.setup_device = setup_device
    accelerator.teardown = teardown


def _fake_requirements(package: str, profile: Profile) -> None:
    import importlib

    xla = importlib.import_module(f"{package}.accelerators.xla")
    deepspeed = importlib.import_module(f"{package}.strategies.deepspeed")
    for requirement in (deepspeed._DEEPSPEED_AVAILABLE, deepspeed._DEEPSPEED_GREATER_EQUAL_0_16):
        _set_requirement(requirement, True)
    has_tpu = profile.tpu_cores > 0
    for name in ("_XLA_AVAILABLE", "_XLA_GREATER_EQUAL_2_1", "_XLA_GREATER_EQUAL_2_5"):
        if hasattr(xla, name):
            _set_requirement(getattr(xla, name), has_tpu)
    accelerator = xla.XLAAccelerator
    accelerator.auto_device_count.cache_clear()
    accelerator.is_available.cache_clear()


def _fake_launchers(package: str) -> None:
    import importlib

    multiprocessing = importlib.import_module(f"{package}.strategies.launchers.multiprocessing")
    subprocess_script = importlib.import_module(f"{package}.strategies.launchers.subprocess_script")
    xla_launcher = importlib.import_module(f"{package}.strategies.launchers.xla")
    distributed = importlib.import_module(f"{package}.utilities.distributed")

    def call_children_scripts(self: Any) -> None:
        # The real bookkeeping check ("can only create subprocesses once", local_rank != 0) and the real
        # environment variables; placeholders instead of Popen children.
        self._check_can_spawn_children()
        os.environ["MASTER_ADDR"] = self.cluster_environment.main_address
        os.environ["MASTER_PORT"] = str(self.cluster_environment.main_port)
        os.environ["NODE_RANK"] = str(self.cluster_environment.node_rank())
        os.environ["LOCAL_RANK"] = str(self.cluster_environment.local_rank())
        os.environ["WORLD_SIZE"] = f"{self.num_processes * self.num_nodes}"
        for local_rank in range(1, self.num_processes):
            self.procs.append(_PlaceholderChild(local_rank))

    def launch_process_observer(child_processes: list[Any]) -> None:
        pass

    def multiprocessing_launch(self: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        # The real entry checks, then the function runs here as process 0 instead of in spawned children.
        if self._start_method in ("fork", "forkserver"):
            multiprocessing._check_bad_cuda_fork()
        if self._start_method == "spawn":
            multiprocessing._check_missing_main_guard()
            # Each spawned child imports the script again before it runs the function (FAB032).
            session.import_main_as_spawned_child()
        os.environ["MASTER_PORT"] = str(self._strategy.cluster_environment.main_port)
        distributed._set_num_threads_if_needed(num_processes=self._strategy.num_processes)
        os.environ["LOCAL_RANK"] = "0"
        return function(*args, **kwargs)

    def xla_launch(self: Any, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    subprocess_script._SubprocessScriptLauncher._call_children_scripts = call_children_scripts
    _replace_in_loaded_modules(subprocess_script._launch_process_observer, launch_process_observer)
    multiprocessing._MultiProcessingLauncher.launch = multiprocessing_launch
    xla_launcher._XLALauncher.launch = xla_launch


def _fake_process_group(package: str) -> None:
    import importlib

    import torch

    distributed = importlib.import_module(f"{package}.utilities.distributed")

    def init_dist_connection(
        cluster_environment: Any,
        torch_distributed_backend: str,
        global_rank: int | None = None,
        world_size: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not torch.distributed.is_available():
            raise RuntimeError(
                "torch.distributed is not available. Cannot initialize distributed process group"
            )
        os.environ["MASTER_ADDR"] = cluster_environment.main_address
        os.environ["MASTER_PORT"] = str(cluster_environment.main_port)
        init_memory_process_group(kwargs.get("timeout"))

    _replace_in_loaded_modules(distributed._init_dist_connection, init_dist_connection)


def _install_fsdp_stand_in() -> None:
    """Replace torch's FSDP wrapper (it needs CUDA device ids) by a subclass that keeps the parameter identity
    behaviour Fabric's checks depend on: meta modules are materialised into new ``Parameter`` objects, and
    with ``use_orig_params=False`` the parameters are swapped for new ones tagged ``_fsdp_flattened``."""
    import torch
    import torch.distributed.fsdp as fsdp_package
    import torch.distributed.fsdp.fully_sharded_data_parallel as fsdp_module
    from torch import nn

    real_fsdp = fsdp_module.FullyShardedDataParallel
    if getattr(real_fsdp, "_harness_stand_in", False):
        return

    def materialize_meta_module(module: nn.Module) -> None:
        tensors = [*module.parameters(), *module.buffers()]
        if not any(tensor.is_meta for tensor in tensors):
            return
        with torch.no_grad():
            for submodule in module.modules():
                own_state = [*submodule.parameters(recurse=False), *submodule.buffers(recurse=False)]
                if own_state:
                    submodule.to_empty(device=torch.device("cpu"), recurse=False)
                    reset_parameters = getattr(submodule, "reset_parameters", None)
                    if callable(reset_parameters):
                        reset_parameters()

    wrapper_names = {
        "_forward_module",
        "_original_module",
        "_fsdp_wrapped_module",
        "_checkpoint_wrapped_module",
    }

    def local_tensor(value: Any) -> Any:
        """Sharded checkpoints load as ShardedTensors; on one rank the single local shard is the tensor."""
        from torch.distributed._shard.sharded_tensor import ShardedTensor

        return value.local_tensor() if isinstance(value, ShardedTensor) else value

    def optimizer_parameter_names(model: nn.Module, optim: torch.optim.Optimizer) -> list[str]:
        """The optimizer's parameters in ``state_dict()`` order, named as in the unwrapped model."""
        names: dict[int, str] = {}
        for name, param in model.named_parameters():
            names.setdefault(
                id(param), ".".join(part for part in name.split(".") if part not in wrapper_names)
            )
        params = [param for group in optim.param_groups for param in group["params"]]
        return [names.get(id(param), str(index)) for index, param in enumerate(params)]

    class FullyShardedDataParallel(real_fsdp):  # type: ignore[misc, valid-type]
        _harness_stand_in = True

        def __init__(
            self, module: nn.Module, *args: Any, use_orig_params: bool = False, **kwargs: Any
        ) -> None:
            # FSDP's own __init__ (and _FSDPState's) would need a CUDA device handle and a real process group.
            nn.Module.__init__(self)
            materialize_meta_module(module)
            if not use_orig_params:
                stubs._replace_parameters(module, _fsdp_flattened=True)
            self._use_orig_params = use_orig_params
            self._fsdp_wrapped_module = module

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self._fsdp_wrapped_module(*args, **kwargs)

        def _apply(self, *args: Any, **kwargs: Any) -> Any:
            return nn.Module._apply(self, *args, **kwargs)

        def named_parameters(self, *args: Any, **kwargs: Any) -> Any:
            return nn.Module.named_parameters(self, *args, **kwargs)

        def named_buffers(self, *args: Any, **kwargs: Any) -> Any:
            return nn.Module.named_buffers(self, *args, **kwargs)

        @contextlib.contextmanager
        def no_sync(self) -> Iterator[None]:
            yield

        def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
            return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm, norm_type)

        def state_dict(self, *args: Any, **kwargs: Any) -> Any:
            return self._fsdp_wrapped_module.state_dict(*args, **kwargs)

        def load_state_dict(self, *args: Any, **kwargs: Any) -> Any:
            return self._fsdp_wrapped_module.load_state_dict(*args, **kwargs)

        # One rank holds everything, so every state-dict type is the plain local state dict.
        @staticmethod
        @contextlib.contextmanager
        def state_dict_type(
            module: nn.Module, state_dict_type: Any, *args: Any, **kwargs: Any
        ) -> Iterator[None]:
            yield

        @staticmethod
        def optim_state_dict(
            model: nn.Module, optim: torch.optim.Optimizer, *args: Any, **kwargs: Any
        ) -> Any:
            # Like FSDP's: the optimizer state keyed by the parameters' names instead of their positions.
            names = optimizer_parameter_names(model, optim)
            local = optim.state_dict()
            return {
                "state": {names[index]: value for index, value in local["state"].items()},
                "param_groups": [
                    {**group, "params": [names[index] for index in group["params"]]}
                    for group in local["param_groups"]
                ],
            }

        @staticmethod
        def optim_state_dict_to_load(
            model: nn.Module, optim: Any, optim_state_dict: Any, **kwargs: Any
        ) -> Any:
            positions = {name: index for index, name in enumerate(optimizer_parameter_names(model, optim))}
            return {
                "state": {
                    positions[name]: {key: local_tensor(item) for key, item in value.items()}
                    for name, value in optim_state_dict.get("state", {}).items()
                },
                "param_groups": [
                    {**group, "params": [positions[name] for name in group["params"]]}
                    for group in optim_state_dict["param_groups"]
                ],
            }

    FullyShardedDataParallel.__name__ = FullyShardedDataParallel.__qualname__ = "FullyShardedDataParallel"
    fsdp_package.FullyShardedDataParallel = FullyShardedDataParallel
    fsdp_module.FullyShardedDataParallel = FullyShardedDataParallel


def _install_cuda_autocast_on_cpu() -> None:
    """``torch.autocast("cuda")`` (what Fabric's ``MixedPrecision`` uses on the fake GPUs) autocasts on the
    CPU, where the tensors are; the CPU build of torch would otherwise disable it and leave fp16 inputs
    meeting fp32 weights."""
    import torch

    real_autocast = torch.amp.autocast_mode.autocast
    if getattr(real_autocast, "_harness_stand_in", False):
        return

    class autocast(real_autocast):  # type: ignore[misc, valid-type]  # noqa: N801 - torch's name
        _harness_stand_in = True

        def __init__(self, device_type: str, *args: Any, **kwargs: Any) -> None:
            super().__init__("cpu" if device_type == "cuda" else device_type, *args, **kwargs)

    torch.autocast = autocast  # type: ignore[misc]
    torch.amp.autocast = autocast  # type: ignore[misc]


def install(profile: Profile, env: dict[str, str] | None = None) -> None:
    """Install every fake for ``profile`` (this imports ``lightning`` and ``lightning_fabric``).

    Call it once per process, before any user script runs.
    """
    clean_environment(env)
    stubs.install_deepspeed_stub(init_memory_process_group)
    if profile.tpu_cores:
        stubs.install_torch_xla_stub(profile.tpu_cores)

    import lightning  # noqa: F401  (also imports lightning.fabric and lightning.pytorch)
    import lightning_fabric  # noqa: F401

    _install_fsdp_stand_in()
    if profile.cuda_devices:
        _install_cuda_autocast_on_cpu()
    for package in PACKAGES:
        _fake_requirements(package, profile)
        _fake_cuda(package, profile.cuda_devices)
        _fake_launchers(package)
        _fake_process_group(package)


class StateSnapshot:
    """Process-global state that one script may change and the next must not see (used by ``run_many``)."""

    def __init__(self) -> None:
        import torch

        self.environ = dict(os.environ)
        self.warning_filters = list(warnings.filters)
        self.default_dtype = torch.get_default_dtype()
        self.num_threads = torch.get_num_threads()
        self.rank_zero_holders = [
            holder
            for module_name, module in list(sys.modules.items())
            if module is not None and module_name.startswith(("lightning", "lightning_fabric"))
            for holder in (
                getattr(module, "rank_zero_only", None),
                getattr(module, "utils_rank_zero_only", None),
            )
            if holder is not None and hasattr(holder, "rank")
        ]
        self.ranks = [holder.rank for holder in self.rank_zero_holders]
        # Objects that exist now (torch, Lightning) are never garbage: keep them out of every later
        # collection, which makes the collection after each script ~0.15 s cheaper.
        gc.collect()
        gc.freeze()

    def restore(self) -> None:
        import torch
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
        os.environ.clear()
        os.environ.update(self.environ)
        warnings.filters[:] = self.warning_filters
        torch.set_default_dtype(self.default_dtype)
        torch.set_num_threads(self.num_threads)
        for holder, rank in zip(self.rank_zero_holders, self.ranks):
            holder.rank = rank
        for package in PACKAGES:
            wrappers = sys.modules.get(f"{package}.wrappers")
            if wrappers is not None:
                wrappers._in_fabric_backward = False
        gc.collect()
