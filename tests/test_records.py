"""The rule records: they load, they agree with Lightning's source, and the docs pages match them."""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import re
import textwrap
from functools import lru_cache
from pathlib import Path
from typing import Optional
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest

from fabric_ls import docgen
from fabric_ls.records import RaiseSite, Record, RecordError, get_record, load_records, validate_record

RECORDS_DIR = Path(__file__).resolve().parent.parent / "fabric_ls" / "records"
RULES = sorted(path.stem for path in RECORDS_DIR.glob("FAB*.json"))
DOCS_DIR = Path(__file__).resolve().parent.parent / "fabric_ls" / "docs" / "rules"
PLACEHOLDER = re.compile(r"\{[^{}]*\}")

# The mechanical fixes the engine implements, per rule (None: no automatic fix).
EXPECTED_FIXES = {
    "FAB001": ("join-setup", "safe"),
    "FAB002": ("split-setup", "unsafe"),
    "FAB003": ("empty-init-true", "safe"),
    "FAB005": ("backward-with-model", "unsafe"),
    "FAB006": ("launch-with-function", "unsafe"),
    "FAB010": ("move-optimizer-after-setup", "unsafe"),
    "FAB011": ("split-setup", "unsafe"),
    "FAB012": ("move-optimizer-after-setup", "unsafe"),
    "FAB013": ("use-orig-params-true", "safe"),
    "FAB016": ("fabric-backward", "safe"),
}


def all_sites() -> list[tuple[str, RaiseSite]]:
    return [(record.rule, site) for record in load_records().values() for site in record.raise_sites]


def site_id(value: object) -> str:
    if isinstance(value, RaiseSite):
        return value.location
    return str(value)


@lru_cache(maxsize=1)
def lightning_root() -> Optional[Path]:
    """The directory that holds the installed ``lightning`` package, or None."""
    spec = importlib.util.find_spec("lightning")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve().parent.parent


def render_message(node: Optional[ast.expr]) -> str:
    """A raise's message expression as text, with f-string fields written as ``{expr}``."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(
            str(part.value) if isinstance(part, ast.Constant) else "{" + ast.unparse(part.value) + "}"
            for part in node.values
            if isinstance(part, (ast.Constant, ast.FormattedValue))
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return render_message(node.left) + render_message(node.right)
    return "{" + ast.unparse(node) + "}"


def _first_arg(call: ast.Call) -> Optional[ast.expr]:
    return call.args[0] if call.args else None


@lru_cache(maxsize=64)
def raise_statements(path: Path) -> tuple[tuple[int, str], ...]:
    """(line of the ``raise`` keyword, message text) for every raise in the file.

    ``raise RuntimeError(message)`` renders the last ``message = ...`` of its function
    above it (``dedent(...)`` dedented), whitespace runs as one space."""
    found = []
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                argument = _first_arg(node.exc)
                if isinstance(argument, ast.Name) and not isinstance(function, ast.Module):
                    assigned = _assignment_before(function, argument.id, node.lineno)
                    if assigned is not None:
                        found.append((node.lineno, " ".join(assigned.split())))
                        continue
                found.append((node.lineno, render_message(argument)))
    return tuple(sorted(set(found)))


def _assignment_before(function: ast.AST, name: str, line: int) -> Optional[str]:
    """The message of the last ``name = ...`` above ``line`` in the function."""
    assignments = [
        node
        for node in ast.walk(function)
        if isinstance(node, ast.Assign)
        and node.lineno < line
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    ]
    if not assignments:
        return None
    value = max(assignments, key=lambda node: node.lineno).value
    if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "dedent" and value.args:
        return textwrap.dedent(render_message(value.args[0]))
    return render_message(value)


@lru_cache(maxsize=64)
def warning_calls(path: Path) -> tuple[tuple[int, str], ...]:
    """(line, message text) for every ``*warn(...)`` call in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name.endswith("warn"):
                found.append((node.lineno, render_message(_first_arg(node))))
    return tuple(found)


def message_regex(error_message: str) -> re.Pattern[str]:
    """The record's message with each ``{...}`` placeholder turned into ``.*``."""
    literal_parts = PLACEHOLDER.split(error_message)
    return re.compile(".*".join(re.escape(part) for part in literal_parts), re.DOTALL)


def test_every_rule_has_exactly_one_record() -> None:
    records = load_records()
    assert list(records) == RULES
    assert sorted(path.stem for path in RECORDS_DIR.glob("*.json")) == RULES


