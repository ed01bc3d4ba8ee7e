"""The differential harness reproduces Lightning's own errors at the script line, from Lightning's ``raise``.

Each rule has an INVALID script (the line marked ``# <- raises`` is where Lightning must stop it) and its
FIXED counterpart, which must run to the end. All scripts of one machine profile run in one worker process,
and the profiles run concurrently, so the whole module costs a few seconds.
"""

from __future__ import annotations

import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Dict, List, Tuple

import pytest

try:
    from lightning_harness import Outcome, Script, run_many, run_with_lightning
except ImportError:  # tests/ became a package
    from tests.lightning_harness import Outcome, Script, run_many, run_with_lightning

RAISES_MARKER = "# <- raises"


@dataclass(frozen=True)
class RuleCase:
    rule: str
    profile: str
    error_class: str
    message_prefix: str
    raise_site: str
    invalid: str
    fixed: str

    @property
    def id(self) -> str:
        return f"{self.rule}-{self.profile}"

    @property
    def expected_line(self) -> int:
        lines = [number for number, text in enumerate(self.invalid.splitlines(), 1) if RAISES_MARKER in text]
        assert len(lines) == 1, f"{self.id}: mark exactly one line with {RAISES_MARKER!r}"
        return lines[0]


def script(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


RULE_CASES = [
    RuleCase(
        rule="FAB001",
        profile="gpu8",
        error_class="RuntimeError",
        message_prefix="The `DeepSpeedStrategy` requires the model and optimizer(s) to be set up jointly",
        raise_site="lightning/fabric/fabric.py:1226",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
            fabric.launch()
            model = fabric.setup_module(torch.nn.Linear(4, 2))
            optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))  # <- raises
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
            fabric.launch()
            model = torch.nn.Linear(4, 2)
            optimizer = torch.optim.Adam(model.parameters())
            model, optimizer = fabric.setup(model, optimizer)
            loss = model(torch.randn(3, 4, device=fabric.device)).sum()
            fabric.backward(loss)
            optimizer.step()
            """
        ),
    ),
    RuleCase(
        rule="FAB001",
        profile="tpu8",
        error_class="RuntimeError",
        message_prefix="The `XLAStrategy` requires the model and optimizer(s) to be set up jointly",
        raise_site="lightning/fabric/fabric.py:1226",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric

            def train(fabric):
                model = fabric.setup_module(torch.nn.Linear(4, 2))
                optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))  # <- raises

            if __name__ == "__main__":
                fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
                fabric.launch(train)
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric

            def train(fabric):
                model = torch.nn.Linear(4, 2)
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
                model, optimizer = fabric.setup(model, optimizer)
                loss = model(torch.randn(3, 4, device=fabric.device)).sum()
                fabric.backward(loss)
                optimizer.step()

            if __name__ == "__main__":
                fabric = Fabric(accelerator="tpu", devices=8, strategy="xla")
                fabric.launch(train)
            """
        ),
    ),
    RuleCase(
        rule="FAB002",
        profile="gpu8",
        error_class="RuntimeError",
        message_prefix="The optimizer has references to the model's meta-device parameters. Materializing"
        " them is is currently not supported unless you to set up the model and optimizer(s) separately.",
        raise_site="lightning/fabric/fabric.py:1211",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
            fabric.launch()
            with fabric.init_module(empty_init=True):
                model = torch.nn.Linear(4, 2)
            optimizer = torch.optim.Adam(model.parameters())
            model, optimizer = fabric.setup(model, optimizer)  # <- raises
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
            fabric.launch()
            with fabric.init_module(empty_init=True):
                model = torch.nn.Linear(4, 2)
            model = fabric.setup_module(model)
            optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
            loss = model(torch.randn(3, 4, device=fabric.device)).sum()
            fabric.backward(loss)
            optimizer.step()
            """
        ),
    ),
    RuleCase(
        rule="FAB003",
        profile="gpu8",
        error_class="NotImplementedError",
        message_prefix="`empty_init=False` is not a valid choice with `DeepSpeedStrategy` when ZeRO stage 3"
        " is enabled.",
        raise_site="lightning/fabric/strategies/deepspeed.py:379",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
            fabric.launch()
            with fabric.init_module(empty_init=False):  # <- raises
                model = torch.nn.Linear(4, 2)
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
            fabric.launch()
            with fabric.init_module(empty_init=True):
                model = torch.nn.Linear(4, 2)
            model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
            """
        ),
    ),
    RuleCase(
        rule="FAB004",
        profile="gpu8",
        error_class="RuntimeError",
        message_prefix="No models were set up for backward. Did you forget to call `fabric.setup()`?",
        raise_site="lightning/fabric/fabric.py:510",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
            fabric.launch()
            model = torch.nn.Linear(4, 2)
            loss = model(torch.randn(3, 4)).sum()
            fabric.backward(loss)  # <- raises
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
            fabric.launch()
            model = torch.nn.Linear(4, 2)
            model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
            loss = model(torch.randn(3, 4, device=fabric.device)).sum()
            fabric.backward(loss)
            """
        ),
    ),
    RuleCase(
        rule="FAB006",
        profile="gpu8",
        error_class="TypeError",
        message_prefix="To spawn processes with the `DDPStrategy` strategy, `.launch()` needs to be called"
        " with a function",
        raise_site="lightning/fabric/fabric.py:1006",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
            fabric.launch()  # <- raises
            model = fabric.setup(torch.nn.Linear(4, 2))
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric

            def train(fabric):
                model = torch.nn.Linear(4, 2)
                model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
                loss = model(torch.randn(3, 4, device=fabric.device)).sum()
                fabric.backward(loss)
                optimizer.step()
                fabric.barrier()

            if __name__ == "__main__":
                fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp_spawn")
                fabric.launch(train)
            """
        ),
    ),
    RuleCase(
        rule="FAB007",
        profile="gpu8",
        error_class="ValueError",
        message_prefix="A model should be passed only once to the `setup` method.",
        raise_site="lightning/fabric/fabric.py:1203",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
            fabric.launch()
            model = fabric.setup(torch.nn.Linear(4, 2))
            model = fabric.setup(model)  # <- raises
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
            fabric.launch()
            model = fabric.setup(torch.nn.Linear(4, 2))
            output = model(torch.randn(3, 4, device=fabric.device))
            """
        ),
    ),
    RuleCase(
        rule="FAB009",
        profile="gpu8",
        error_class="RuntimeError",
        message_prefix="To use Fabric with more than one device, you must call `.launch()` or use the CLI:",
        raise_site="lightning/fabric/fabric.py:1195",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
            model = torch.nn.Linear(4, 2)
            model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))  # <- raises
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
            fabric.launch()
            model = torch.nn.Linear(4, 2)
            model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
            """
        ),
    ),
    RuleCase(
        rule="FAB011",
        profile="tpu8",
        error_class="NotImplementedError",
        message_prefix="The `XLAFSDPStrategy` does not support the joint setup of module and optimizer(s).",
        raise_site="lightning/fabric/strategies/xla_fsdp.py:203",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric

            def train(fabric):
                model = torch.nn.Linear(4, 2)
                optimizer = torch.optim.Adam(model.parameters())
                model, optimizer = fabric.setup(model, optimizer)  # <- raises

            if __name__ == "__main__":
                fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
                fabric.launch(train)
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric

            def train(fabric):
                model = fabric.setup_module(torch.nn.Linear(4, 2))
                optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
                loss = model(torch.randn(3, 4, device=fabric.device)).sum()
                fabric.backward(loss)
                optimizer.step()

            if __name__ == "__main__":
                fabric = Fabric(accelerator="tpu", devices=8, strategy="xla_fsdp")
                fabric.launch(train)
            """
        ),
    ),
    RuleCase(
        rule="FAB016",
        profile="gpu8",
        error_class="RuntimeError",
        message_prefix="The current strategy and precision selection requires you to call"
        " `fabric.backward(loss)` instead of `loss.backward()`.",
        raise_site="lightning/fabric/wrappers.py:370",
        invalid=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
            fabric.launch()
            model = torch.nn.Linear(4, 2)
            model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
            loss = model(torch.randn(3, 4, device=fabric.device)).sum()
            loss.backward()  # <- raises
            optimizer.step()
            """
        ),
        fixed=script(
            """
            import torch
            from lightning.fabric import Fabric
            fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
            fabric.launch()
            model = torch.nn.Linear(4, 2)
            model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
            loss = model(torch.randn(3, 4, device=fabric.device)).sum()
            fabric.backward(loss)
            optimizer.step()
            """
        ),
    ),
]

