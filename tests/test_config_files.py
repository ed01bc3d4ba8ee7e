"""Configuration files a script reads itself: ``yaml.safe_load(open("config.yaml"))``, ``json.load(f)``.

Each shape is FAB001's record sample with its Fabric built from a YAML or JSON file beside the
script. fabric-ls must report the sample's FAB001 at the separate ``setup_optimizers`` (an error
where the file is fixed, a warning where the command line may name another), and nothing where the
file says DDP. Then each shape runs under the real Lightning with its files: FAB001's error at that
line, and a clean run for the twin. The YAML reader's plain dialect is checked against PyYAML's
``safe_load``, as its OmegaConf dialect is against OmegaConf (tests/test_hydra_yaml.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

import hydra
import pytest
import yaml
from command_line_support import _SAMPLE, setup_line
from config_support import agrees, half_typed, sample_arguments
from test_hydra_yaml import DOCUMENTS

from fabric_ls.analysis.yaml_subset import PLAIN_YAML, load_yaml
from fabric_ls.engine import Project, analyze_source
from fabric_ls.records import get_record

# ----- the reader, as PyYAML's safe_load ------------------------------------------------------

PLAIN_DOCUMENTS = {
    **DOCUMENTS,
    # Where PyYAML and OmegaConf differ: a float needs a dot, and a signed exponent.
    "floats": "a: 1e-3\nb: 1.0e5\nc: 1.0e+5\nd: .5\ne: -.5\nf: 1.\ng: 5e+3\nh: -2.5E-1\ni: 1_0.5\n",
}


def _pyyaml(text: str) -> object:
    loaded = yaml.safe_load(text)
    return {} if loaded is None else loaded  # the reader gives {} for an empty document


@pytest.mark.parametrize("name", sorted(PLAIN_DOCUMENTS))
def test_reads_what_safe_load_reads(name: str) -> None:
    text = PLAIN_DOCUMENTS[name]
    ours = load_yaml(text, PLAIN_YAML)
    assert ours is not None, "fabric-ls declined a document it should read"
    assert agrees(ours, _pyyaml(text)), (ours, _pyyaml(text))


def test_the_dialects_differ_on_floats_only() -> None:
    plain = load_yaml(PLAIN_DOCUMENTS["floats"], PLAIN_YAML)
    omegaconf = load_yaml(PLAIN_DOCUMENTS["floats"])
    assert plain == {**omegaconf, "a": "1e-3", "b": "1.0e5", "g": "5e+3"}  # type: ignore[dict-item]


def test_every_yaml_file_hydra_ships_as_safe_load_reads_it() -> None:
    files = sorted(Path(hydra.__file__).parent.rglob("*.yaml"))
    assert len(files) > 20
    for path in files:
        text = path.read_text(encoding="utf-8")
        ours = load_yaml(text, PLAIN_YAML)
        assert ours is not None, path
        assert agrees(ours, _pyyaml(text)), path


def test_half_typed_documents_agree_with_safe_load() -> None:
    """A file being edited: a value or None, never an exception, and PyYAML's value where it reads one."""
    import random

    generator = random.Random(11)
    alphabet = " \n:-[]{},'\"#&*!|>x1.e"
    for text in PLAIN_DOCUMENTS.values():
        for document in half_typed(text, generator, alphabet):
            ours = load_yaml(document, PLAIN_YAML)
            if ours is None:
                continue
            try:
                theirs = _pyyaml(document)
            except yaml.YAMLError:
                continue  # PyYAML refuses it: the script fails before any Fabric call
            assert agrees(ours, theirs), (document, ours, theirs)


# ----- scripts --------------------------------------------------------------------------------


ARGUMENTS = sample_arguments()
assert ARGUMENTS["strategy"] == "deepspeed"


def _yaml(strategy: str = "deepspeed", key: str = "fabric") -> str:
    values = {**ARGUMENTS, "strategy": strategy}
    entries = "".join(f"  {k}: {v}\n" for k, v in values.items())
    return f"# the run's settings\n{key}:\n{entries}lr: 1e-3\n"


