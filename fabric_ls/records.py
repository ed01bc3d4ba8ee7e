"""The rule records: one JSON file per rule in ``fabric_ls/records/``, the single source of rule text.

Each record describes one Lightning Fabric error (where Lightning raises it, its exact message, why it
happens, how to fix it) plus what fabric-ls needs to report it (rule id, name, diagnostic message
template, quick-fix kind). Rules, hover text, the docs pages and quick-fix titles all read from here.

The schema is the seed records' schema (version 2) extended with the fabric-ls fields; it is
``schemaVersion`` 3. Only the standard library is used.
"""

from __future__ import annotations

import functools
import json
import re
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, Tuple

SCHEMA_VERSION = 3
LIGHTNING_VERSION = "2.6.6"
# The rule pages ship inside the package, so a diagnostic's link works offline and matches the
# installed version; the `docsBaseUrl` setting points links at a hosted copy instead.
PAGES_DIR = Path(__file__).resolve().parent / "docs" / "rules"
LIGHTNING_SOURCE_URL = f"https://github.com/Lightning-AI/pytorch-lightning/blob/{LIGHTNING_VERSION}/"

# The placeholder every message may use: the runtime strategy class name, e.g. DeepSpeedStrategy.
STRATEGY_PLACEHOLDER = "strategy"
FIX_SAFETIES = ("safe", "unsafe")
STATIC_LEVELS = ("full", "partial", "none")
# What happens at run time. "raise": Lightning raises at the site (the seed schema's meaning). The
# other outcomes have no raise of Lightning's to point at: the site is the line of Lightning's
# source where it happens, ``errorMessage`` a verbatim fragment of that line (the records test
# checks it) and ``errorClass`` what the user sees. "hang": a collective the other ranks never
# join; "silent": Lightning does the wrong thing without an error; "raised-outside": torch or
# DeepSpeed raises, called from the site, or Python itself at the site (a string read as a dict).
OUTCOMES = ("raise", "hang", "silent", "raised-outside")
SEVERITIES = ("error", "warning")

_RULE_ID = re.compile(r"FAB\d{3}")
_KEBAB = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BEFORE_MARKER = "# before"
_AFTER_MARKER = "# after"


class RecordError(ValueError):
    """A record file is malformed; the message names the file and the field."""

    def __init__(self, source: str, field: str, problem: str) -> None:
        super().__init__(f"{source}: field {field!r}: {problem}")
        self.source = source
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class FixSpec:
    """The mechanical quick fix a rule offers; ``kind`` names the edit the engine builds."""

    title: str
    safety: str
    kind: str

    @property
    def is_safe(self) -> bool:
        """Safe fixes are preferred and applied by fix-all; unsafe ones need review."""
        return self.safety == "safe"


@dataclass(frozen=True)
class MessageArg:
    """A rule-specific placeholder of ``Record.message`` (besides ``{strategy}``)."""

    name: str
    description: str
    example: str


@dataclass(frozen=True)
class RaiseSite:
    """One place in Lightning's source that raises (or warns) for a rule."""

    error_class: str
    file_path: str
    line_number: int
    error_message: str
    when: str = ""
    # Python raises at this line, which ``error_message`` quotes (a call Lightning makes), not a ``raise``.
    raised_by_python: bool = False

    @property
    def location(self) -> str:
        """``src/lightning/fabric/fabric.py:1226``."""
        return f"{self.file_path}:{self.line_number}"

    @property
    def source_url(self) -> str:
        """Link to the line in the pinned Lightning release."""
        return f"{LIGHTNING_SOURCE_URL}{self.file_path}#L{self.line_number}"


@dataclass(frozen=True)
class Reference:
    title: str
    url: str