MIXED_PRECISION_LOOP = script(
    """
    import torch
    from lightning.fabric import Fabric
    fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp", precision="16-mixed")
    fabric.launch()
    model = torch.nn.Linear(4, 2)
    model, optimizer = fabric.setup(model, torch.optim.Adam(model.parameters()))
    loss = model(torch.randn(3, 4, device=fabric.device)).sum()
    {backward}
    optimizer.step()
    """
)

# Scripts about the harness itself, keyed by name, run in the same batches as the rule cases.
HARNESS_SCRIPTS: Dict[str, Tuple[str, Script]] = {
    # The standalone package and the `lightning` root import are faked the same way.
    "lightning_fabric_package": (
        "gpu8",
        Script(
            script(
                """
                import torch
                import lightning_fabric as lf
                fabric = lf.Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
                fabric.launch()
                model = fabric.setup_module(torch.nn.Linear(4, 2))
                optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
                """
            )
        ),
    ),
    "lightning_root_import": (
        "gpu8",
        Script(
            script(
                """
                import torch
                import lightning as L
                fabric = L.Fabric(accelerator="cuda", devices=2, strategy="fsdp")
                fabric.launch()
                with fabric.init_module(empty_init=True):
                    model = torch.nn.Linear(4, 2)
                optimizer = torch.optim.Adam(model.parameters())
                model = fabric.setup_module(model)
                optimizer = fabric.setup_optimizers(optimizer)
                """
            )
        ),
    ),
    # `fabric run --strategy deepspeed` turns a script without any DeepSpeed in it into FAB001.
    "cli_strategy_env": (
        "gpu8",
        Script(
            script(
                """
                import torch
                from lightning.fabric import Fabric
                fabric = Fabric(accelerator="cuda", devices=2)
                fabric.launch()
                model = fabric.setup_module(torch.nn.Linear(4, 2))
                optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
                """
            ),
            env={"LT_STRATEGY": "deepspeed"},
        ),
    ),
    # Runs right after the previous script in the same worker: its environment must be gone.
    "env_reset_between_scripts": (
        "gpu8",
        Script(
            script(
                """
                import os
                import torch.distributed
                from lightning.fabric import Fabric
                from lightning.fabric.strategies import DDPStrategy
                assert "LT_STRATEGY" not in os.environ
                assert not torch.distributed.is_initialized()
                fabric = Fabric(accelerator="cuda", devices=2)
                assert type(fabric.strategy) is DDPStrategy, fabric.strategy
                """
            )
        ),
    ),
    # What each profile looks like from inside a script.
    "gpu8_machine": (
        "gpu8",
        Script("from lightning.fabric import Fabric\nassert Fabric().world_size == 8\n"),
    ),
    "no_launch_gpu8": (
        "gpu8",
        Script(
            script("""
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric()
        model = fabric.setup(torch.nn.Linear(4, 2))
        """)
        ),
    ),
    "no_launch_gpu1": (
        "gpu1",
        Script(
            script("""
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric()
        model = fabric.setup(torch.nn.Linear(4, 2))
        """)
        ),
    ),
    "no_launch_cpu": (
        "cpu",
        Script(
            script("""
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric()
        model = fabric.setup(torch.nn.Linear(4, 2))
        """)
        ),
    ),
    "deepspeed_on_cpu": (
        "cpu",
        Script(
            script("""
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cpu", devices=2, strategy="deepspeed")
        fabric.launch()
        """)
        ),
    ),
    "script_bug": (
        "cpu",
        Script("import torch\n\nmodel = torch.nn.Linear(4, 2)\nmodel(torch.randn(3, 5))\n"),
    ),
    "clean_exit": ("cpu", Script("import sys\nsys.exit(0)\n")),
    "failing_exit": ("cpu", Script("import sys\nsys.exit(3)\n")),
    "endless_loop": ("cpu", Script("while True:\n    pass\n", timeout=1.0)),
    "after_timeout": ("cpu", Script("import torch\nprint(torch.ones(2).sum().item())\n")),
    # `launch()` twice on rank 0 is not an error: the first launch sets LOCAL_RANK, as the real launcher does,
    # so the second finds the processes already created (checked with real child processes on CPU, no fakes).
    "launch_twice": (
        "gpu8",
        Script(
            script(
                """
                from lightning.fabric import Fabric
                fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
                fabric.launch()
                fabric.launch()
                """
            )
        ),
    ),
    # Mixed precision on the fake GPUs: autocast runs on the CPU, and MixedPrecision still requires
    # fabric.backward (FAB016) while the corrected loop trains.
    "mixed_precision_loss_backward": (
        "gpu8",
        Script(MIXED_PRECISION_LOOP.format(backward="loss.backward()")),
    ),
    "mixed_precision_fabric_backward": (
        "gpu8",
        Script(MIXED_PRECISION_LOOP.format(backward="fabric.backward(loss)")),
    ),
    # FSDP checkpoints go through Lightning's save/load code and torch.distributed.checkpoint on one rank.
    "fsdp_checkpoint_round_trip": (
        "gpu8",
        Script(
            script(
                """
                import torch
                from lightning.fabric import Fabric
                fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
                fabric.launch()
                model = fabric.setup_module(torch.nn.Linear(4, 2))
                optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
                fabric.backward(model(torch.randn(3, 4, device=fabric.device)).sum())
                optimizer.step()
                fabric.save("checkpoint", {"model": model, "optimizer": optimizer, "step": 3})
                restored = fabric.setup_module(torch.nn.Linear(4, 2))
                restored_optimizer = fabric.setup_optimizers(torch.optim.Adam(restored.parameters()))
                remainder = fabric.load("checkpoint", {"model": restored, "optimizer": restored_optimizer})
                assert remainder == {"step": 3}, remainder
                assert torch.equal(restored.weight, model.weight)
                saved, loaded = optimizer.state_dict()["state"], restored_optimizer.state_dict()["state"]
                assert all(torch.equal(saved[i]["exp_avg"], loaded[i]["exp_avg"]) for i in saved)
                """
            )
        ),
    ),
    # A script that kills the worker process: the remaining scripts run in a new worker.
    "kills_worker": ("gpu1", Script("import os\nos._exit(5)\n")),
    "after_worker_died": ("gpu1", Script("from lightning.fabric import Fabric\nFabric(accelerator='cpu')\n")),
}