def _json(strategy: str = "deepspeed") -> str:
    return json.dumps({"fabric": {**ARGUMENTS, "strategy": strategy}, "lr": 0.001}, indent=2)


def _script(header: str, fabric: str = 'Fabric(**config["fabric"])') -> str:
    """The sample after its Fabric line, the Fabric built from ``config`` (read by ``header``)."""
    body = [
        line
        for line in _SAMPLE.source.splitlines()
        if line.strip() and not line.startswith(("import ", "from ", "fabric = Fabric("))
    ]
    imports = "import json\nimport os\nfrom pathlib import Path\n\nimport torch\nimport yaml\n"
    imports += "from lightning.fabric import Fabric\n\n"
    return imports + header + f"fabric = {fabric}\n" + "\n".join(body) + "\n"


class Shape(NamedTuple):
    script: str
    files: dict[str, str]
    other_files: dict[str, str]  # the same names with DDP: the quiet twin
    argv: tuple[str, ...]
    severity: str
    condition: str | None


def _fixed(header: str, name: str = "config.yaml", fabric: str = 'Fabric(**config["fabric"])') -> Shape:
    text, other = (_json(), _json("ddp")) if name.endswith(".json") else (_yaml(), _yaml("ddp"))
    return Shape(_script(header, fabric), {name: text}, {name: other}, (), "error", None)


SHAPES = {
    "with open, safe_load": _fixed('with open("config.yaml") as f:\n    config = yaml.safe_load(f)\n'),
    "json.load of open": _fixed('config = json.load(open("config.json"))\n', "config.json"),
    "json.loads of read_text": _fixed(
        'config = json.loads(Path("config.json").read_text(encoding="utf-8"))\n', "config.json"
    ),
    "Path(__file__).parent": _fixed(
        'HERE = Path(__file__).parent\nconfig = yaml.safe_load((HERE / "config.yaml").read_text())\n'
    ),
    "os.path.join, yaml.load with a Loader": _fixed(
        'path = os.path.join(os.path.dirname(__file__), "config.yaml")\n'
        "with open(path) as f:\n    config = yaml.load(f, Loader=yaml.SafeLoader)\n"
    ),
    "Path.open, keywords from the file": _fixed(
        'with Path("config.yaml").open() as f:\n    config = yaml.safe_load(f)["fabric"]\n',
        fabric=(
            'Fabric(accelerator=config["accelerator"], devices=config["devices"],'
            ' strategy=config["strategy"])'
        ),
    ),
    # The command line may name another file: a warning, under that condition.
    "argparse --config": Shape(
        _script(
            "import argparse\n\nparser = argparse.ArgumentParser()\n"
            'parser.add_argument("--config", default="config.yaml")\nargs = parser.parse_args()\n'
            "with open(args.config) as f:\n    config = yaml.safe_load(f)\n"
        ),
        {"config.yaml": _yaml(), "ddp.yaml": _yaml("ddp")},
        {"config.yaml": _yaml("ddp")},
        (),
        "warning",
        "`--config` left at its default 'config.yaml'",
    ),
}

# Read in ways that give no known values: fabric-ls stays silent (as before these were read).
UNREAD = {
    # PyYAML 6 refuses ``yaml.load`` without a Loader (a TypeError before any Fabric call).
    "yaml.load without a Loader": _fixed('with open("config.yaml") as f:\n    config = yaml.load(f)\n'),
    # BaseLoader keeps every scalar a string, a resolution fabric-ls does not follow (Lightning
    # takes ``devices="2"`` too, so this one is a miss: not run under Lightning below).
    "BaseLoader": _fixed(
        'with open("config.yaml") as f:\n    config = yaml.load(f, Loader=yaml.BaseLoader)\n'
    ),
    "a file that is not there": _fixed('with open("missing.yaml") as f:\n    config = yaml.safe_load(f)\n'),
    "opened for writing": _fixed('with open("config.yaml", "w+") as f:\n    config = yaml.safe_load(f)\n'),
    "a part of the file": _fixed('with open("config.yaml") as f:\n    config = yaml.safe_load(f.read(10))\n'),
}


