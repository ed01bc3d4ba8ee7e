"""Every test in this folder drives a real editor: they carry the `editors` marker.

The default `pytest` run leaves them out (they need system packages: `editors/tests/setup.sh`
installs them); `pytest -m editors` runs them, and `.ci/run` does on every submission.
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.editors)