PROFILES_USED = sorted(
    {case.profile for case in RULE_CASES} | {profile for profile, _ in HARNESS_SCRIPTS.values()}
)


@pytest.fixture(scope="module")
def outcomes() -> Dict[str, Outcome]:
    """Run every script of this module: one worker per profile, two workers at a time (CI has 2 cores)."""
    batches: Dict[str, List[Tuple[str, Script]]] = {profile: [] for profile in PROFILES_USED}
    for case in RULE_CASES:
        batches[case.profile].append((f"{case.id}:invalid", Script(case.invalid)))
        batches[case.profile].append((f"{case.id}:fixed", Script(case.fixed)))
    for name, (profile, item) in HARNESS_SCRIPTS.items():
        batches[profile].append((name, item))

    def run_batch(profile: str) -> Dict[str, Outcome]:
        keys = [key for key, _ in batches[profile]]
        results = run_many([item for _, item in batches[profile]], profile=profile, timeout=60)
        return dict(zip(keys, results))

    # Longest batches first so the two lanes finish close together.
    order = sorted(PROFILES_USED, key=lambda profile: -len(batches[profile]))
    with ThreadPoolExecutor(max_workers=2) as pool:
        merged: Dict[str, Outcome] = {}
        for result in pool.map(run_batch, order):
            merged.update(result)
    return merged


