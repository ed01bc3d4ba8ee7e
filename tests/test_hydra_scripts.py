"""Scripts configured by Hydra or OmegaConf: the strategy comes from YAML files, and from the command line.

Each shape is FAB001's record sample with its Fabric built from a configuration: a tree of config
files and a script. fabric-ls must report the sample's FAB001 at the separate ``setup_optimizers``
under the condition printed here, and nothing else. Then each shape runs under the real Lightning
(with Hydra itself composing the configuration): with the command line that gives DeepSpeed,
Lightning raises FAB001's error at that line; with the other, the script runs clean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import pytest
from command_line_support import _SAMPLE, setup_line
from config_support import sample_arguments

from fabric_ls.engine import Project, analyze_notebook_text, analyze_source
from fabric_ls.records import get_record

ARGUMENTS = sample_arguments()
assert ARGUMENTS["strategy"] == "deepspeed"


def _node(indent: str = "", **changes: object) -> str:
    """The sample's Fabric arguments as a YAML mapping (with ``changes``; None leaves one out)."""
    values = {**ARGUMENTS, **changes}
    return "".join(f"{indent}{key}: {value}\n" for key, value in values.items() if value is not None)


def _script(
    fabric: str,
    header: str,
    decorated: bool = True,
    decorator: str = "hydra.main",
    config_path: str = '"conf"',
) -> str:
    """The sample after its Fabric line, under ``fabric = <fabric>``: in ``main(cfg)`` (a Hydra app)
    or at the top level."""
    body = [
        line
        for line in _SAMPLE.source.splitlines()
        if line.strip() and not line.startswith(("import ", "from ", "fabric = Fabric("))
    ]
    imports = "import torch\nfrom lightning.fabric import Fabric\n" + header
    if not decorated:
        return imports + f"fabric = {fabric}\n" + "\n".join(body) + "\n"
    lines = "\n".join("    " + line for line in body)
    return (
        imports
        + f'\n\n@{decorator}(version_base="1.3", config_path={config_path}, config_name="config")\n'
        + f'def main(cfg):\n    fabric = {fabric}\n{lines}\n\n\nif __name__ == "__main__":\n    main()\n'
    )


HYDRA = "import hydra\nfrom hydra.utils import instantiate\n"
TARGET = "_target_: lightning.fabric.Fabric\n"


class Shape(NamedTuple):
    script: str
    files: dict[str, str]
    deepspeed_argv: tuple[str, ...]
    other_argv: tuple[str, ...]
    severity: str
    condition: str | None


def _dataclass(name: str, **changes: object) -> str:
    """A dataclass whose fields are a Fabric node: ``_target_`` and the sample's arguments."""
    values = {"_target_": "lightning.fabric.Fabric", **ARGUMENTS, **changes}
    fields = "".join(f"    {key}: {type(value).__name__} = {value!r}\n" for key, value in values.items())
    return f"\n\n@dataclass\nclass {name}:\n{fields}"


STORE = "from dataclasses import dataclass, field\nfrom hydra.core.config_store import ConfigStore\n" + HYDRA


def _composed(option: str, default: str, severity: str) -> Shape:
    """``compose(overrides=["fabric=<option>"])`` over a config whose group ``fabric`` defaults to
    ``default``: nothing is left to the command line."""
    return Shape(
        _script(
            "instantiate(cfg.fabric)",
            "from hydra import compose, initialize\nfrom hydra.utils import instantiate\n"
            'with initialize(version_base="1.3", config_path="conf"):\n'
            f'    cfg = compose(config_name="config", overrides=["fabric={option}"])\n',
            decorated=False,
        ),
        {
            "conf/config.yaml": f"defaults:\n  - fabric: {default}\n",
            "conf/fabric/ddp.yaml": TARGET + _node(strategy="ddp"),
            "conf/fabric/deepspeed.yaml": TARGET + _node(),
        },
        (),
        (),
        severity,
        None,
    )


