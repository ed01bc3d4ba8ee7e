"""One message per setting problem, whichever way the setting reached the server."""

from __future__ import annotations

import pytest

from fabric_ls import workspace_config
from fabric_ls.workspace_config import SettingsLayer, client_section, layered_settings


@pytest.mark.parametrize("value", [5, "deepspeed", ["FAB001"], None])
def test_a_section_that_is_no_object_gets_one_message_pulled_or_pushed(value: object) -> None:
    # workspace/configuration answers the section itself; didChangeConfiguration sends it nested.
    pulled = client_section(value)
    pushed = client_section({workspace_config.CLIENT_SECTION: value})
    assert pulled == pushed == value
    source = "editor settings (fabricLs)"
    first = layered_settings([SettingsLayer(source, pulled, "/w")])
    second = layered_settings([SettingsLayer(source, pushed, "/w")])
    assert first == second


def test_flat_and_nested_sections_are_read_alike() -> None:
    assert client_section({"fabricLs": {"strategy": "fsdp"}}) == {"strategy": "fsdp"}
    assert client_section({"strategy": "fsdp"}) == {"strategy": "fsdp"}
    assert client_section({"settings": {"strategy": "fsdp"}}) == {"strategy": "fsdp"}