def describe(outcome: Outcome) -> str:
    return f"{outcome}\n--- stderr tail ---\n{outcome.stderr_tail}"


@pytest.mark.parametrize("case", RULE_CASES, ids=lambda case: case.id)
def test_invalid_script_raises_lightnings_error_at_the_marked_line(
    case: RuleCase, outcomes: Dict[str, Outcome]
) -> None:
    outcome = outcomes[f"{case.id}:invalid"]
    assert outcome.error_class == case.error_class, describe(outcome)
    assert outcome.message is not None and outcome.message.startswith(case.message_prefix), describe(outcome)
    assert outcome.line == case.expected_line, describe(outcome)
    assert outcome.raised_by_lightning, describe(outcome)
    assert outcome.raise_site == case.raise_site, describe(outcome)


@pytest.mark.parametrize("case", RULE_CASES, ids=lambda case: case.id)
def test_fixed_script_runs_clean(case: RuleCase, outcomes: Dict[str, Outcome]) -> None:
    outcome = outcomes[f"{case.id}:fixed"]
    assert outcome.error_class is None, describe(outcome)
    assert outcome.ok and outcome.line is None and not outcome.raised_by_lightning


def test_lightning_fabric_package_is_faked_too(outcomes: Dict[str, Outcome]) -> None:
    outcome = outcomes["lightning_fabric_package"]
    assert outcome.error_class == "RuntimeError", describe(outcome)
    assert outcome.message is not None and outcome.message.startswith("The `DeepSpeedStrategy` requires")
    assert (outcome.line, outcome.raise_site) == (6, "lightning_fabric/fabric.py:1226")