SHAPES = {
    # A config group picks the strategy: ``fabric=deepspeed`` on the command line.
    "config group": Shape(
        _script('instantiate(cfg.fabric, _convert_="all")', HYDRA),
        {
            "conf/config.yaml": "defaults:\n  - fabric: ddp\n  - _self_\nseed: 1\n",
            "conf/fabric/ddp.yaml": TARGET + _node(strategy="ddp"),
            "conf/fabric/deepspeed.yaml": TARGET + _node(),
        },
        ("fabric=deepspeed",),
        (),
        "warning",
        "config group `fabric` is 'deepspeed' and `fabric.strategy` left at its config value",
    ),
    # A ``_partial_`` node: Fabric's class with the node's arguments, built by the script's call.
    "a partial node": Shape(
        _script("instantiate(cfg.fabric)()", HYDRA),
        {"conf/config.yaml": "fabric:\n  " + TARGET + "  _partial_: true\n" + _node(indent="  ")},
        (),
        ("fabric.strategy=ddp",),
        "warning",
        "`fabric.strategy` left at its config value",
    ),
    # The node as a dict of the script's own, its target popped, spread into Fabric.
    "to_container, then pop": Shape(
        _script(
            "fabric_of(cfg.fabric)",
            HYDRA
            + "from omegaconf import OmegaConf\n\n\ndef fabric_of(node):\n"
            + "    kwargs = OmegaConf.to_container(node, resolve=True)\n"
            + '    kwargs.pop("_target_")\n    return Fabric(**kwargs)\n',
        ),
        {"conf/config.yaml": "fabric:\n  " + TARGET + _node(indent="  ")},
        (),
        ("fabric.strategy=ddp",),
        "warning",
        "`fabric.strategy` left at its config value",
    ),
    # The value is in the primary config: ``strategy=ddp`` on the command line avoids it.
    "value in the config": Shape(
        _script("Fabric(accelerator=cfg.accelerator, devices=cfg.devices, strategy=cfg.strategy)", HYDRA),
        {"conf/config.yaml": _node()},
        (),
        ("strategy=ddp",),
        "warning",
        "`strategy` left at its config value",
    ),
    # ``main`` imported from hydra under another name; ``.get`` with a default.
    "imported main, get": Shape(
        _script(
            f"Fabric(accelerator={ARGUMENTS['accelerator']!r}, devices={ARGUMENTS['devices']!r}, "
            'strategy=cfg.fabric.get("strategy", "auto"))',
            "from hydra import main as hydra_main\n",
            decorator="hydra_main",
        ),
        {"conf/config.yaml": "fabric:\n  strategy: deepspeed\n"},
        (),
        ("fabric.strategy=ddp",),
        "warning",
        "`fabric.strategy` left at its config value",
    ),
    # ``Fabric(**cfg.fabric)``, the strategy named through an interpolation.
    "interpolated, spread": Shape(
        _script("Fabric(**cfg.fabric)", HYDRA),
        {"conf/config.yaml": "backend: deepspeed\nfabric:\n" + _node("  ", strategy="${backend}")},
        (),
        ("backend=ddp",),
        "warning",
        "`fabric.strategy` left at its config value and `backend` left at its config value",
    ),
    # A nested ``_target_``: the strategy object, built by ``instantiate`` first.
    "strategy object": Shape(
        _script("instantiate(cfg.fabric)", HYDRA),
        {
            "conf/config.yaml": "defaults:\n  - fabric: deepspeed\n",
            "conf/fabric/deepspeed.yaml": TARGET
            + _node(strategy=None)
            + "strategy:\n  _target_: lightning.fabric.strategies.DeepSpeedStrategy\n  stage: 2\n",
            "conf/fabric/ddp.yaml": TARGET + _node(strategy="ddp"),
        },
        (),
        ("fabric=ddp",),
        "warning",
        "config group `fabric` is 'deepspeed' (the default)",
    ),
    # An experiment file overrides the group (as sheeprl's do); ``exp`` must be given.
    "override in an experiment": Shape(
        _script("instantiate(cfg.fabric)", HYDRA),
        {
            "conf/config.yaml": "defaults:\n  - fabric: ddp\n  - exp: ???\n  - _self_\n",
            "conf/fabric/ddp.yaml": TARGET + _node(strategy="ddp"),
            "conf/fabric/deepspeed.yaml": TARGET + _node(),
            "conf/exp/large.yaml": "# @package _global_\ndefaults:\n  - override /fabric: deepspeed\n",
            "conf/exp/small.yaml": "# @package _global_\nseed: 3\n",
        },
        ("exp=large",),
        ("exp=small",),
        "warning",
        "config group `fabric` is 'deepspeed' and `fabric.strategy` left at its config value",
    ),
    # Structured configs in Hydra's ConfigStore, and no config folder.
    "structured, in the ConfigStore": Shape(
        _script(
            "instantiate(cfg.fabric)",
            STORE + _dataclass("FabricConfig") + "\n\n@dataclass\nclass TrainConfig:\n"
            "    fabric: FabricConfig = field(default_factory=FabricConfig)\n"
            '\n\nConfigStore.instance().store(name="config", node=TrainConfig)\n',
            config_path="None",
        ),
        {},
        (),
        ("fabric.strategy=ddp",),
        "warning",
        "`fabric.strategy` left at its config value",
    ),
    # A group's options stored as structured configs, the primary config a file.
    "group options in the ConfigStore": Shape(
        _script(
            "instantiate(cfg.fabric)",
            STORE
            + _dataclass("DDP", strategy="ddp")
            + _dataclass("DeepSpeed")
            + '\n\nstore = ConfigStore.instance()\nstore.store(group="fabric", name="ddp", node=DDP)\n'
            'store.store(group="fabric", name="deepspeed", node=DeepSpeed)\n',
        ),
        {"conf/config.yaml": "defaults:\n  - fabric: ddp\n  - _self_\n"},
        ("fabric=deepspeed",),
        (),
        "warning",
        "config group `fabric` is 'deepspeed' and `fabric.strategy` left at its config value",
    ),
    # ``compose`` with fixed overrides (a notebook's way).
    "compose": _composed("deepspeed", "ddp", "error"),
    # A file, then what the command line sets (``OmegaConf.from_cli()``).
    "load, then the command line": Shape(
        _script(
            "Fabric(**cfg.fabric)",
            "from omegaconf import OmegaConf\n"
            'cfg = OmegaConf.merge(OmegaConf.load("config.yaml"), OmegaConf.from_cli())\n',
            decorated=False,
        ),
        {"config.yaml": "fabric:\n" + _node("  ")},
        (),
        ("fabric.strategy=ddp",),
        "warning",
        "`fabric.strategy` left at its config value",
    ),
    # A dataclass schema with its defaults, then the command line.
    "structured, then the command line": Shape(
        _script(
            "Fabric(**cfg.fabric)",
            "from dataclasses import dataclass, field\nfrom omegaconf import OmegaConf\n\n\n@dataclass\n"
            "class FabricConfig:\n"
            + "".join(f"    {key}: {type(value).__name__} = {value!r}\n" for key, value in ARGUMENTS.items())
            + "\n\n@dataclass\nclass TrainConfig:\n"
            "    fabric: FabricConfig = field(default_factory=FabricConfig)\n    lr: float = 0.01\n\n\n"
            "cfg = OmegaConf.merge(OmegaConf.structured(TrainConfig), OmegaConf.from_cli())\n",
            decorated=False,
        ),
        {},
        (),
        ("fabric.strategy=ddp",),
        "warning",
        "`fabric.strategy` left at its config value",
    ),
    # ``OmegaConf.load``: the file as it is.
    "omegaconf load": Shape(
        _script(
            "Fabric(**cfg.fabric)",
            'from omegaconf import OmegaConf\ncfg = OmegaConf.load("config.yaml")\n',
            decorated=False,
        ),
        {"config.yaml": "fabric:\n" + _node("  ")},
        (),
        (),
        "error",
        None,
    ),
}

