"""fabric-ls composes a Hydra configuration as Hydra does.

Each tree of config files is composed by Hydra's own ``compose`` and by
``fabric_ls.analysis.hydra_config`` (with the same fixed overrides), and the two are compared value
by value. fabric-ls may say "unknown" only where Hydra's value is a missing ``???`` or comes from an
interpolation it does not follow (a resolver). Then, without fixed overrides (``@hydra.main``, where
the command line may pick anything), each group with several files is one choice.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hydra import compose as hydra_compose
from hydra import initialize_config_dir
from omegaconf import OmegaConf

from fabric_ls.analysis.hydra_config import compose
from fabric_ls.analysis.hydra_values import ConfigValues
from fabric_ls.analysis.values import Choice, ConfigMapping, Const, Seq, Unknown, Value

TREES: dict[str, dict[str, str]] = {
    # Groups, the own content last by default, a nested group, a config of the group's own.
    "training": {
        "config.yaml": (
            "defaults:\n  - fabric: ddp\n  - model: small\n  - optional logger: csv\n"
            "  - exp: null\n  - _self_\n"
            "seed: 42\nname: ${model.name}-${seed}\n"
            "fabric:\n  devices: 2\n"
        ),
        "fabric/base.yaml": "_target_: lightning.fabric.Fabric\naccelerator: cuda\nprecision: bf16-mixed\n",
        "fabric/ddp.yaml": "defaults:\n  - base\n  - _self_\nstrategy: ddp\n",
        "fabric/deepspeed.yaml": (
            "defaults:\n  - base\n  - _self_\n"
            "strategy:\n  _target_: lightning.fabric.strategies.DeepSpeedStrategy\n  stage: 3\n"
        ),
        "fabric/fsdp.yaml": "defaults:\n  - base\nstrategy: fsdp\nprecision: 32-true\n",
        "model/small.yaml": "defaults:\n  - block: mlp\nname: small\nwidth: 128\n",
        "model/large.yaml": "defaults:\n  - block: attention\nname: large\nwidth: 1024\n",
        "model/block/mlp.yaml": "kind: mlp\nlayers: [64, 64]\n",
        "model/block/attention.yaml": "kind: attention\nheads: 8\n",
        "exp/big.yaml": (
            "# @package _global_\ndefaults:\n  - override /model: large\n  - override /fabric: deepspeed\n"
            "seed: 7\nfabric:\n  devices: 8\n"
        ),
    },
    # ``_self_`` first, packages (header, entry ``@``), a group listed twice, interpolations.
    "packages": {
        "config.yaml": (
            "# @package _global_\ndefaults:\n  - _self_\n  - db: mysql\n  - db@replica: pg\n  - extra: one\n"
            "db:\n  port: 1\nhost_copy: ${db.host}\nrelative:\n  a: 1\n  b: ${.a}\n  c: ${..seed}\nseed: 3\n"
            "when: ${now:%Y}\nmust: ???\n"
        ),
        "db/mysql.yaml": "defaults:\n  - engine@storage: innodb\nhost: mysql\nport: 3306\n",
        "db/pg.yaml": "host: pg\nport: 5432\n",
        "db/engine/innodb.yaml": "name: innodb\n",
        "db/engine/aria.yaml": "# @package _global_\nengine_name: aria\n",
        "extra/one.yaml": "# @package top.level\nvalue: [1, {a: b}]\n",
        "extra/two.yaml": "value: 2\n",
        "extra/three.yaml": "- 1\n- {a: b}\n",  # a list, at the group's package
    },
}

OVERRIDES = {
    "training": [
        [],
        ["fabric=deepspeed"],
        ["fabric=fsdp", "model=large"],
        ["exp=big"],
        ["exp=big", "model=small"],
        ["fabric.devices=4", "seed=1"],
        ["model/block=attention"],
    ],
    "packages": [[], ["db=pg"], ["db/engine@db.storage=aria"], ["extra=two"], ["extra=three"], ["db.port=9"]],
}

_UNKNOWN = object()


def _python(value: Value) -> object:
    if isinstance(value, ConfigMapping):
        return {key: _python(item) for key, item in value.items.items()}
    if isinstance(value, Seq):
        return [_python(item) for item in value.items]
    if isinstance(value, Const):
        return value.value
    assert isinstance(value, Unknown), value  # fixed overrides: no choice is left
    return _UNKNOWN


def _compare(ours: object, raw: object, resolved: object, path: str, problems: list[str]) -> None:
    if ours is _UNKNOWN:
        if not ("${" in repr(raw) or raw == "???"):
            problems.append(f"{path}: unknown, Hydra has {resolved!r}")
        return
    if isinstance(resolved, dict):
        if not isinstance(ours, dict) or list(ours) != list(resolved):
            problems.append(f"{path}: keys {ours!r} where Hydra has {resolved!r}")
            return
        for key in resolved:
            child_raw = raw.get(key) if isinstance(raw, dict) else raw
            _compare(ours[key], child_raw, resolved[key], f"{path}.{key}", problems)
    elif isinstance(resolved, list):
        if not isinstance(ours, list) or len(ours) != len(resolved):
            problems.append(f"{path}: {ours!r} where Hydra has {resolved!r}")
            return
        raws = raw if isinstance(raw, list) else [raw] * len(resolved)
        for index, (a, b, c) in enumerate(zip(ours, raws, resolved)):
            _compare(a, b, c, f"{path}[{index}]", problems)
    elif not (
        type(ours) is type(resolved)
        and (ours == resolved or (isinstance(ours, float) and math.isnan(ours) and math.isnan(resolved)))
    ):
        problems.append(f"{path}: {ours!r} where Hydra has {resolved!r}")


def _write(tree: dict[str, str], root: Path) -> str:
    for relative, text in tree.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return str(root)


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _list(directory: str) -> list[str]:
    try:
        return os.listdir(directory)
    except OSError:
        return []


def _hydra(config_dir: str, overrides: list[str]) -> tuple[object, object]:
    with initialize_config_dir(version_base="1.3", config_dir=config_dir):
        config = hydra_compose(config_name="config", overrides=overrides)
    raw = OmegaConf.to_container(config, resolve=False)
    try:
        resolved = OmegaConf.to_container(config, resolve=True)
    except Exception:  # a resolver Hydra's compose cannot run outside an app (``now``)
        resolved = {key: value for key, value in raw.items()}  # type: ignore[union-attr]
        for key in list(resolved):
            try:
                resolved[key] = OmegaConf.to_container(config, resolve=True)[key]  # type: ignore[index]
            except Exception:
                pass
    return raw, resolved


@pytest.mark.parametrize(
    "tree,overrides", [(name, overrides) for name in sorted(TREES) for overrides in OVERRIDES[name]]
)
def test_composes_as_hydra_does(tree: str, overrides: list[str], tmp_path: Path) -> None:
    config_dir = _write(TREES[tree], tmp_path)
    raw, resolved = _hydra(config_dir, overrides)
    composition = compose(config_dir, "config", _read, _list, overrides=overrides)
    assert composition is not None
    ours = _python(ConfigValues(composition, "test").root())
    problems: list[str] = []
    _compare(ours, raw, resolved, "cfg", problems)
    assert not problems, problems


def _config_values(value: Value) -> object:
    """What the files say, each value "left at its config value" (not set on the command line)."""
    if isinstance(value, Choice) and value.descriptions[0].endswith("left at its config value"):
        return _config_values(value.options[0])
    if isinstance(value, ConfigMapping):
        return {key: _config_values(item) for key, item in value.items.items()}
    return _python(value)


def test_every_group_option_is_a_choice(tmp_path: Path) -> None:
    config_dir = _write(TREES["training"], tmp_path)
    composition = compose(config_dir, "config", _read, _list)
    assert composition is not None
    config = ConfigValues(composition, "test").root()
    assert isinstance(config, ConfigMapping)
    fabric = config.items["fabric"]
    assert isinstance(fabric, ConfigMapping)
    strategy = fabric.items["strategy"]
    # One value per option of the group ``fabric``; the exp/big.yaml override changes which option
    # is the default, so none is called that.
    assert isinstance(strategy, Choice) and strategy.subject == "config group `fabric`"
    assert strategy.option_texts == ("'ddp'", "'base'", "'deepspeed'", "'fsdp'")
    ddp, base, deepspeed, fsdp = strategy.options
    # A value is the file's, "left at its config value", or "set on the command line".
    assert isinstance(ddp, Choice) and ddp.descriptions == (
        "`fabric.strategy` left at its config value",
        "`fabric.strategy` set on the command line",
    )
    assert [_config_values(ddp), _config_values(fsdp)] == ["ddp", "fsdp"]
    assert isinstance(base, Unknown)  # base.yaml alone sets no strategy
    assert isinstance(deepspeed, ConfigMapping) and _config_values(deepspeed) == {
        "_target_": "lightning.fabric.strategies.DeepSpeedStrategy",
        "stage": 3,
    }
    # Where every option agrees, one value: no choice of the group.
    accelerator = fabric.items["accelerator"]
    assert isinstance(accelerator, Choice) and accelerator.key == "test:fabric.accelerator"
    # ``_target_`` is what is built, not a command-line choice: only the group decides it.
    target = fabric.items["_target_"]
    assert isinstance(target, Const) and target.value == "lightning.fabric.Fabric"


def test_what_it_cannot_compose(tmp_path: Path) -> None:
    config_dir = _write(
        {
            "config.yaml": "defaults:\n  - fabric: [ddp, fsdp]\n",  # several options at once
            "bad.yaml": "a: [1, 2\n",
            "plain.yaml": "defaults:\n  - bad\n",
            "itself.yaml": "defaults:\n  - itself\n",  # a cycle
            "cycle.yaml": "defaults:\n  - g: a\n",
            "g/a.yaml": "defaults:\n  - /g: a\n",
            "listed.yaml": "- 1\n- 2\n",  # not a mapping
            "odd.yaml": "defaults: 3\n",
        },
        tmp_path,
    )
    for name in ("itself", "cycle", "listed", "odd"):
        assert compose(config_dir, name, _read, _list) is None, name
    assert compose(config_dir, "config", _read, _list) is None
    assert compose(config_dir, "plain", _read, _list) is None  # a file it cannot read
    assert compose(config_dir, "absent", _read, _list) is None
    assert compose(config_dir, "config", _read, _list, overrides=["+extra=1"]) is None


def test_configs_stored_in_the_config_store(tmp_path: Path) -> None:
    """A group whose options are stored configs (``ConfigStore.store``), the primary config a file: the
    same composition as Hydra's, for each option. (The group's name is this test's own: the store
    lives as long as the process.)"""
    from dataclasses import dataclass

    from hydra.core.config_store import ConfigStore

    @dataclass
    class Ddp:
        strategy: str = "ddp"
        devices: int = 2

    @dataclass
    class Deepspeed:
        strategy: str = "deepspeed"
        devices: int = 8

    store = ConfigStore.instance()
    store.store(group="stored_fabric_test", name="ddp", node=Ddp)
    store.store(group="stored_fabric_test", name="deepspeed", node=Deepspeed)
    stored = {
        "stored_fabric_test/ddp": {"strategy": "ddp", "devices": 2},
        "stored_fabric_test/deepspeed": {"strategy": "deepspeed", "devices": 8},
    }
    config_dir = _write(
        {"config.yaml": "defaults:\n  - stored_fabric_test: ddp\n  - _self_\nseed: 1\n"}, tmp_path
    )
    for overrides in ([], ["stored_fabric_test=deepspeed"], ["stored_fabric_test.devices=4"]):
        raw, resolved = _hydra(config_dir, overrides)
        composition = compose(config_dir, "config", _read, _list, overrides=overrides, stored=stored)
        assert composition is not None
        problems: list[str] = []
        _compare(_python(ConfigValues(composition, "test").root()), raw, resolved, "cfg", problems)
        assert not problems, (overrides, problems)