def test_lightning_root_import_runs_the_fsdp_separate_setup(outcomes: Dict[str, Outcome]) -> None:
    # FSDP materialises the meta model into new parameters, so the early optimizer trips FAB010.
    outcome = outcomes["lightning_root_import"]
    assert outcome.error_class == "RuntimeError", describe(outcome)
    assert outcome.message is not None and outcome.message.startswith(
        "The optimizer has references to the model's meta-device parameters. Materializing them is is"
        " currently not supported. Create the optimizer after setting up the model"
    )
    assert (outcome.line, outcome.raise_site) == (9, "lightning/fabric/fabric.py:1238")


def test_per_script_environment_applies_and_is_reset(outcomes: Dict[str, Outcome]) -> None:
    with_env = outcomes["cli_strategy_env"]
    assert with_env.error_class == "RuntimeError", describe(with_env)
    assert with_env.message is not None and with_env.message.startswith("The `DeepSpeedStrategy` requires")
    assert with_env.line == 6 and with_env.raised_by_lightning
    following = outcomes["env_reset_between_scripts"]
    assert following.ok, describe(following)


def test_profile_decides_what_auto_means(outcomes: Dict[str, Outcome]) -> None:
    assert outcomes["gpu8_machine"].ok, describe(outcomes["gpu8_machine"])
    on_eight_gpus = outcomes["no_launch_gpu8"]
    assert on_eight_gpus.error_class == "RuntimeError", describe(on_eight_gpus)
    assert on_eight_gpus.raise_site == "lightning/fabric/fabric.py:1195" and on_eight_gpus.line == 4
    assert outcomes["no_launch_gpu1"].ok, describe(outcomes["no_launch_gpu1"])
    assert outcomes["no_launch_cpu"].ok, describe(outcomes["no_launch_cpu"])