# Twins that must stay silent: the same setups where no option of the configuration is DeepSpeed.
QUIET = {
    "groups without deepspeed": Shape(
        _script("instantiate(cfg.fabric)", HYDRA),
        {
            "conf/config.yaml": "defaults:\n  - fabric: ddp\n",
            "conf/fabric/ddp.yaml": TARGET + _node(strategy="ddp"),
            "conf/fabric/fsdp.yaml": TARGET + _node(strategy="fsdp"),
        },
        (),
        ("fabric=fsdp",),
        "",
        None,
    ),
    "compose picks ddp": _composed("ddp", "deepspeed", ""),
}


# A script that fails before any Fabric check: ``Fabric(**cfg.fabric)`` of a node that still holds
# its ``_target_`` raises a TypeError at ``Fabric(...)`` (it takes its own arguments only), so the
# separate setup after it is never reached.
SPREAD_TARGET = Shape(
    _script("Fabric(**cfg.fabric)", HYDRA),
    {"conf/config.yaml": "fabric:\n  " + TARGET + _node("  ")},
    (),
    (),
    "",
    None,
)


def _findings(tmp_path: Path, shape: Shape) -> list[tuple[str, int, str, str | None]]:
    for relative, text in shape.files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    path = tmp_path / "train.py"
    path.write_text(shape.script)
    analysis = analyze_source(shape.script, str(path), project=Project([str(tmp_path)]))
    return [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_configured_strategy_is_checked(name: str, tmp_path: Path) -> None:
    shape = SHAPES[name]
    assert _findings(tmp_path, shape) == [
        ("FAB001", setup_line(shape.script), shape.severity, shape.condition)
    ]


@pytest.mark.parametrize("name", sorted(QUIET))
def test_no_finding_where_no_option_is_deepspeed(name: str, tmp_path: Path) -> None:
    assert _findings(tmp_path, QUIET[name]) == []


def test_nothing_after_a_fabric_that_cannot_be_built(tmp_path: Path) -> None:
    assert _findings(tmp_path, SPREAD_TARGET) == []


def test_a_config_file_is_a_dependency(tmp_path: Path) -> None:
    """The analysis says which files it read: the server re-checks the script when one changes."""
    shape = SHAPES["config group"]
    _findings(tmp_path, shape)
    path = tmp_path / "train.py"
    analysis = analyze_source(shape.script, str(path), project=Project([str(tmp_path)]))
    read = {Path(p).relative_to(tmp_path).as_posix() for p in analysis.dependencies if p.endswith(".yaml")}
    assert read == set(shape.files)


def test_under_lightning() -> None:
    """With Hydra composing: FAB001's error at the setup line on the DeepSpeed command line, and a
    clean run on the other (the quiet twins run clean on both)."""
    from lightning_harness import Script, run_many

    record = get_record("FAB001")
    env = {"HYDRA_FULL_ERROR": "1"}  # Hydra re-raises the script's error instead of printing it
    # (name, shape, command line, whether Lightning raises FAB001's error there)
    runs = [(name, shape, shape.deepspeed_argv, True) for name, shape in sorted(SHAPES.items())]
    runs += [
        (name, shape, shape.other_argv, False)
        for name, shape in sorted({**SHAPES, **QUIET}.items())
        if not (name in SHAPES and shape.severity == "error")
    ]
    runs += [(name, shape, shape.deepspeed_argv, False) for name, shape in sorted(QUIET.items())]
    # Hydra's ConfigStore lives as long as the process: a script that stores configs runs alone.
    batches = [[run for run in runs if "ConfigStore" not in run[1].script]]
    batches += [[run] for run in runs if "ConfigStore" in run[1].script]
    for batch in batches:
        outcomes = run_many([Script(s.script, argv=argv, files=s.files, env=env) for _, s, argv, _ in batch])
        for (name, shape, argv, raises), outcome in zip(batch, outcomes):
            if not raises:
                assert outcome.error_class is None, (name, argv, outcome.message, outcome.stderr_tail)
                continue
            assert outcome.error_class == record.error_class, (
                name,
                argv,
                outcome.message,
                outcome.stderr_tail,
            )
            assert outcome.raised_by_lightning and record.matches(outcome.message or ""), name
            assert outcome.line == setup_line(shape.script), name
    spread = run_many([Script(SPREAD_TARGET.script, files=SPREAD_TARGET.files, env=env)])[0]
    fabric_line = next(
        n for n, line in enumerate(SPREAD_TARGET.script.splitlines(), 1) if "Fabric(**" in line
    )
    # Python's TypeError at the call (an unexpected keyword), not one of Lightning's checks.
    assert (spread.error_class, spread.line, spread.raised_by_lightning) == ("TypeError", fabric_line, False)


def test_a_changed_config_file_is_read_again(tmp_path: Path) -> None:
    """The project keeps a composition across analyses only while its files and folders are unchanged."""
    shape = SHAPES["config group"]
    _findings(tmp_path, shape)
    path, project = tmp_path / "train.py", Project([str(tmp_path)])
    assert analyze_source(shape.script, str(path), project=project).findings
    deepspeed = tmp_path / "conf/fabric/deepspeed.yaml"
    deepspeed.write_text(deepspeed.read_text().replace("strategy: deepspeed", "strategy: fsdp"))
    assert analyze_source(shape.script, str(path), project=project).findings == []
    (tmp_path / "conf/fabric/zero3.yaml").write_text(shape.files["conf/fabric/deepspeed.yaml"])
    findings = analyze_source(shape.script, str(path), project=project).findings
    assert [f.condition for f in findings] == [
        "config group `fabric` is 'zero3' and `fabric.strategy` left at its config value"
    ]


def test_a_notebook_composes_with_hydra(tmp_path: Path) -> None:
    """The ``compose`` shape (proven above as a script), its code in a notebook's cells: the config
    path is the notebook's folder, as for a kernel started there."""
    shape = SHAPES["compose"]
    for relative, text in shape.files.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    head, _, rest = shape.script.partition("fabric = instantiate")
    cells = [head, "fabric = instantiate" + rest]
    notebook = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {},
                "source": cell.splitlines(keepends=True),
                "outputs": [],
                "execution_count": None,
            }
            for cell in cells
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = tmp_path / "explore.ipynb"
    path.write_text(json.dumps(notebook))
    analysis = analyze_notebook_text(path.read_text(), str(path), project=Project([str(tmp_path)]))
    found = [(f.code, f.severity, f.condition) for f in analysis.findings]
    assert found == [("FAB001", "error", None)]