def _findings(tmp_path: Path, script: str, files: dict[str, str]) -> list[tuple[str, int, str, str | None]]:
    for relative, text in files.items():
        (tmp_path / relative).write_text(text)
    path = tmp_path / "train.py"
    path.write_text(script)
    analysis = analyze_source(script, str(path), project=Project([str(tmp_path)]))
    return [(f.code, f.span.start_line + 1, f.severity, f.condition) for f in analysis.findings]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_strategy_in_the_file_is_checked(name: str, tmp_path: Path) -> None:
    shape = SHAPES[name]
    assert _findings(tmp_path, shape.script, shape.files) == [
        ("FAB001", setup_line(shape.script), shape.severity, shape.condition)
    ]


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_no_finding_where_the_file_says_ddp(name: str, tmp_path: Path) -> None:
    shape = SHAPES[name]
    assert _findings(tmp_path, shape.script, shape.other_files) == []


@pytest.mark.parametrize("name", sorted(UNREAD))
def test_no_finding_from_a_file_it_does_not_read(name: str, tmp_path: Path) -> None:
    shape = UNREAD[name]
    assert _findings(tmp_path, shape.script, shape.files) == []


def test_the_file_is_a_dependency_and_its_values_say_where_they_were_read(tmp_path: Path) -> None:
    """The server re-checks the script when the file changes; the strategy's provenance names it."""
    shape = SHAPES["with open, safe_load"]
    _findings(tmp_path, shape.script, shape.files)
    path = tmp_path / "train.py"
    analysis = analyze_source(shape.script, str(path), project=Project([str(tmp_path)]))
    assert str(tmp_path / "config.yaml") in analysis.dependencies
    (site,) = analysis.fabric_sites
    notes = [origin.note for candidate in site.candidates for origin in candidate.provenance]
    assert "read from `config.yaml`" in notes, notes


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    shape = SHAPES["with open, safe_load"]
    project = Project([str(tmp_path)])
    _findings(tmp_path, shape.script, shape.files)
    path = tmp_path / "train.py"
    assert analyze_source(shape.script, str(path), project=project).findings
    (tmp_path / "config.yaml").write_text(shape.other_files["config.yaml"] + "# edited\n")
    assert analyze_source(shape.script, str(path), project=project).findings == []


def test_under_lightning() -> None:
    """With the files beside the script: FAB001's error at the setup line, and a clean run of the twin;
    the unread shapes fail (if at all) before any Fabric check, never at the setup line."""
    from lightning_harness import Script, run_many

    record = get_record("FAB001")
    names = sorted(SHAPES)
    scripts = []
    for name in names:
        shape = SHAPES[name]
        scripts.append(Script(shape.script, files=shape.files, argv=shape.argv))
        scripts.append(Script(shape.script, files=shape.other_files, argv=shape.argv))
    outcomes = iter(run_many(scripts, profile="gpu8"))
    for name in names:
        failing, quiet = next(outcomes), next(outcomes)
        assert failing.error_class == record.error_class, (name, failing.message, failing.stderr_tail)
        assert failing.line == setup_line(SHAPES[name].script) and failing.raised_by_lightning, name
        assert quiet.ok, (name, quiet.error_class, quiet.message, quiet.stderr_tail)
    # The file the command line names instead: the twin's settings, a clean run.
    shape = SHAPES["argparse --config"]
    named = Script(shape.script, files=shape.files, argv=("--config", "ddp.yaml"))
    other = run_many([named], profile="gpu8")[0]
    assert other.ok, (other.error_class, other.message)
    failing_early = sorted(name for name in UNREAD if name != "BaseLoader")
    unread = run_many(
        [Script(UNREAD[name].script, files=UNREAD[name].files) for name in failing_early], profile="gpu8"
    )
    for name, outcome in zip(failing_early, unread):
        assert not outcome.raised_by_lightning, (name, outcome.error_class, outcome.message)
