"""Render and write the report: Vigil's sections (Jinja2) on top of Evidently's page, one file.

Evidently's HTML is a whole document with its JS bundle; Vigil's section is inserted right
after its `<body>` so the result stays one self-contained, shareable file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from dashboards.report.evidently_part import EvidentlyVerdict
from dashboards.report.model import ReportContext
from drift.formatting import MISSING, clean_text, fmt_num

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_REPORT_BYTES = 5 * 1024 * 1024

_env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))


def fmt(value) -> str:
    """A cell: numbers to 4 significant digits, "–" for None/NaN (drift.formatting's rules)."""
    text = fmt_num(value, ".4g")
    return "–" if text == MISSING else text


def render_report(
    ctx: ReportContext,
    evidently_html: str | None,
    evidently_error: str | None,
    verdict: EvidentlyVerdict | None = None,
) -> str:
    section = _env.get_template("vigil_section.html").render(
        ctx=ctx,
        fmt=fmt,
        evidently_error=evidently_error if evidently_html is None else None,
        verdict=verdict if evidently_html is not None else None,
    )
    if evidently_html is None:
        title = f"Vigil drift report {ctx.run_id}"
        return (
            f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f"</head><body>{section}</body></html>\n"
        )
    marker = evidently_html.find("<body>")
    if marker < 0:
        raise ValueError("Evidently's HTML has no <body> to insert Vigil's section into")
    cut = marker + len("<body>")
    return evidently_html[:cut] + section + evidently_html[cut:]


def report_path(report_dir: Path, run_id: int) -> Path:
    return Path(report_dir) / f"drift-report-{run_id}.html"


def write_report(report_dir: Path, run_id: int, html: str) -> Path:
    """Write atomically (temp file + rename): a crash never leaves half a report behind."""
    data = clean_text(html).encode("utf-8")  # lone surrogates from logged text become U+FFFD
    if len(data) > MAX_REPORT_BYTES:
        raise ValueError(
            f"report {run_id} is {len(data)} bytes, over the {MAX_REPORT_BYTES} byte bound"
        )
    path = report_path(report_dir, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp's 0600 is kept: the report quotes prompts; the pages serve it to those who may read it
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