def test_rule_names_are_unique_kebab_case() -> None:
    names = [record.name for record in load_records().values()]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name) for name in names)


@pytest.mark.parametrize("rule", RULES)
def test_record_file_validates(rule: str) -> None:
    path = RECORDS_DIR / f"{rule}.json"
    record = validate_record(json.loads(path.read_text(encoding="utf-8")), path.name)
    assert record == get_record(rule)
    assert get_record(record.name) is get_record(rule)


@pytest.mark.parametrize(("rule", "site"), all_sites(), ids=site_id)
def test_error_message_is_in_lightning_source_at_the_raise(rule: str, site: RaiseSite) -> None:
    root = lightning_root()
    if root is None:
        pytest.skip("lightning is not importable")
    assert site.file_path.startswith("src/")
    path = root / site.file_path[len("src/") :]
    assert path.is_file(), f"{rule}: {site.file_path} does not exist in the installed lightning"

    record = get_record(rule)
    if (not record.lightning_raises and site == record.main_site) or site.raised_by_python:
        # No raise of Lightning's: the site is the line where it happens, quoted verbatim.
        lines = path.read_text(encoding="utf-8").splitlines()
        near = lines[max(site.line_number - 4, 0) : site.line_number + 3]
        assert any(site.error_message in line for line in near), (
            f"{rule}: {site.error_message!r} is not within 3 lines of {site.location}"
        )
        return
    expected = message_regex(site.error_message)
    is_warning = site.error_class.endswith("Warning")
    candidates = warning_calls(path) if is_warning else raise_statements(path)
    matching_lines = [line for line, text in candidates if expected.fullmatch(text)]
    keyword = "warning call" if is_warning else "raise"
    assert matching_lines, f"{rule}: no {keyword} in {site.file_path} has the message {site.error_message!r}"
    nearest = min(matching_lines, key=lambda line: abs(line - site.line_number))
    assert abs(nearest - site.line_number) <= 3, (
        f"{rule}: the {keyword} with this message is at line {nearest}, the record says {site.line_number}"
    )


@pytest.mark.parametrize("rule", RULES)
def test_example_fix_parts_parse_and_differ(rule: str) -> None:
    record = get_record(rule)
    assert record.example_fix.startswith("# before\n")
    ast.parse(record.example_before)
    ast.parse(record.example_after)
    assert record.example_before.strip() != record.example_after.strip()
    assert "# after" not in record.example_before


@pytest.mark.parametrize("rule", RULES)
def test_message_formats_with_its_args_and_strategy(rule: str) -> None:
    record = get_record(rule)
    examples = {arg.name: arg.example for arg in record.message_args}
    text = record.format_message(strategy="DeepSpeedStrategy", **examples)
    assert "{" not in PLACEHOLDER.sub("", text) or "{'" in text
    assert set(record.placeholders) <= {"strategy", *record.message_arg_names}


@pytest.mark.parametrize("rule", RULES)
def test_message_pattern_matches_the_lightning_message(rule: str) -> None:
    record = get_record(rule)
    rendered = PLACEHOLDER.sub("X", record.error_message)
    assert record.matches(f"{record.error_class}: {rendered}"), record.message_pattern


def test_patterns_cover_the_wording_variants() -> None:
    assert get_record("FAB004").matches(
        "No models were set up for backward. Did you forget to call `self.setup()`?"
    )
    fsdp_variant = get_record("FAB012").other_sites[0].error_message
    assert get_record("FAB012").matches(fsdp_variant)
    model_parallel = "The `ModelParallelStrategy` does not support `Fabric(..., precision='16-mixed')`."
    assert get_record("FAB022").matches(model_parallel + " Choose a different precision among: 32-true.")


def test_format_message_lists_missing_args() -> None:
    record = get_record("FAB022")
    with pytest.raises(KeyError, match="precision, allowed"):
        record.format_message(strategy="FSDPStrategy")
    with pytest.raises(KeyError, match="strategy"):
        get_record("FAB001").format_message()
    text = record.format_message(strategy="FSDPStrategy", precision="64-true", allowed="32-true", unused=1)
    assert text.startswith("`precision='64-true'` is not supported with `FSDPStrategy`.")