def test_deepspeed_on_the_cpu_machine_fails_at_launch(outcomes: Dict[str, Outcome]) -> None:
    outcome = outcomes["deepspeed_on_cpu"]
    assert outcome.error_class == "RuntimeError", describe(outcome)
    assert (
        outcome.message
        == "The DeepSpeed strategy is only supported on CUDA GPUs but `CPUAccelerator` is used."
    )
    assert (outcome.line, outcome.raise_site) == (3, "lightning/fabric/strategies/deepspeed.py:641")


def test_script_bug_is_not_blamed_on_lightning(outcomes: Dict[str, Outcome]) -> None:
    outcome = outcomes["script_bug"]
    assert outcome.error_class == "RuntimeError" and outcome.line == 4, describe(outcome)
    assert not outcome.raised_by_lightning
    assert "mat1 and mat2 shapes cannot be multiplied" in (outcome.message or "")


def test_exit_codes(outcomes: Dict[str, Outcome]) -> None:
    assert outcomes["clean_exit"].ok, describe(outcomes["clean_exit"])
    failing = outcomes["failing_exit"]
    assert (failing.error_class, failing.message, failing.line) == ("SystemExit", "3", 2), describe(failing)


def test_timeout_stops_only_that_script(outcomes: Dict[str, Outcome]) -> None:
    endless = outcomes["endless_loop"]
    assert endless.timed_out and endless.error_class == "ScriptTimeout", describe(endless)
    assert endless.line in (1, 2) and not endless.raised_by_lightning
    after = outcomes["after_timeout"]
    assert after.ok and after.stdout_tail.strip() == "2.0", describe(after)


def test_launch_twice_is_a_no_op_like_in_real_lightning(outcomes: Dict[str, Outcome]) -> None:
    assert outcomes["launch_twice"].ok, describe(outcomes["launch_twice"])


def test_mixed_precision_on_fake_gpus(outcomes: Dict[str, Outcome]) -> None:
    direct = outcomes["mixed_precision_loss_backward"]
    assert direct.error_class == "RuntimeError", describe(direct)
    assert (direct.line, direct.raise_site) == (8, "lightning/fabric/wrappers.py:370")
    assert outcomes["mixed_precision_fabric_backward"].ok, describe(
        outcomes["mixed_precision_fabric_backward"]
    )


def test_fsdp_checkpoint_round_trip(outcomes: Dict[str, Outcome]) -> None:
    assert outcomes["fsdp_checkpoint_round_trip"].ok, describe(outcomes["fsdp_checkpoint_round_trip"])


def test_a_dead_worker_is_reported_and_replaced(outcomes: Dict[str, Outcome]) -> None:
    killed = outcomes["kills_worker"]
    assert killed.error_class == "WorkerDied" and "code 5" in (killed.message or ""), describe(killed)
    assert outcomes["after_worker_died"].ok, describe(outcomes["after_worker_died"])


def test_run_with_lightning_single_script() -> None:
    outcome = run_with_lightning(
        "from lightning.fabric import Fabric\nFabric(accelerator='tpu', devices=3)\n", profile="tpu8"
    )
    assert outcome.error_class == "ValueError", describe(outcome)
    assert outcome.message == "`devices` can only be 'auto', 1, 8 or [<0-7>] for TPUs. Got 3"
    assert outcome.line == 2 and outcome.raised_by_lightning
    assert outcome.raise_site is not None and outcome.raise_site.startswith(
        "lightning/fabric/accelerators/xla.py:"
    )


def test_unknown_profile_is_rejected_before_starting_a_worker() -> None:
    with pytest.raises(ValueError, match="Unknown profile 'gpu'"):
        run_with_lightning("pass\n", profile="gpu")
