"""Unit tests of the hover and label texts (no server), on hand-built analyses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from fabric_ls import explain
from fabric_ls.model import Analysis, CallSite, FabricSite, Finding, Origin, Span, StrategyCandidate

PATH = "/w/train.py"
FABRIC_SPAN = Span(5, 9, 5, 60)


@dataclass
class FakeRecord:
    title: str = "Joint setup required"
    documentation: str = "DeepSpeed wraps model and optimizer in one engine."
    example_before: str = "model = fabric.setup_module(model)"
    example_after: str = "model, optimizer = fabric.setup(model, optimizer)"
    example_fix: str = ""
    docs_url: Optional[str] = "https://docs/FAB001.md"


def _candidate(**overrides: object) -> StrategyCandidate:
    values: dict = {
        "class_name": "DeepSpeedStrategy",
        "registry_name": "deepspeed_stage_3",
        "zero_stage": 3,
        "provenance": (Origin(PATH, Span(5, 40, 5, 59), "'deepspeed_stage_3'"),),
    }
    values.update(overrides)
    return StrategyCandidate(**values)  # type: ignore[arg-type]


def _analysis(*candidates: StrategyCandidate) -> Analysis:
    site = FabricSite(PATH, FABRIC_SPAN, candidates or (_candidate(),))
    finding = Finding(
        code="FAB001",
        path=PATH,
        span=Span(9, 12, 9, 40),
        severity="error",
        message="The `DeepSpeedStrategy` requires the model and optimizer(s) to be set up jointly.",
        strategy="DeepSpeedStrategy · ZeRO-3",
    )
    return Analysis(
        path=PATH,
        findings=[finding],
        fabric_sites=[site],
        call_sites=[
            CallSite(PATH, Span(7, 4, 7, 30), "init_module", FABRIC_SPAN),
            CallSite(PATH, Span(9, 12, 9, 40), "setup_optimizers", FABRIC_SPAN),
        ],
    )


def test_fabric_hover_names_candidates_provenance_order_and_portability() -> None:
    portability = {"ddp": [], "deepspeed": [_analysis().findings[0]]}

    markdown, span = explain.hover_markdown(_analysis(), 5, 20, lambda code: FakeRecord(), portability) or (
        "",
        None,
    )

    assert span == FABRIC_SPAN
    assert "**Fabric strategy:** `DeepSpeedStrategy · ZeRO-3`" in markdown
    assert "line 6: 'deepspeed_stage_3'" in markdown
    assert "**Order `DeepSpeedStrategy` requires**" in markdown
    assert "| `deepspeed` | FAB001 (line 10) |" in markdown
    assert "| `ddp` | nothing |" in markdown


def test_portability_notes() -> None:
    pending, _ = explain.hover_markdown(
        _analysis(), 5, 20, lambda code: None, None, None, explain.PORTABILITY_PENDING
    ) or ("", None)

    assert "being computed" in pending
    assert "| strategy |" not in pending


def test_call_hover_under_zero3_and_the_finding_it_carries() -> None:
    init_module, _ = explain.hover_markdown(_analysis(), 7, 10, lambda code: None) or ("", None)
    setup_optimizers, _ = explain.hover_markdown(_analysis(), 9, 20, lambda code: FakeRecord()) or ("", None)

    assert "deepspeed.zero.Init" in init_module
    assert "Not supported: raises RuntimeError" in setup_optimizers
    assert "**FAB001**: Joint setup required" in setup_optimizers
    assert "**Before**" in setup_optimizers and "**After**" in setup_optimizers
    assert "[FAB001 documentation](https://docs/FAB001.md)" in setup_optimizers


def test_conditional_candidates_each_get_their_behaviour() -> None:
    analysis = _analysis(
        # Conditions arrive as markdown from the engine, names already in code spans.
        _candidate(condition="`--strategy` is 'deepspeed_stage_3'"),
        _candidate(class_name="FSDPStrategy", registry_name="fsdp", zero_stage=None, condition="otherwise"),
    )

    markdown, _ = explain.hover_markdown(analysis, 9, 20, lambda code: None) or ("", None)

    assert (
        "Under `DeepSpeedStrategy · ZeRO-3` when `--strategy` is 'deepspeed_stage_3': Not supported"
        in markdown
    )
    assert "Under `FSDPStrategy` when otherwise: Wraps the optimizers" in markdown


def test_spawn_launch_and_user_subclasses() -> None:
    spawn = _candidate(class_name="DDPStrategy", registry_name="ddp_spawn", zero_stage=None)
    subclass = _candidate(registry_name=None, zero_stage=2, user_class="MyDeepSpeed")

    assert "`fabric.launch(train)`" in explain.call_behaviour("launch", spawn)
    assert explain.required_order(spawn)[1][1].startswith("`fabric.launch(train)`")
    assert explain.guide_for(subclass)[0] == "DeepSpeedStrategy"
    assert subclass.label == "MyDeepSpeed · ZeRO-2"


def test_unknown_strategy_and_empty_positions() -> None:
    unknown = _analysis(StrategyCandidate(class_name=None, unknown_reason="comes from the command line"))

    markdown, _ = explain.hover_markdown(unknown, 5, 20, lambda code: None) or ("", None)

    assert "`unknown`: comes from the command line" in markdown
    assert explain.hover_markdown(unknown, 0, 0, lambda code: None) is None


def test_labels() -> None:
    site = _analysis().fabric_sites[0]
    assert explain.site_label(site) == explain.code_lens_title(site) == "DeepSpeedStrategy · ZeRO-3"
    assert (
        explain.site_summary(site)
        == "Fabric strategy: DeepSpeedStrategy · ZeRO-3 (line 6: 'deepspeed_stage_3')"
    )