@pytest.mark.parametrize("rule", RULES)
def test_fix_kind_matches_the_engine_contract(rule: str) -> None:
    record = get_record(rule)
    expected = EXPECTED_FIXES.get(rule)
    if expected is not None:
        assert record.fix is not None
        assert (record.fix.kind, record.fix.safety) == expected
    elif record.fix is not None:
        assert record.fix.safety in ("safe", "unsafe")


def test_seed_records_keep_their_ids() -> None:
    assert get_record("FAB001").id == "b0f25afbe5086d39"
    assert get_record("FAB001").seed == "000_73ef33a2cf2d8d27.txt"
    assert get_record("FAB002").id == "564d3f2e6011a2ec"
    assert get_record("FAB002").seed == "001_d4266b4e2fe17bea.txt"
    assert get_record("FAB003").id == "d41ea34420f3e1cf"
    assert get_record("FAB003").seed == "003_75badaa28abc00bf.txt"


def test_seed_corrections() -> None:
    zero3 = get_record("FAB003")
    assert zero3.line_number == 379  # the seed said 381, the f-string line
    assert "empty_init=False" in zero3.example_before
    assert "empty_init=True" in zero3.example_after
    fsdp_meta = get_record("FAB002")
    assert "init_module(empty_init=True)" in fsdp_meta.example_before  # the default gives real CPU tensors
    no_models = get_record("FAB004")
    assert no_models.error_message.endswith("Did you forget to call `fabric.setup()`?")


def test_static_levels_and_strategies() -> None:
    for record in load_records().values():
        assert record.static in ("full", "partial", "none")
        assert record.strategies
    assert get_record("FAB028").static == "none"


def test_record_urls() -> None:
    record = get_record("FAB001")
    # The installed page, so the link works offline and matches the installed version.
    assert record.docs_url.startswith("file://") and record.docs_url.endswith("/docs/rules/FAB001.md")
    assert Path(url2pathname(urlparse(record.docs_url).path)).is_file()
    assert record.source_url.endswith("/src/lightning/fabric/fabric.py#L1226")


def test_unknown_rule_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="FAB999"):
        get_record("FAB999")


def _raw(rule: str) -> dict:
    return json.loads((RECORDS_DIR / f"{rule}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("message", None, "message"),
        ("rule", "FAB1", "rule"),
        ("name", "Joint Setup", "name"),
        ("fix", {"title": "x", "safety": "maybe", "kind": "join-setup"}, "fix.safety"),
        ("static", "sometimes", "static"),
        ("exampleFix", "model = 1", "exampleFix"),
        ("message", "The `{strategy}` needs {nothing}", "message"),
        ("messagePattern", "(", "messagePattern"),
        ("lineNumber", 0, "lineNumber"),
        ("outcome", "sometimes", "outcome"),
    ],
)
def test_malformed_record_names_file_and_field(field: str, value: object, problem: str) -> None:
    data = copy.deepcopy(_raw("FAB001"))
    if value is None:
        del data[field]
    else:
        data[field] = value
    with pytest.raises(RecordError) as excinfo:
        validate_record(data, "FAB001.json")
    assert "FAB001.json" in str(excinfo.value)
    assert excinfo.value.field == problem


def test_docs_pages_are_up_to_date() -> None:
    assert docgen.stale_pages(DOCS_DIR) == []
    assert docgen.main(["--check", "--output", str(DOCS_DIR)]) == 0


def test_docgen_check_fails_on_stale_pages(tmp_path: Path) -> None:
    assert docgen.main(["--output", str(tmp_path)]) == 0
    assert docgen.main(["--check", "--output", str(tmp_path)]) == 0
    (tmp_path / "FAB001.md").write_text("old\n", encoding="utf-8")
    (tmp_path / "FAB099.md").write_text("removed rule\n", encoding="utf-8")
    assert docgen.main(["--check", "--output", str(tmp_path)]) == 1
    assert docgen.stale_pages(tmp_path) == ["FAB001.md", "FAB099.md"]


def test_rule_page_has_the_ruff_like_sections() -> None:
    page = docgen.render_rule_page(get_record("FAB001"))
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == [
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
        "## Fix safety",
        "## When it cannot be known statically",
        "## Lightning source",
        "## References",
    ]
    assert "fabric.py:1226" in page


def test_record_type_is_frozen() -> None:
    record: Record = get_record("FAB001")
    with pytest.raises(AttributeError):
        record.rule = "FAB002"  # type: ignore[misc]
