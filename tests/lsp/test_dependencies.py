"""A helper module changes (in the editor or on disk): every open script that imports it is re-analysed."""

from __future__ import annotations

import pathlib

from conftest import Session, copy_scripts, eventually, uri_of
from lsprotocol import types


def _codes(diagnostics: list[types.Diagnostic]) -> list[str]:
    return [str(diagnostic.code) for diagnostic in diagnostics]


async def _open_project(session: Session, tmp_path: pathlib.Path) -> tuple[str, pathlib.Path]:
    copy_scripts(tmp_path, "helper_project")
    project = tmp_path / "helper_project"
    uri = session.open(project / "train.py")
    assert _codes(await session.diagnostics(uri)) == ["FAB001"]
    return uri, project


async def test_editing_the_helper_in_the_editor_reanalyses_the_importer(
    session: Session, tmp_path: pathlib.Path
) -> None:
    train, project = await _open_project(session, tmp_path)
    helpers = session.open(project / "helpers.py")
    await session.diagnostics(helpers)

    session.replace(helpers, session.texts[helpers].replace('"deepspeed"', '"ddp"'))

    # train.py itself did not change: its diagnostics change because helpers.py did.
    assert await session.diagnostics(train, until=lambda found: not found) == []

    # Closing the unsaved helper falls back to the file on disk (still "deepspeed").
    session.close(helpers)
    assert _codes(await session.diagnostics(train, until=lambda found: bool(found))) == ["FAB001"]


async def test_a_helper_changed_on_disk_reanalyses_the_importer(
    session: Session, tmp_path: pathlib.Path
) -> None:
    train, project = await _open_project(session, tmp_path)
    helpers = project / "helpers.py"

    helpers.write_text(helpers.read_text(encoding="utf-8").replace('"deepspeed"', '"fsdp"'), encoding="utf-8")
    session.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri_of(helpers), type=types.FileChangeType.Changed)]
        )
    )

    assert await session.diagnostics(train, until=lambda found: not found) == []
    hover = await session.hover(train, 6, 12)
    assert hover is not None and "FSDPStrategy" in hover.contents.value  # type: ignore[union-attr]


async def test_the_server_registers_file_watchers_with_clients_that_allow_it(session: Session) -> None:
    async def methods() -> set[str]:
        await session.status()  # registration follows `initialized`, in the background
        return {registration.method for registration in session.client.registrations}  # type: ignore[attr-defined]

    if session.profile == "visual-studio-code":  # declares dynamic registration for both
        expected = {types.WORKSPACE_DID_CHANGE_WATCHED_FILES, types.WORKSPACE_DID_CHANGE_CONFIGURATION}
        assert await eventually(methods, lambda found: found == expected) == expected
    else:
        assert await methods() == set()


_HYDRA_SCRIPT = """import hydra
import torch
from hydra.utils import instantiate


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg):
    fabric = instantiate(cfg.fabric)
    fabric.launch()
    model = torch.nn.Linear(4, 2)
    model = fabric.setup_module(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    optimizer = fabric.setup_optimizers(optimizer)


if __name__ == "__main__":
    main()
"""


async def test_a_hydra_config_changed_on_disk_reanalyses_the_script(
    session: Session, tmp_path: pathlib.Path
) -> None:
    """The script is configured by YAML files: when one changes (or a group gains an option), the
    script's diagnostics follow."""
    fabric = tmp_path / "conf" / "fabric"
    fabric.mkdir(parents=True)
    (tmp_path / "conf" / "config.yaml").write_text("defaults:\n  - fabric: deepspeed\n")
    deepspeed = fabric / "deepspeed.yaml"
    deepspeed.write_text(
        "_target_: lightning.fabric.Fabric\naccelerator: cuda\ndevices: 2\nstrategy: deepspeed\n"
    )
    (tmp_path / "train.py").write_text(_HYDRA_SCRIPT)
    train = session.open(tmp_path / "train.py")
    found = await session.diagnostics(train)
    assert (
        _codes(found) == ["FAB001"] and "when `fabric.strategy` left at its config value" in found[0].message
    )

    deepspeed.write_text(deepspeed.read_text().replace("strategy: deepspeed", "strategy: ddp"))
    session.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri_of(deepspeed), type=types.FileChangeType.Changed)]
        )
    )
    assert await session.diagnostics(train, until=lambda found: not found) == []

    # A new option of the group: the command line may pick it.
    added = fabric / "zero.yaml"
    added.write_text(
        "_target_: lightning.fabric.Fabric\naccelerator: cuda\ndevices: 2\nstrategy: deepspeed\n"
    )
    session.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri_of(added), type=types.FileChangeType.Created)]
        )
    )
    found = await session.diagnostics(train, until=lambda found: bool(found))
    assert _codes(found) == ["FAB001"] and "config group `fabric` is 'zero'" in found[0].message


_JSON_SCRIPT = """import json

import torch
from lightning.fabric import Fabric

with open("config.json") as f:
    config = json.load(f)
fabric = Fabric(**config["fabric"])
fabric.launch()
model = torch.nn.Linear(4, 2)
model = fabric.setup_module(model)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
optimizer = fabric.setup_optimizers(optimizer)
"""


async def test_a_json_config_changed_on_disk_reanalyses_the_script(
    session: Session, tmp_path: pathlib.Path
) -> None:
    """A script that loads its settings from a JSON file: the file is a dependency like a helper module."""
    config = tmp_path / "config.json"
    config.write_text('{"fabric": {"accelerator": "cuda", "devices": 2, "strategy": "deepspeed"}}')
    (tmp_path / "train.py").write_text(_JSON_SCRIPT)
    train = session.open(tmp_path / "train.py")
    assert _codes(await session.diagnostics(train)) == ["FAB001"]

    config.write_text('{"fabric": {"accelerator": "cuda", "devices": 2, "strategy": "ddp"}}')
    session.client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            changes=[types.FileEvent(uri=uri_of(config), type=types.FileChangeType.Changed)]
        )
    )
    assert await session.diagnostics(train, until=lambda found: not found) == []
