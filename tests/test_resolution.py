"""Strategy resolution and call binding across names, modules, functions and classes."""

from __future__ import annotations

import textwrap
from pathlib import Path

from fabric_ls.engine import Project, analyze_source
from fabric_ls.settings import Settings

SEPARATE_SETUP = """
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""


def check(tmp_path: Path, source: str, files: dict[str, str] | None = None, settings: Settings = Settings()):  # noqa: B008
    for name, text in (files or {}).items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    return analyze_source(script.read_text(), str(script), settings, Project([str(tmp_path)]))


def codes(analysis) -> list[tuple[str, int, str]]:
    return [(f.code, f.span.start_line + 1, f.severity) for f in analysis.findings]


def test_alias_import_of_lightning(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        import lightning as L
        fabric = L.Fabric(accelerator="cuda", devices=2, strategy="DeepSpeed")
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
    )
    assert codes(analysis) == [("FAB001", 6, "error")]
    assert analysis.fabric_sites[0].candidates[0].class_name == "DeepSpeedStrategy"


def test_standalone_package_and_module_constant(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning_fabric import Fabric as F
        STRATEGY = "deepspeed_stage_3"
        fabric = F(accelerator="cuda", devices=2, strategy=STRATEGY)
        fabric.launch()
        with fabric.init_module(empty_init=False):
            model = torch.nn.Linear(4, 2)
    """,
    )
    assert codes(analysis) == [("FAB003", 6, "error")]
    notes = [o.note for o in analysis.fabric_sites[0].candidates[0].provenance]
    assert any("STRATEGY" in note for note in notes)


def test_strategy_imported_from_workspace_module(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        from settings import make_strategy
        fabric = Fabric(accelerator="cuda", devices=2, strategy=make_strategy())
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
        {
            "settings.py": """\
        from lightning.fabric.strategies import DeepSpeedStrategy
        CONFIGS = {"big": {"stage": 3}, "small": {"stage": 1}}
        def make_strategy():
            return DeepSpeedStrategy(stage=CONFIGS["big"]["stage"])
    """
        },
    )
    assert codes(analysis) == [("FAB001", 7, "error")]
    assert analysis.fabric_sites[0].candidates[0].zero_stage == 3
    assert any(path.endswith("settings.py") for path in analysis.dependencies)


def test_if_else_gives_a_conditional_warning(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import os, torch
        from lightning.fabric import Fabric
        if os.environ.get("BIG"):
            strategy = "deepspeed"
        else:
            strategy = "ddp"
        fabric = Fabric(accelerator="cuda", devices=2, strategy=strategy)
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
    )
    assert codes(analysis) == [("FAB001", 10, "warning")]
    assert "BIG" in analysis.findings[0].condition
    labels = sorted(c.class_name for c in analysis.fabric_sites[0].candidates)
    assert labels == ["DDPStrategy", "DeepSpeedStrategy"]


def test_argparse_default_without_choices(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import argparse, torch
        from lightning.fabric import Fabric
        parser = argparse.ArgumentParser()
        parser.add_argument("--strategy", default="deepspeed")
        args = parser.parse_args()
        fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy)
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
    )
    assert codes(analysis) == [("FAB001", 9, "warning")]
    assert "default" in analysis.findings[0].condition


def test_entry_function_parameter_default(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        def setup(devices: int = 4, strategy: str = "fsdp") -> None:
            fabric = Fabric(accelerator="cuda", devices=devices, strategy=strategy)
            fabric.launch()
            with fabric.init_module(empty_init=True):
                model = torch.nn.Linear(4, 2)
            optimizer = torch.optim.Adam(model.parameters())
            model, optimizer = fabric.setup(model, optimizer)
    """,
    )
    assert codes(analysis) == [("FAB002", 9, "warning")]
    assert "`strategy` left at its default 'fsdp'" in analysis.findings[0].condition


def test_launch_binds_the_function_parameter(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        def main(fab):
            model = fab.setup_module(torch.nn.Linear(4, 2))
            optimizer = fab.setup_optimizers(torch.optim.Adam(model.parameters()))
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        fabric.launch(main)
    """,
    )
    assert codes(analysis) == [("FAB001", 5, "error")]


