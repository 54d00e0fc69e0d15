"""Names a client chooses (tenant, segment, prompt version, model, evaluator, tool and field
names): one safe character set (`limits.NAME_CHARS`), refused on paths that can answer the
sender, replaced on the engine's own path, which cannot."""

from __future__ import annotations

import re

from vigil.sample_record import limits

_NAME = re.compile(limits.NAME_PATTERN.removeprefix("^").removesuffix("$"))
_UNSAFE = re.compile(r"[^A-Za-z0-9._:/@+ \-]")


def name_problem(value: str) -> str | None:
    """Why `value` is not a safe name (quoting the first character at fault), or None."""
    if _NAME.fullmatch(value):
        return None
    bad = _UNSAFE.search(value)
    shown = repr(bad.group()) if bad else "nothing"
    return f"holds {shown}: names use only {limits.NAME_CHARS}"


def check_name(value: str) -> str:
    """`value` when it is a safe name; ValueError saying which character is not."""
    problem = name_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def safe_name(value: str) -> str:
    """`value` with every character outside the safe set replaced by `_`."""
    return _UNSAFE.sub("_", value)