@pytest.mark.parametrize("order", ["as listed", "reversed"])
def test_the_answer_does_not_depend_on_what_was_checked_before(tmp_path: Path, order: str) -> None:
    """One project checks every shape, in either order: each gets what a fresh project gives it (the
    compositions the project keeps are its files', whatever was composed before)."""
    names = sorted({**SHAPES, **QUIET})
    shapes = {**SHAPES, **QUIET}
    fresh = {}
    for index, name in enumerate(names):
        folder = tmp_path / f"shape{index}"
        folder.mkdir()
        fresh[name] = _findings(folder, shapes[name])
    project = Project([str(tmp_path)])
    for name in names if order == "as listed" else names[::-1]:
        path = tmp_path / f"shape{names.index(name)}" / "train.py"
        analysis = analyze_source(shapes[name].script, str(path), project=project)
        found = [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings]
        assert found == fresh[name], name


def test_what_a_script_stores_is_part_of_the_kept_composition(tmp_path: Path) -> None:
    """Two scripts of one folder store different configs under one name: the project keeps each
    one's composition apart (the stored configs are part of what it is kept by)."""
    deepspeed = SHAPES["structured, in the ConfigStore"]
    ddp = deepspeed.script.replace("strategy: str = 'deepspeed'", "strategy: str = 'ddp'")
    assert ddp != deepspeed.script
    project = Project([str(tmp_path)])
    results = []
    for name, source in (("a.py", deepspeed.script), ("b.py", ddp), ("c.py", deepspeed.script)):
        (tmp_path / name).write_text(source)
        analysis = analyze_source(source, str(tmp_path / name), project=project)
        results.append([f.code for f in analysis.findings])
    assert results == [["FAB001"], [], ["FAB001"]]