def test_self_fabric_across_methods_and_factory(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        def make_fabric():
            return Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        class Trainer:
            def __init__(self):
                self.fabric = make_fabric()
                self.fabric.launch()
            def fit(self, model):
                model = self.fabric.setup_module(model)
                opt = self.fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
        Trainer().fit(torch.nn.Linear(4, 2))
    """,
    )
    assert codes(analysis) == [("FAB001", 11, "error")]


def test_two_fabrics_stay_apart(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        teacher = Fabric(accelerator="cuda", devices=2, strategy="ddp")
        student = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        teacher.launch()
        student.launch()
        a = teacher.setup_module(torch.nn.Linear(4, 2))
        oa = teacher.setup_optimizers(torch.optim.Adam(a.parameters()))
        b = student.setup_module(torch.nn.Linear(4, 2))
        ob = student.setup_optimizers(torch.optim.Adam(b.parameters()))
    """,
    )
    assert codes(analysis) == [("FAB001", 10, "error")]


def test_unknowable_strategy_is_not_guessed(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        def run(**kwargs):
            fabric = Fabric(**kwargs)
            fabric.launch()
            model = fabric.setup_module(torch.nn.Linear(4, 2))
            optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
    )
    assert codes(analysis) == []
    assert analysis.fabric_sites[0].candidates[0].class_name is None


def test_strategy_setting_is_assumed_where_the_script_leaves_it_open(tmp_path):
    source = """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """
    assert codes(check(tmp_path, source)) == []
    assumed = check(tmp_path, source, settings=Settings(strategy="deepspeed"))
    assert codes(assumed) == [("FAB001", 5, "warning")]


def test_user_strategy_subclass_in_another_module(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        from mystrategies import MyDeepSpeed
        fabric = Fabric(accelerator="cuda", devices=2, strategy=MyDeepSpeed(stage=3))
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
        {
            "mystrategies.py": """\
        from lightning.fabric.strategies import DeepSpeedStrategy
        class MyDeepSpeed(DeepSpeedStrategy):
            pass
    """
        },
    )
    assert codes(analysis) == [("FAB001", 7, "error")]
    assert "MyDeepSpeed" in analysis.findings[0].message


def test_single_device_tpu_is_not_xla_strategy(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="tpu", devices=1)
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
    )
    assert codes(analysis) == []


def test_fsdp_default_init_module_is_not_meta(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
        fabric.launch()
        with fabric.init_module():
            model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.Adam(model.parameters())
        model, optimizer = fabric.setup(model, optimizer)
    """,
    )
    assert codes(analysis) == []


def test_user_meta_device_context_counts(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
        fabric.launch()
        with torch.device("meta"):
            model = torch.nn.Linear(4, 2)
        optimizer = torch.optim.Adam(model.parameters())
        model, optimizer = fabric.setup(model, optimizer)
    """,
    )
    assert codes(analysis) == [("FAB002", 8, "error")]


def test_suppression_comments(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        a = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))  # noqa: FAB001
        b = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))  # fabric-ls: ignore[FAB001]
        c = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))  # noqa: FAB002
    """,
    )
    assert codes(analysis) == [("FAB001", 8, "error")]


def test_fsdp_subclass_bypasses_the_gpu_check(tmp_path):
    analysis = check(
        tmp_path,
        """\
        from lightning.fabric import Fabric
        from lightning.fabric.strategies import FSDPStrategy
        class MyFSDP(FSDPStrategy):
            pass
        a = Fabric(accelerator="cpu", devices=2, strategy=MyFSDP())
        b = Fabric(accelerator="cpu", devices=2, strategy=FSDPStrategy())
    """,
    )
    assert codes(analysis) == [("FAB018", 6, "error")]


def test_script_with_a_syntax_error_still_gets_findings(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
        for batch in loader
            loss = model(
    """,
    )
    assert analysis.syntax_error
    assert codes(analysis) == [("FAB001", 6, "error")]


def test_parameters_through_list_and_param_groups(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
        fabric.launch()
        with fabric.init_module(empty_init=True):
            model = torch.nn.Linear(4, 2)
        decay = [p for n, p in model.named_parameters() if p.ndim > 1]
        groups = [{"params": decay, "weight_decay": 0.1}, {"params": list(model.parameters())}]
        optimizer = torch.optim.AdamW(groups)
        model, optimizer = fabric.setup(model, optimizer)
    """,
    )
    assert codes(analysis) == [("FAB002", 10, "error")]


def test_paths_the_script_refuses_do_not_make_a_finding_conditional(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        if not torch.cuda.is_available():
            raise SystemExit("this script needs GPUs")
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
    )
    assert codes(analysis) == [("FAB001", 8, "error")]


def test_a_choice_the_script_rejects_does_not_count(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import argparse, sys, torch
        from lightning.fabric import Fabric
        parser = argparse.ArgumentParser()
        parser.add_argument("--strategy", default="deepspeed", choices=["ddp", "deepspeed"])
        args = parser.parse_args()
        if args.strategy == "ddp":
            sys.exit("ddp is not supported by this script")
        fabric = Fabric(accelerator="cuda", devices=2, strategy=args.strategy)
        fabric.launch()
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
    """,
    )
    assert codes(analysis) == [("FAB001", 11, "error")]