@dataclass(frozen=True)
class Record:
    """One rule: the Lightning error it predicts and everything fabric-ls says about it."""

    id: str
    slug: str
    rule: str
    name: str
    title: str
    message: str
    message_args: Tuple[MessageArg, ...]
    error_message: str
    message_pattern: str
    error_type: str
    error_class: str
    severity: str
    file_path: str
    line_number: int
    other_sites: Tuple[RaiseSite, ...]
    documentation: str
    trigger_scenarios: str
    common_situations: str
    solutions: Tuple[str, ...]
    example_fix: str
    prevention_tips: Tuple[str, ...]
    tags: Tuple[str, ...]
    fix: Optional[FixSpec]
    versions: str
    static: str
    static_limits: str
    strategies: Tuple[str, ...]
    references: Tuple[Reference, ...]
    seed: Optional[str]
    schema_version: int
    outcome: str = "raise"

    @property
    def lightning_raises(self) -> bool:
        """Lightning itself raises at the main site (see ``OUTCOMES``)."""
        return self.outcome == "raise"

    @property
    def docs_url(self) -> str:
        """The rule's docs page, used as the diagnostic's ``codeDescription``."""
        return docs_url(self.rule)

    @property
    def source_url(self) -> str:
        return self.main_site.source_url

    @property
    def main_site(self) -> RaiseSite:
        """The primary raise site as a ``RaiseSite``."""
        return RaiseSite(self.error_class, self.file_path, self.line_number, self.error_message)

    @property
    def raise_sites(self) -> Tuple[RaiseSite, ...]:
        """The primary raise site followed by the other sites of the same rule."""
        return (self.main_site, *self.other_sites)

    @property
    def message_arg_names(self) -> Tuple[str, ...]:
        return tuple(arg.name for arg in self.message_args)

    @property
    def placeholders(self) -> Tuple[str, ...]:
        """The placeholder names ``message`` uses, in order of first use."""
        return _placeholders(self.message)

    @property
    def example_before(self) -> str:
        """The code under ``# before`` in ``example_fix``."""
        return _split_example(self.example_fix)[0]

    @property
    def example_after(self) -> str:
        """The code under ``# after`` in ``example_fix``."""
        return _split_example(self.example_fix)[1]

    def matches(self, text: str) -> bool:
        """Whether ``text`` (e.g. a traceback line) contains this rule's Lightning error message."""
        return _compiled(self.message_pattern).search(text) is not None

    def format_message(self, **args: object) -> str:
        """Fill the message template; extra arguments are ignored, missing ones raise KeyError."""
        missing = [name for name in self.placeholders if name not in args]
        if missing:
            raise KeyError(f"{self.rule} message needs {', '.join(missing)}")
        return self.message.format(**args)


def _placeholders(template: str) -> Tuple[str, ...]:
    names: list[str] = []
    for _, field_name, _, _ in string.Formatter().parse(template):
        if field_name is not None and field_name not in names:
            names.append(field_name)
    return tuple(names)


def _split_example(example_fix: str) -> Tuple[str, str]:
    lines = example_fix.splitlines()
    if not lines or lines[0].strip() != _BEFORE_MARKER or _AFTER_MARKER not in (s.strip() for s in lines):
        raise ValueError(f"exampleFix must start with {_BEFORE_MARKER!r} and contain {_AFTER_MARKER!r}")
    after_at = next(i for i, line in enumerate(lines) if line.strip() == _AFTER_MARKER)
    before = "\n".join(lines[1:after_at]).strip("\n") + "\n"
    after = "\n".join(lines[after_at + 1 :]).strip("\n") + "\n"
    return before, after


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


