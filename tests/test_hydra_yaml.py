"""The YAML reader of fabric-ls reads what OmegaConf's loader reads, or says it cannot.

Each document is read by both; where fabric-ls gives a value, it is OmegaConf's, except for nodes
it marks ``UNSUPPORTED`` (an anchor, a tag, a block scalar), which the analysis treats as unknown.
The documents: the shapes config files use, and every YAML file Hydra itself ships.
"""

from __future__ import annotations

from pathlib import Path

import hydra
import pytest
import yaml
from config_support import agrees, half_typed
from omegaconf._utils import get_yaml_loader

from fabric_ls.analysis.yaml_subset import MAX_YAML_CHARS, UNSUPPORTED, load_yaml, package_directive

DOCUMENTS = {
    "nested mappings": "fabric:\n  strategy: ddp\n  devices: 2\n  precision: bf16-mixed\nseed: 42\n",
    "comments": "# a header\nstrategy: deepspeed  # the strategy\nname: 'a # not a comment'\nurl: x#y\n",
    "scalars": (
        "a: yes\nb: No\nc: on\nd: null\ne: ~\nf: 1e-3\ng: 2.5\nh: -3\ni: 1_000\nj: .inf\nk: 0.\n"
        "l: '007'\nm: \"tab\\tchar\"\nn: True\no: 3.0e+2\np: ???\nq: ${fabric.strategy}\nr: x:y\n"
    ),
    "sequences": "devices: [0, 1]\nloggers:\n  - csv\n  - tensorboard\nnested:\n- - 1\n  - 2\n- [3, 4]\n",
    "indentless sequence": "defaults:\n- fabric: ddp\n- _self_\nseed: 1\n",
    "mappings in a sequence": (
        "callbacks:\n  - _target_: my.Callback\n    every: 2\n  - _target_: other.Callback\n"
        "    inner:\n      deep: [a, {b: c}]\n"
    ),
    "flow collections": "a: {x: 1, y: [2, 3], z: {w: 'q'}}\nb: [ ]\nc: {}\nd: [a, b,\n    c]\n",
    "quoted keys": "\"a.b\": 1\n'c': two\n",
    "empty values": "a:\nb: 1\nc:\n  d:\n",
    "block scalar": "help: |\n  line one\n  line two\nnext: 3\n",
    "folded scalar": "help: >-\n  folded\n  text\nnext: 3\n",
    "anchor and alias": "base: &base\n  lr: 0.1\nother: *base\nafter: 1\n",
    "tag": "value: !!str 12\nafter: 1\n",
    "dates": "when: 2024-01-02\nratio: 1:30\noctal: 017\nhexa: 0x1f\n",
    "document markers": "---\na: 1\nb: 2\n...\n",
    "only comments": "# @package _global_\n# nothing else\n",
    "empty": "",
    "unicode": "name: ünïcode\n",
}


def _omegaconf(text: str) -> object:
    try:
        loaded = yaml.load(text, Loader=get_yaml_loader())
    except yaml.constructor.ConstructorError:
        return "cannot construct"
    return {} if loaded is None else loaded  # an empty config file is an empty config


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_reads_what_omegaconf_reads(name: str) -> None:
    text = DOCUMENTS[name]
    ours = load_yaml(text)
    assert ours is not None, "fabric-ls declined a document it should read"
    assert agrees(ours, _omegaconf(text)), (ours, _omegaconf(text))


def test_marks_what_it_does_not_follow() -> None:
    assert load_yaml(DOCUMENTS["block scalar"]) == {"help": UNSUPPORTED, "next": 3}
    assert load_yaml(DOCUMENTS["anchor and alias"]) == {"base": UNSUPPORTED, "other": UNSUPPORTED, "after": 1}
    dates = load_yaml(DOCUMENTS["dates"])
    assert dates is not None and set(dates.values()) == {UNSUPPORTED}


def test_every_yaml_file_hydra_ships() -> None:
    files = sorted(Path(hydra.__file__).parent.rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        text = path.read_text(encoding="utf-8")
        ours = load_yaml(text)
        assert ours is not None, path
        assert agrees(ours, _omegaconf(text)), path


@pytest.mark.parametrize(
    "text",
    [
        "a: [1, 2",  # an unclosed flow sequence
        "a: 'open",  # an unclosed quote
        "a: 1\n  b: 2\n",  # a line indented under a scalar
        "- a\nb: 1\n",  # a mapping after a top-level sequence
        "a:\n  - 1\n  b: 2\n",  # a key among a sequence's items
        "%YAML 1.1\n---\na: 1\n",  # a directive
    ],
)
def test_declines_what_it_cannot_follow(text: str) -> None:
    assert load_yaml(text) is None


def _nested(depth: int) -> str:
    return "a:\n" + "".join(f"{' ' * (2 * i)}k{i}:\n" for i in range(1, depth))


def test_bounds() -> None:
    """A huge file or a pathological nesting is declined, never an exception."""
    assert load_yaml("a: " + "x" * MAX_YAML_CHARS) is None
    assert load_yaml(_nested(60)) is not None
    assert load_yaml(_nested(900)) is None  # deeper than the reader follows


def test_package_directive() -> None:
    assert package_directive("# @package _global_\nfabric:\n  strategy: ddp\n") == "_global_"
    assert package_directive("# a comment\n\n# @package db.main\na: 1\n") == "db.main"
    assert package_directive("a: 1\n# @package _global_\n") is None


def test_half_typed_documents_never_raise() -> None:
    """A config file being edited (a character added or removed anywhere): a value or None, never an
    exception, and what it reads agrees with OmegaConf where OmegaConf reads it too."""
    import random

    generator = random.Random(7)
    alphabet = " \n:-[]{},'\"#&*!|>x1."
    for text in DOCUMENTS.values():
        for document in half_typed(text, generator, alphabet):
            ours = load_yaml(document)
            if ours is None:
                continue
            try:
                theirs = _omegaconf(document)
            except yaml.YAMLError:
                continue  # OmegaConf refuses it: the script fails before any Fabric call
            if theirs != "cannot construct":
                assert agrees(ours, theirs), (document, ours, theirs)
