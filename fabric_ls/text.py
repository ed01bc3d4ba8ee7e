"""Text for each kind of client surface: markdown where the client renders it, plain text elsewhere.

Conditions and hover text are written as markdown (code in backticks). An inlay label, a message box
or a client that asked for plaintext hovers gets ``plain(...)``: the same words without markup.
"""

from __future__ import annotations

import re

_FENCE = re.compile(r"^\s*```.*$")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\1(?![\w*])")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+")


def code(text: str) -> str:
    """``text`` as one inline code span, whatever backticks it holds."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def _plain_inline(line: str) -> str:
    # Code spans are set aside first: their contents are kept verbatim, markup and all.
    spans: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        spans.append(match.group(2).strip() if match.group(1) != "`" else match.group(2))
        return f"\0{len(spans) - 1}\0"

    prose = _plain_prose(_CODE_SPAN.sub(set_aside, line))
    return re.sub(r"\0(\d+)\0", lambda match: spans[int(match.group(1))], prose)


def _plain_prose(text: str) -> str:
    text = _LINK.sub(lambda match: f"{match.group(1)} ({match.group(2)})", text)
    text = _STRONG.sub(r"\2", text)
    text = _EMPHASIS.sub(r"\2", text)
    return text.replace("\\|", "|").replace("\\_", "_").replace("\\*", "*")


def plain(markdown: str) -> str:
    """The words of ``markdown`` without its markup (code kept as written, fences and rules dropped)."""
    lines: list[str] = []
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            lines.append(line)
            continue
        if _TABLE_RULE.match(line) and "|" in line:
            continue
        lines.append(_plain_inline(_HEADING.sub("", line)))
    return "\n".join(lines)
