"""User settings shared by the CLI and the server, with validation."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

SEVERITIES = ("error", "warning", "information", "hint", "off")


@dataclass(frozen=True)
class Settings:
    """What the user can configure.

    ``strategy`` is assumed where the script leaves the strategy to ``fabric run``
    (no ``strategy=``, ``"auto"``, or a value that cannot be known).
    """

    strategy: Optional[str] = None
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    severity: tuple[tuple[str, str], ...] = ()
    python: Optional[str] = None
    # Where diagnostics' rule links point (None: the pages installed with fabric-ls).
    docs_base_url: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def wants(self, code: str) -> bool:
        """Whether findings of rule ``code`` are reported (prefix matching, like ruff)."""
        if self.select and not any(code.startswith(prefix) for prefix in self.select):
            return False
        return not any(code.startswith(prefix) for prefix in self.ignore)

    def severity_for(self, code: str, default: str) -> str:
        for rule, level in self.severity:
            if code.startswith(rule):
                return level
        return default


def _as_codes(value: Any, key: str, problems: list[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        problems.append(f'`{key}` must be a list of rule codes such as ["FAB001"]; got {value!r}')
        return ()
    codes = tuple(v.strip().upper() for v in value)
    bad = [c for c in codes if not c.startswith("FAB")]
    if bad:
        problems.append(f"`{key}` holds unknown rule codes {bad}; codes look like FAB001")
        return tuple(c for c in codes if c.startswith("FAB"))
    return codes


def parse_settings(raw: Mapping[str, Any], base: Settings = Settings()) -> tuple[Settings, list[str]]:
    """Validate a settings mapping (pyproject or editor); return settings and problems.

    A bad key keeps the default for that key and yields a message; nothing raises.
    """
    from fabric_ls.analysis.strategies import is_known_strategy_name

    problems: list[str] = []
    result = base
    for key, value in raw.items():
        normal = key.replace("-", "_")
        if normal == "strategy":
            if value in (None, ""):
                result = replace(result, strategy=None)
            elif isinstance(value, str) and is_known_strategy_name(value):
                result = replace(result, strategy=value.lower())
            else:
                problems.append(
                    f'`strategy` must be a Fabric strategy name such as "deepspeed"; got {value!r}'
                )
        elif normal in ("select", "ignore"):
            codes = _as_codes(value, normal, problems)
            result = replace(result, select=codes) if normal == "select" else replace(result, ignore=codes)
        elif normal == "severity":
            if not isinstance(value, Mapping):
                problems.append(f"`severity` must map rule codes to one of {SEVERITIES}; got {value!r}")
                continue
            pairs = []
            for rule, level in value.items():
                if not isinstance(rule, str) or not rule.upper().startswith("FAB") or level not in SEVERITIES:
                    problems.append(f"`severity.{rule}` must be one of {SEVERITIES}; got {level!r}")
                    continue
                pairs.append((rule.upper(), level))
            result = replace(result, severity=tuple(pairs))
        elif normal in ("python", "interpreter", "python_path", "environment"):
            if value in (None, ""):
                result = replace(result, python=None)
            elif isinstance(value, str):
                result = replace(result, python=value)
            else:
                problems.append(
                    f"`{key}` must be a path to a Python interpreter or virtualenv; got {value!r}"
                )
        elif normal in ("docs_base_url", "docsBaseUrl"):
            if value in (None, ""):
                result = replace(result, docs_base_url=None)
            elif isinstance(value, str) and value.startswith(("https://", "http://", "file:")):
                result = replace(result, docs_base_url=value)
            else:
                problems.append(f"`{key}` must be an http(s) or file: URL of the rule pages; got {value!r}")
        else:
            problems.append(
                f"unknown setting `{key}` (known: strategy, select, ignore, severity, python, docsBaseUrl)"
            )
    return result, problems
