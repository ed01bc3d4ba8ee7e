"""FAB021 for a strategy object from the other Lightning package, and only then.

``lightning.fabric`` and the standalone ``lightning_fabric`` define distinct classes
(``lightning.fabric.strategies.Strategy is not lightning_fabric.strategies.Strategy``), and each
package's connector accepts only objects of its own ``Strategy`` (connector.py:191). So a strategy
object is rejected exactly when it comes from the other package than the ``Fabric`` it is given to,
wherever it was built: this module, a helper module, ``LF.strategies.X`` or a ``from`` import.

Every case also runs under the real Lightning; Lightning stops at the first error, fabric-ls
reports each call's first error, so the first finding must be Lightning's exception.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from fabric_ls.engine import Project, analyze_source

SEPARATE_SETUP = """\
fabric.launch()
model = fabric.setup_module(torch.nn.Linear(4, 2))
optimizer = fabric.setup_optimizers(torch.optim.Adam(model.parameters()))
"""


def _script(imports: str, strategy: str) -> str:
    fabric = f'fabric = {{fabric}}(accelerator="cuda", devices=2, strategy={strategy})\n'
    return "import torch\n" + textwrap.dedent(imports) + fabric + SEPARATE_SETUP


def _helper(body: str) -> str:
    return textwrap.dedent(body)


# name: (script, helper modules, findings (rule, 1-based line))
CASES: dict[str, tuple[str, dict[str, str], list[tuple[str, int]]]] = {
    "standalone Fabric, standalone strategy by attribute": (
        _script("import lightning_fabric as LF\n", "LF.strategies.DeepSpeedStrategy()").format(
            fabric="LF.Fabric"
        ),
        {},
        [("FAB001", 6)],
    ),
    "standalone Fabric, standalone strategy from a helper module": (
        _script(
            "import lightning_fabric as LF\nfrom helper_lf_fsdp import make_strategy\n", "make_strategy()"
        ).format(fabric="LF.Fabric"),
        {
            "helper_lf_fsdp.py": _helper("""\
                from lightning_fabric.strategies import FSDPStrategy

                def make_strategy():
                    return FSDPStrategy()
                """)
        },
        [],
    ),
    "standalone Fabric, standalone strategy by from-import": (
        _script(
            "from lightning_fabric import Fabric\n"
            "from lightning_fabric.strategies import DeepSpeedStrategy\n",
            "DeepSpeedStrategy()",
        ).format(fabric="Fabric"),
        {},
        [("FAB001", 7)],
    ),
    "standalone Fabric, standalone subclass in a helper module": (
        _script(
            "from lightning_fabric import Fabric\nfrom helper_lf_sub import make_strategy\n",
            "make_strategy()",
        ).format(fabric="Fabric"),
        {
            "helper_lf_sub.py": _helper("""\
                from lightning_fabric.strategies import DDPStrategy

                class MyStrategy(DDPStrategy):
                    pass

                def make_strategy():
                    return MyStrategy()
                """)
        },
        [],
    ),
    "lightning Fabric, lightning strategy from a helper module": (
        _script("import lightning as L\nfrom helper_l_ds import make_strategy\n", "make_strategy()").format(
            fabric="L.Fabric"
        ),
        {
            "helper_l_ds.py": _helper("""\
                from lightning.fabric.strategies import DeepSpeedStrategy

                def make_strategy():
                    return DeepSpeedStrategy()
                """)
        },
        [("FAB001", 7)],
    ),
    "lightning Fabric, standalone strategy by attribute in a helper module": (
        _script(
            "from lightning.fabric import Fabric\nfrom helper_mixed_attr import make_strategy\n",
            "make_strategy()",
        ).format(fabric="Fabric"),
        {
            "helper_mixed_attr.py": _helper("""\
                import lightning_fabric

                def make_strategy():
                    return lightning_fabric.strategies.DeepSpeedStrategy(stage=3)
                """)
        },
        [("FAB021", 4), ("FAB001", 7)],
    ),
    "lightning Fabric, standalone strategy by from-import in a helper module": (
        _script(
            "from lightning.fabric import Fabric\nfrom helper_mixed_from import make_strategy\n",
            "make_strategy()",
        ).format(fabric="Fabric"),
        {
            "helper_mixed_from.py": _helper("""\
                from lightning_fabric.strategies.deepspeed import DeepSpeedStrategy as DS

                STRATEGY = DS(stage=3)

                def make_strategy():
                    return STRATEGY
                """)
        },
        [("FAB021", 4), ("FAB001", 7)],
    ),
    "lightning Fabric, standalone subclass in a helper module": (
        _script(
            "from lightning.fabric import Fabric\nfrom helper_mixed_sub import make_strategy\n",
            "make_strategy()",
        ).format(fabric="Fabric"),
        {
            "helper_mixed_sub.py": _helper("""\
                from lightning_fabric.strategies import DDPStrategy

                class MyStrategy(DDPStrategy):
                    pass

                def make_strategy():
                    return MyStrategy()
                """)
        },
        [("FAB021", 4)],
    ),
    "lightning Fabric, standalone strategy by from-import": (
        _script(
            "from lightning.fabric import Fabric\n"
            "from lightning_fabric.strategies import DeepSpeedStrategy\n",
            "DeepSpeedStrategy()",
        ).format(fabric="Fabric"),
        {},
        [("FAB021", 4), ("FAB001", 7)],
    ),
    "lightning.Fabric, standalone strategy by attribute": (
        _script(
            "import lightning as L\nimport lightning_fabric as LF\n", "LF.strategies.DeepSpeedStrategy()"
        ).format(fabric="L.Fabric"),
        {},
        [("FAB021", 4), ("FAB001", 7)],
    ),
    "standalone Fabric, lightning strategy by from-import": (
        _script(
            "from lightning_fabric import Fabric\nfrom lightning.fabric.strategies import FSDPStrategy\n",
            "FSDPStrategy()",
        ).format(fabric="Fabric"),
        {},
        [("FAB021", 4)],
    ),
    "standalone Fabric, lightning strategy as a helper module's constant": (
        _script(
            "from lightning_fabric import Fabric\nimport helper_l_const\n", "helper_l_const.STRATEGY"
        ).format(fabric="Fabric"),
        {
            "helper_l_const.py": _helper("""\
                import lightning.fabric as LF2

                STRATEGY = LF2.strategies.DeepSpeedStrategy()
                """)
        },
        [("FAB021", 4), ("FAB001", 7)],
    ),
}


def _analyse(tmp_path: Path, source: str, helpers: dict[str, str]) -> list[tuple[str, int]]:
    for name, text in helpers.items():
        (tmp_path / name).write_text(text)
    script = tmp_path / "train.py"
    script.write_text(source)
    analysis = analyze_source(source, str(script), project=Project([str(tmp_path)]))
    return [(f.code, f.span.start_line + 1) for f in analysis.findings]


@pytest.mark.parametrize("name", CASES)
def test_fab021_exactly_when_the_packages_differ(tmp_path, name):
    source, helpers, expected = CASES[name]
    assert _analyse(tmp_path, source, helpers) == expected


def test_the_message_names_the_package(tmp_path):
    source, helpers, _ = CASES["standalone Fabric, lightning strategy by from-import"]
    script = tmp_path / "train.py"
    script.write_text(source)
    (finding,) = analyze_source(source, str(script)).findings
    assert finding.severity == "error"
    assert "FSDPStrategy(...) from lightning.fabric" in finding.message


def test_the_installed_packages_define_distinct_classes():
    pytest.importorskip("lightning")
    import lightning.fabric.strategies as in_lightning
    import lightning_fabric.strategies as standalone

    assert in_lightning.DeepSpeedStrategy is not standalone.DeepSpeedStrategy
    assert not issubclass(standalone.FSDPStrategy, in_lightning.Strategy)
    assert not issubclass(in_lightning.FSDPStrategy, standalone.Strategy)


@pytest.fixture(scope="module")
def lightning_outcomes():
    pytest.importorskip("lightning")
    from lightning_harness import run_many

    # One line that writes the helper modules next to the script, so Lightning imports them as
    # `python train.py` would; the script's own lines move down by one.
    write = "import pathlib; [pathlib.Path(__file__).with_name(n).write_text(t) for n, t in {!r}.items()]\n"
    scripts = [write.format(helpers) + source for source, helpers, _ in CASES.values()]
    return dict(zip(CASES, run_many(scripts, profile="gpu8", timeout=60)))


@pytest.mark.parametrize("name", CASES)
def test_lightning_raises_what_fabric_ls_reports_first(lightning_outcomes, name):
    _, _, expected = CASES[name]
    outcome = lightning_outcomes[name]
    if not expected:
        assert outcome.error_class is None, f"{outcome.error_class}: {outcome.message}"
        return
    assert outcome.raised_by_lightning, outcome.stderr_tail
    rule, line = expected[0]
    assert outcome.line - 1 == line
    if rule == "FAB021":
        assert outcome.error_class == "ValueError"
        assert outcome.raise_site.endswith("connector.py:192")
        assert "You selected an invalid strategy name" in outcome.message
    else:
        assert outcome.raise_site.endswith("fabric.py:1226")
    # Lightning's own package raised: the Fabric's, not the strategy's.
    package = (
        "lightning_fabric/"
        if "lightning_fabric import Fabric" in CASES[name][0] or "LF.Fabric" in CASES[name][0]
        else "lightning/fabric/"
    )
    assert outcome.raise_site.startswith(package)
