"""Stand-ins for ``deepspeed`` and ``torch_xla``, which cannot run on a CPU-only machine.

They are inserted into ``sys.modules`` by :mod:`fakes` before Lightning is imported. They implement only the
calls Lightning Fabric 2.6.6 makes (see ``/work/shared/NOTES-fabric-on-cpu.md``), with the behaviour
Fabric's own checks depend on: the DeepSpeed engine wraps the model, and XLA-FSDP replaces the module's
parameters with new objects tagged ``_is_sharded``, so an optimizer created earlier still points at the old
ones (FAB012).
"""

from __future__ import annotations

import importlib.machinery
import logging
import os
import sys
import types
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch
from torch import nn

DEEPSPEED_STUB_VERSION = "0.16.4"
TORCH_XLA_STUB_VERSION = "2.5.0"


def _new_module(name: str, **attributes: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    # A spec keeps importlib.util.find_spec()/module_available() working on the stub.
    module.__spec__ = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
    module.__path__ = []  # type: ignore[attr-defined]
    module.__dict__.update(attributes)
    return module


def _register(modules: dict[str, types.ModuleType]) -> None:
    """Put the modules into ``sys.modules`` and link each child as an attribute of its parent."""
    for name, module in modules.items():
        sys.modules[name] = module
    for name, module in modules.items():
        parent_name, _, child = name.rpartition(".")
        if parent_name:
            setattr(modules[parent_name], child, module)


def _replace_parameters(module: nn.Module, **tags: Any) -> None:
    """Swap every parameter for a new ``Parameter`` object carrying ``tags``, as the sharding wrappers do."""
    for submodule in module.modules():
        for name, param in list(submodule.named_parameters(recurse=False)):
            replacement = nn.Parameter(param.detach().clone(), requires_grad=param.requires_grad)
            for tag, value in tags.items():
                setattr(replacement, tag, value)
            setattr(submodule, name, replacement)


def install_deepspeed_stub(init_process_group: Callable[[], None]) -> None:
    """Install a minimal ``deepspeed`` package (always replacing a real one, which would need CUDA and NCCL).

    ``init_process_group`` is what ``deepspeed.init_distributed`` runs: the harness passes the in-memory
    1-rank gloo group, so barrier/broadcast under DeepSpeed really execute like with the real package.
    """

    class DeepSpeedEngine(nn.Module):
        """Wraps the model like the real engine; ``backward``/``step`` act on the model and optimizer."""

        def __init__(self, module: nn.Module, optimizer: Any, config: dict[str, Any]) -> None:
            super().__init__()
            self.module = module
            self.optimizer = optimizer
            self.config = config

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self.module(*args, **kwargs)

        def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
            kwargs.pop("scale_wrt_gas", None)
            loss.backward(*args, **kwargs)

        def step(self, *args: Any, **kwargs: Any) -> None:
            if self.optimizer is not None:
                self.optimizer.step()
                self.optimizer.zero_grad()

        def save_checkpoint(
            self, save_dir: str, tag: Any = None, client_state: Any = None, **kwargs: Any
        ) -> bool:
            target = os.path.join(str(save_dir), str(tag or "checkpoint"))
            os.makedirs(target, exist_ok=True)
            torch.save(
                {"module": self.module.state_dict(), "client_state": dict(client_state or {})},
                os.path.join(target, "mp_rank_00_model_states.pt"),
            )
            return True

        def load_checkpoint(
            self, load_dir: str, tag: Any = None, load_module_strict: bool = True, **kwargs: Any
        ) -> tuple[Any, Any]:
            path = os.path.join(str(load_dir), str(tag or "checkpoint"), "mp_rank_00_model_states.pt")
            if not os.path.isfile(path):
                return None, None
            checkpoint = torch.load(path, weights_only=False)
            self.module.load_state_dict(checkpoint["module"], strict=load_module_strict)
            return path, checkpoint["client_state"]

    def initialize(
        args: Any = None,
        model: nn.Module | None = None,
        optimizer: Any = None,
        model_parameters: Any = None,
        lr_scheduler: Any = None,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[Any, Any, Any, Any]:
        assert model is not None
        config = config if isinstance(config, dict) else {}
        if config.get("fp16", {}).get("enabled"):
            model = model.half()
        elif config.get("bf16", {}).get("enabled"):
            model = model.bfloat16()
        return DeepSpeedEngine(model, optimizer, config), optimizer, None, lr_scheduler

    def init_distributed(*args: Any, **kwargs: Any) -> None:
        init_process_group()

    class Init:
        """``deepspeed.zero.Init``: the real one partitions parameters at creation; this one does nothing."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.enabled = kwargs.get("enabled", True)

        def __enter__(self) -> Init:
            return self

        def __exit__(self, *exc_info: Any) -> None:
            return None

    class GatheredParameters(Init):
        pass

    class DeepSpeedOptimizer:
        pass

    class DeepSpeedCPUAdam(torch.optim.Adam):
        pass

    class FusedAdam(torch.optim.Adam):
        pass

    _register(
        {
            "deepspeed": _new_module(
                "deepspeed",
                __version__=DEEPSPEED_STUB_VERSION,
                DeepSpeedEngine=DeepSpeedEngine,
                initialize=initialize,
                init_distributed=init_distributed,
            ),
            "deepspeed.zero": _new_module("deepspeed.zero", Init=Init, GatheredParameters=GatheredParameters),
            "deepspeed.utils": _new_module("deepspeed.utils"),
            "deepspeed.utils.logging": _new_module(
                "deepspeed.utils.logging", logger=logging.getLogger("deepspeed")
            ),
            "deepspeed.checkpointing": _new_module(
                "deepspeed.checkpointing", configure=lambda *args, **kwargs: None
            ),
            "deepspeed.runtime": _new_module("deepspeed.runtime"),
            "deepspeed.runtime.base_optimizer": _new_module(
                "deepspeed.runtime.base_optimizer", DeepSpeedOptimizer=DeepSpeedOptimizer
            ),
            "deepspeed.ops": _new_module("deepspeed.ops"),
            "deepspeed.ops.adam": _new_module(
                "deepspeed.ops.adam", DeepSpeedCPUAdam=DeepSpeedCPUAdam, FusedAdam=FusedAdam
            ),
        }
    )


def install_torch_xla_stub(num_devices: int) -> None:
    """Install a minimal ``torch_xla`` (PjRT runtime, TPU, ``num_devices`` cores) acting as rank 0 of N.

    Devices are ``cpu:<i>``; collectives return their input; ``XlaFullyShardedDataParallel`` replaces the
    wrapped module's parameters with new ones tagged ``_is_sharded`` (as real XLA-FSDP flattens them).
    """

    def xla_device(n: int | None = None, devkind: str | None = None) -> torch.device:
        return torch.device("cpu", 0 if n is None else n)

    def identity(value: Any, *args: Any, **kwargs: Any) -> Any:
        return value

    def mesh_reduce(tag: str, data: Any, reduce_fn: Callable[[list[Any]], Any]) -> Any:
        return reduce_fn([data])

    def optimizer_step(
        optimizer: Any, barrier: bool = False, optimizer_args: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        return optimizer.step(**(optimizer_args or {}))

    def to_cpu(data: Any, convert: bool = True) -> Any:
        from lightning_utilities.core.apply_func import apply_to_collection

        return apply_to_collection(data, torch.Tensor, lambda tensor: tensor.cpu())

    def save(data: Any, file_or_path: Any, master_only: bool = True, global_master: bool = False) -> None:
        torch.save(to_cpu(data), file_or_path)

    def spawn(
        fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int | None = None, **kwargs: Any
    ) -> Any:
        return fn(0, *args)

    class MpDeviceLoader:
        def __init__(self, loader: Any, device: torch.device, **kwargs: Any) -> None:
            self._loader = loader
            self._device = device

        def __iter__(self) -> Iterator[Any]:
            return iter(self._loader)

        def __len__(self) -> int:
            return len(self._loader)

    class XlaFullyShardedDataParallel(nn.Module):
        def __init__(self, module: nn.Module, *args: Any, **kwargs: Any) -> None:
            super().__init__()
            _replace_parameters(module, _is_sharded=True)
            self.module = module

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self.module(*args, **kwargs)

        @contextmanager
        def no_sync(self) -> Iterator[None]:
            yield

        def get_shard_metadata(self) -> dict[str, Any]:
            # What a sharded checkpoint stores beside the shard (one process: the whole module).
            return {"shard_info": {}, "flatten_info": {}}

        def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> torch.Tensor:
            return torch.nn.utils.clip_grad_norm_(self.parameters(), max_norm, norm_type)

    def never_wrap(*args: Any, **kwargs: Any) -> bool:
        return False

    _register(
        {
            "torch_xla": _new_module("torch_xla", __version__=TORCH_XLA_STUB_VERSION),
            "torch_xla.runtime": _new_module(
                "torch_xla.runtime",
                device_type=lambda: "TPU",
                using_pjrt=lambda: True,
                world_size=lambda: num_devices,
                global_ordinal=lambda: 0,
                local_ordinal=lambda: 0,
                host_index=lambda: 0,
                addressable_device_count=lambda: num_devices,
            ),
            "torch_xla._internal": _new_module("torch_xla._internal"),
            "torch_xla._internal.tpu": _new_module(
                "torch_xla._internal.tpu", num_available_devices=lambda: num_devices, version=lambda: 4
            ),
            "torch_xla.core": _new_module("torch_xla.core"),
            "torch_xla.core.xla_model": _new_module(
                "torch_xla.core.xla_model",
                xla_device=xla_device,
                get_xla_supported_devices=lambda *args, **kwargs: ["xla:0"],
                xrt_world_size=lambda: num_devices,
                get_ordinal=lambda: 0,
                get_local_ordinal=lambda: 0,
                all_gather=identity,
                mesh_reduce=mesh_reduce,
                rendezvous=lambda tag, payload=b"", replicas=(): [payload],
                collective_broadcast=lambda *args, **kwargs: None,
                mark_step=lambda *args, **kwargs: None,
                optimizer_step=optimizer_step,
                broadcast_master_param=lambda *args, **kwargs: None,
                _maybe_convert_to_cpu=to_cpu,
                save=save,
            ),
            "torch_xla.core.functions": _new_module("torch_xla.core.functions", all_gather=identity),
            "torch_xla.distributed": _new_module("torch_xla.distributed"),
            "torch_xla.distributed.parallel_loader": _new_module(
                "torch_xla.distributed.parallel_loader", MpDeviceLoader=MpDeviceLoader
            ),
            "torch_xla.distributed.xla_multiprocessing": _new_module(
                "torch_xla.distributed.xla_multiprocessing", spawn=spawn
            ),
            "torch_xla.distributed.fsdp": _new_module(
                "torch_xla.distributed.fsdp",
                XlaFullyShardedDataParallel=XlaFullyShardedDataParallel,
                checkpoint_module=lambda module: module,
                consolidate_sharded_model_checkpoints=lambda *args, **kwargs: None,
            ),
            "torch_xla.distributed.fsdp.wrap": _new_module(
                "torch_xla.distributed.fsdp.wrap",
                transformer_auto_wrap_policy=never_wrap,
                size_based_auto_wrap_policy=never_wrap,
            ),
        }
    )