class _Fields:
    """Typed access to one record's JSON object, raising RecordError on the first bad field."""

    def __init__(self, data: Mapping[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def error(self, field: str, problem: str) -> RecordError:
        return RecordError(self.source, field, problem)

    def raw(self, field: str) -> Any:
        if field not in self.data:
            raise self.error(field, "missing")
        return self.data[field]

    def text(self, field: str, obj: Optional[Mapping[str, Any]] = None, prefix: str = "") -> str:
        value = (obj if obj is not None else self.data).get(field)
        if not isinstance(value, str) or not value.strip():
            raise self.error(prefix + field, f"expected a non-empty string, got {value!r}")
        return value

    def optional_text(self, field: str) -> Optional[str]:
        value = self.data.get(field)
        if value is None:
            return None
        return self.text(field)

    def integer(self, field: str) -> int:
        value = self.raw(field)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise self.error(field, f"expected a positive integer, got {value!r}")
        return value

    def texts(self, field: str) -> Tuple[str, ...]:
        value = self.raw(field)
        if not isinstance(value, list) or not value:
            raise self.error(field, "expected a non-empty list of strings")
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.error(f"{field}[{index}]", f"expected a non-empty string, got {item!r}")
        return tuple(value)

    def objects(self, field: str) -> Sequence[Mapping[str, Any]]:
        value = self.data.get(field, [])
        if not isinstance(value, list):
            raise self.error(field, "expected a list of objects")
        for index, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.error(f"{field}[{index}]", f"expected an object, got {item!r}")
        return value

    def choice(self, field: str, allowed: Sequence[str]) -> str:
        value = self.text(field)
        if value not in allowed:
            raise self.error(field, f"expected one of {', '.join(allowed)}, got {value!r}")
        return value


def validate_record(data: Mapping[str, Any], source: str = "<record>") -> Record:
    """Check one record's JSON object and build the Record; ``source`` names it in errors."""
    if not isinstance(data, dict):
        raise RecordError(source, "<root>", "expected a JSON object")
    fields = _Fields(data, source)

    rule = fields.text("rule")
    if not _RULE_ID.fullmatch(rule):
        raise fields.error("rule", f"expected FAB followed by three digits, got {rule!r}")
    name = fields.text("name")
    if not _KEBAB.fullmatch(name):
        raise fields.error("name", f"expected kebab-case, got {name!r}")
    schema_version = fields.raw("schemaVersion")
    if schema_version != SCHEMA_VERSION:
        raise fields.error("schemaVersion", f"expected {SCHEMA_VERSION}, got {schema_version!r}")

    message_args = tuple(
        MessageArg(
            name=fields.text("name", item, f"messageArgs[{index}]."),
            description=fields.text("description", item, f"messageArgs[{index}]."),
            example=fields.text("example", item, f"messageArgs[{index}]."),
        )
        for index, item in enumerate(fields.objects("messageArgs"))
    )
    message = fields.text("message")
    _check_message(fields, message, message_args)

    message_pattern = fields.text("messagePattern")
    try:
        re.compile(message_pattern)
    except re.error as exc:
        raise fields.error("messagePattern", f"not a valid regular expression: {exc}") from None

    example_fix = fields.text("exampleFix")
    try:
        _split_example(example_fix)
    except ValueError as exc:
        raise fields.error("exampleFix", str(exc)) from None

    file_path = fields.text("filePath")
    if not file_path.startswith("src/lightning/fabric/"):
        raise fields.error("filePath", f"expected a path under src/lightning/fabric/, got {file_path!r}")

    other_sites = tuple(
        RaiseSite(
            error_class=fields.text("errorClass", item, f"otherSites[{index}]."),
            file_path=fields.text("filePath", item, f"otherSites[{index}]."),
            line_number=_site_line(fields, item, index),
            error_message=fields.text("errorMessage", item, f"otherSites[{index}]."),
            when=fields.text("when", item, f"otherSites[{index}]."),
            raised_by_python=item.get("raisedByPython") is True,
        )
        for index, item in enumerate(fields.objects("otherSites"))
    )
    references = tuple(
        Reference(
            title=fields.text("title", item, f"references[{index}]."),
            url=fields.text("url", item, f"references[{index}]."),
        )
        for index, item in enumerate(fields.objects("references"))
    )

    return Record(
        id=fields.text("id"),
        slug=fields.text("slug"),
        rule=rule,
        name=name,
        title=fields.text("title"),
        message=message,
        message_args=message_args,
        error_message=fields.text("errorMessage"),
        message_pattern=message_pattern,
        error_type=fields.text("errorType"),
        error_class=fields.text("errorClass"),
        severity=fields.choice("severity", SEVERITIES),
        file_path=file_path,
        line_number=fields.integer("lineNumber"),
        other_sites=other_sites,
        documentation=fields.text("documentation"),
        trigger_scenarios=fields.text("triggerScenarios"),
        common_situations=fields.text("commonSituations"),
        solutions=fields.texts("solutions"),
        example_fix=example_fix,
        prevention_tips=fields.texts("preventionTips"),
        tags=fields.texts("tags"),
        fix=_fix_spec(fields),
        versions=fields.text("versions"),
        static=fields.choice("static", STATIC_LEVELS),
        static_limits=fields.text("staticLimits"),
        strategies=fields.texts("strategies"),
        references=references,
        seed=fields.optional_text("seed"),
        schema_version=schema_version,
        outcome=fields.choice("outcome", OUTCOMES) if "outcome" in data else "raise",
    )


def _check_message(fields: _Fields, message: str, message_args: Tuple[MessageArg, ...]) -> None:
    try:
        used = _placeholders(message)
    except ValueError as exc:
        raise fields.error("message", f"not a valid str.format template: {exc}") from None
    declared = [arg.name for arg in message_args]
    if STRATEGY_PLACEHOLDER in declared:
        raise fields.error("messageArgs", "`strategy` is always available and must not be declared")
    for placeholder in used:
        if not _IDENTIFIER.fullmatch(placeholder):
            raise fields.error("message", f"placeholder {{{placeholder}}} is not a plain name")
        if placeholder != STRATEGY_PLACEHOLDER and placeholder not in declared:
            raise fields.error("message", f"placeholder {{{placeholder}}} is not declared in messageArgs")
    unused = [name for name in declared if name not in used]
    if unused:
        raise fields.error("messageArgs", f"declared but not used in message: {', '.join(unused)}")
    examples = {arg.name: arg.example for arg in message_args}
    try:
        message.format(strategy="DeepSpeedStrategy", **examples)
    except (IndexError, KeyError, ValueError) as exc:
        raise fields.error("message", f"does not format with the messageArgs examples: {exc!r}") from None


def _site_line(fields: _Fields, item: Mapping[str, Any], index: int) -> int:
    value = item.get("lineNumber")
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise fields.error(f"otherSites[{index}].lineNumber", f"expected a positive integer, got {value!r}")
    return value


def _fix_spec(fields: _Fields) -> Optional[FixSpec]:
    value = fields.raw("fix")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise fields.error("fix", f"expected null or an object, got {value!r}")
    safety = value.get("safety")
    if safety not in FIX_SAFETIES:
        raise fields.error("fix.safety", f"expected one of {', '.join(FIX_SAFETIES)}, got {safety!r}")
    kind = fields.text("kind", value, "fix.")
    if not _KEBAB.fullmatch(kind):
        raise fields.error("fix.kind", f"expected kebab-case, got {kind!r}")
    return FixSpec(title=fields.text("title", value, "fix."), safety=safety, kind=kind)


@functools.lru_cache(maxsize=1)
def load_records() -> dict[str, Record]:
    """All records shipped in ``fabric_ls/records``, keyed and ordered by rule id.

    The result is cached; treat it as read-only. Raises RecordError naming the file and field
    when a record is malformed.
    """
    directory = resources.files("fabric_ls") / "records"
    records: dict[str, Record] = {}
    names: dict[str, str] = {}
    for entry in sorted(directory.iterdir(), key=lambda item: item.name):
        if not entry.name.endswith(".json"):
            continue
        source = f"fabric_ls/records/{entry.name}"
        try:
            data = json.loads(entry.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise RecordError(source, "<root>", f"invalid JSON: {exc}") from None
        record = validate_record(data, source)
        if entry.name != f"{record.rule}.json":
            raise RecordError(source, "rule", f"{record.rule} must live in {record.rule}.json")
        if record.name in names:
            raise RecordError(source, "name", f"{record.name!r} is also used by {names[record.name]}")
        names[record.name] = record.rule
        records[record.rule] = record
    return records


def get_record(rule: str) -> Record:
    """The record for a rule id (``FAB001``) or rule name (``joint-setup-required``)."""
    records = load_records()
    if rule in records:
        return records[rule]
    for record in records.values():
        if record.name == rule:
            return record
    raise KeyError(f"unknown rule {rule!r}; known rules: {', '.join(records)}")


def docs_url(rule: str, base: Optional[str] = None) -> str:
    """The rule's page: under ``base`` when given, else the installed page as a ``file:`` URI."""
    if base:
        return f"{base.rstrip('/')}/{rule}.md"
    return (PAGES_DIR / f"{rule}.md").as_uri()