def test_dataclass_fields_given_at_construction(tmp_path):
    analysis = check(
        tmp_path,
        """\
        from dataclasses import dataclass
        from typing import Optional
        import torch
        from lightning.fabric import Fabric
        @dataclass
        class TrainArgs:
            lr: float = 1e-3
            max_norm: Optional[float] = None
        def main(fabric, train: TrainArgs = TrainArgs(max_norm=1.0)):
            model = torch.nn.Linear(4, 2)
            model, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=train.lr))
            fabric.clip_gradients(model, optimizer, max_norm=train.max_norm)
        fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
        fabric.launch(main)
    """,
    )
    assert codes(analysis) == []


def test_the_module_of_a_set_up_model_is_not_a_fabric_wrapper(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
        fabric.launch()
        player = Fabric(accelerator="cuda", devices=1)
        model = fabric.setup_module(torch.nn.Linear(4, 2))
        copy = player.setup_module(model.module)
    """,
    )
    assert codes(analysis) == []


def test_a_model_built_by_a_helper_inside_init_module_is_on_the_meta_device(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        def build():
            return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
        fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
        fabric.launch()
        with fabric.init_module(empty_init=True):
            model = build()
        optimizer = torch.optim.AdamW(model.parameters())
        model = fabric.setup_module(model)
        optimizer = fabric.setup_optimizers(optimizer)
    """,
    )
    assert codes(analysis) == [("FAB010", 11, "error")]


def test_a_fabric_passed_to_unreadable_code_may_have_been_launched_and_set_up(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        from mypkg.build import build_and_setup, start
        fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed")
        start(fabric)
        model, optimizer = build_and_setup(fabric)
        fabric.backward(model(torch.randn(2, 4)).sum())
        fabric.setup_module(torch.nn.Linear(4, 1))
    """,
    )
    assert codes(analysis) == []


def test_world_size_is_known_before_launch(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
        if fabric.world_size > 1:
            fabric.launch()
        fabric.setup_module(torch.nn.Linear(4, 1))
    """,
    )
    assert codes(analysis) == []


def test_outputs_without_gradients_have_no_backward_hook(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cpu", devices=1, precision="bf16-mixed")
        encoder = fabric.setup_module(torch.nn.Linear(4, 4))
        head = torch.nn.Linear(4, 1)
        with torch.no_grad():
            feats = encoder(torch.randn(2, 4))
        head(feats.float()).sum().backward()
        head(encoder(torch.randn(2, 4)).detach().float()).sum().backward()
        encoder(torch.randn(2, 4)).sum().backward()
    """,
    )
    assert codes(analysis) == [("FAB016", 10, "error")]


def test_load_state_dict_with_assign_materialises_meta_parameters(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
        fabric.launch()
        with torch.device("meta"):
            model = torch.nn.Linear(4, 1)
        model.load_state_dict({"weight": torch.zeros(1, 4), "bias": torch.zeros(1)}, assign=True)
        optimizer = torch.optim.Adam(model.parameters())
        model, optimizer = fabric.setup(model, optimizer)
    """,
    )
    assert codes(analysis) == []


def test_collectives_and_checkpoints_need_launch_too(tmp_path):
    analysis = check(
        tmp_path,
        """\
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="ddp")
        fabric.barrier()
    """,
    )
    assert codes(analysis) == [("FAB009", 3, "warning")]


def test_fsdp_clip_gradients_needs_the_set_up_module(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda", devices=2, strategy="fsdp")
        fabric.launch()
        model = torch.nn.Linear(4, 2)
        model = fabric.setup_module(model)
        optimizer = fabric.setup_optimizers(torch.optim.SGD(model.parameters(), lr=0.1))
        fabric.clip_gradients(None, optimizer, max_norm=1.0)
    """,
    )
    assert codes(analysis) == [("FAB023", 8, "error")]


def test_a_function_that_only_reaches_fabric_through_a_class_is_an_entry_point(tmp_path):
    analysis = check(
        tmp_path,
        """\
        import torch
        from lightning.fabric import Fabric
        class Trainer:
            def __init__(self):
                self.fabric = Fabric(accelerator="cuda", devices=2, strategy="deepspeed_stage_3")
                self.fabric.launch()
            def fit(self):
                with self.fabric.init_module(empty_init=False):
                    model = torch.nn.Linear(4, 2)
        def run():
            Trainer().fit()
    """,
    )
    assert codes(analysis) == [("FAB003", 8, "error")]
