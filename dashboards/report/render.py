"""Render and write the report: Vigil's sections (Jinja2) as one document without scripts, and
Evidently's page as a second file beside it.

Evidently's HTML is a whole document with inline scripts (its JS bundle and the data as JSON).
It never shares a document or an origin with Vigil's pages: the report embeds it as an
`<iframe sandbox="allow-scripts">` (no `allow-same-origin`), and the sidecar serves it under its
own CSP with `sandbox allow-scripts` (dashboards.pages), so even opened directly its scripts
run in an opaque origin that can neither read the session nor reach the sidecar.
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


def fmt(value: object) -> str:
    """A cell: numbers to 4 significant digits, "–" for None/NaN (drift.formatting's rules)."""
    text = fmt_num(value, ".4g")
    return "–" if text == MISSING else text


def render_report(
    ctx: ReportContext,
    evidently_error: str | None,
    verdict: EvidentlyVerdict | None = None,
    *,
    with_evidently: bool = False,
    legend: tuple[tuple[str, str], ...] = (),
) -> str:
    """Vigil's report document; `with_evidently`: it frames Evidently's page (`evidently_path`,
    served at /reports/<id>/evidently), and `legend` says which evaluator each of its renamed
    columns stands for."""
    section = _env.get_template("vigil_section.html").render(
        ctx=ctx,
        fmt=fmt,
        evidently_error=None if with_evidently else evidently_error,
        verdict=verdict if with_evidently else None,
        evidently_src=f"{ctx.run_id}/evidently" if with_evidently else None,
        legend=legend if with_evidently else (),
    )
    title = f"Vigil drift report {ctx.run_id}"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"</head><body>{section}</body></html>\n"
    )


def report_path(report_dir: Path, run_id: int) -> Path:
    return Path(report_dir) / f"drift-report-{run_id}.html"


def evidently_path(report: str | Path) -> Path:
    """Where the Evidently page of the report at `report` lies."""
    report = Path(report)
    return report.with_name(f"{report.stem}-evidently.html")


def write_report(
    report_dir: Path, run_id: int, html: str, evidently_html: str | None = None
) -> Path:
    """Write Evidently's page (or remove a stale one), then Vigil's report; returns the report's
    path. Each file is written atomically (temp file + rename): a crash never leaves half a
    report behind."""
    path = report_path(report_dir, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    if evidently_html is None:
        evidently_path(path).unlink(missing_ok=True)
    else:
        _write_atomically(evidently_path(path), evidently_html, run_id)
    return _write_atomically(path, html, run_id)


def _write_atomically(path: Path, html: str, run_id: int) -> Path:
    data = clean_text(html).encode("utf-8")  # lone surrogates from logged text become U+FFFD
    if len(data) > MAX_REPORT_BYTES:
        raise ValueError(
            f"report {run_id} is {len(data)} bytes, over the {MAX_REPORT_BYTES} byte bound"
        )
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
