"""The segment page: the slice's drift series, open alerts, traffic and latest prompts, reached
by `/segments?tenant=...&segment=...` (any name round-trips) or `/segments/{tenant}/{segment}`
with `-` for "any" (SQLite and PostgreSQL)."""

from __future__ import annotations

import html
import itertools
import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sidecar_servers import API_KEY

from dashboards.segment_page import segment_href, segment_url
from dashboards.templating import visible
from sidecar.app import create_app
from storage.db import session_factory
from storage.models import Alert, DriftResult, DriftRun, Sample
from vigil.devtools.seed_history import seed_history

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def test_segment_page_shows_its_slice(migrated_db, make_settings):
    factory = session_factory(migrated_db)
    with factory() as s:
        data = seed_history(s, hours=4)
        s.add(
            Alert(
                dedupe_key="t",
                rule="token_psi",
                kind="prompt",
                severity="moderate",
                segment="segment=web",
                status="open",
                summary="web moved",
                run_id=data.drift_run_id,
                evidence={},
                first_seen=data.now,
                last_seen=data.now,
            )
        )
        s.commit()
        web_prompts = {p for (p,) in s.query(Sample.prompt).filter(Sample.segment == "web")}
    client = TestClient(create_app(make_settings(migrated_db), factory))
    for path in ("/segments/-/web", "/segments?segment=web"):
        html_text = client.get(path, headers=AUTH).text
        assert (
            'data-series="/api/v1/series?kind=drift&amp;range=7d&amp;segment=segment%3Dweb"'
            in html_text
        )
        assert 'data-series="/api/v1/series?kind=traffic&amp;range=7d&amp;segment=web"' in html_text
        assert "web moved" in html_text.split('id="segment-alerts"')[1]
        rows = html_text.split('id="prompts"')[1].split("</table>")[0]
        shown = [line.split("<td>")[-1].split("</td>")[0] for line in rows.split("<tr>")[2:]]
        assert shown and set(shown) <= web_prompts
        assert (
            'href="/segments?segment=web&amp;range=30d"' in html_text
        )  # the range links keep the slice
    both = client.get("/segments/acme/api?range=24h", headers=AUTH).text
    assert "tenant%3Dacme" in both and "tenant=acme&amp;segment=api" in both
    assert client.get("/segments?tenant=acme&segment=api&range=24h", headers=AUTH).text == both
    assert client.get("/segments/-/-", headers=AUTH).status_code == 404
    assert client.get("/segments", headers=AUTH).status_code == 404
    assert client.get("/segments/-/web?range=1y", headers=AUTH).status_code == 422
    assert (
        client.get("/segments?tenant=%00", headers=AUTH).status_code == 422
    )  # storage holds no NUL
    assert client.get("/segments?tenant=" + "x" * 129, headers=AUTH).status_code == 422
    tab = client.get(
        "/segments?tenant=a%09b", headers=AUTH
    )  # a control character is a name like any
    assert tab.status_code == 200 and "<h1>tenant a\\x09b</h1>" in tab.text
    assert client.get("/segments/-/web").status_code == 401
    assert client.get("/segments?segment=web").status_code == 401


def test_segment_links():
    assert segment_href("segment=web") == "/segments?segment=web"
    assert segment_href("tenant=a/b") == "/segments?tenant=a%2Fb"
    assert segment_href("tenant=a b?c#d%e&f=g") == "/segments?tenant=a%20b%3Fc%23d%25e%26f%3Dg"
    assert segment_href("*") is None and segment_href("prompt_version=v2") is None
    assert (
        segment_href("tenant=") is None and segment_href("tenant=a\x00b") is None
    )  # storage cannot hold them
    assert segment_href("segment=" + "x" * 129) is None
    assert segment_href("tenant=a\tb") == "/segments?tenant=a%09b"
    assert segment_href("segment=\x01\x7f\x85") == "/segments?segment=%01%7F%C2%85"
    assert segment_url("a", "b", "30d") == "/segments?tenant=a&segment=b&range=30d"


# names as storage keeps them: any text but NUL and lone surrogates (the sample record refuses
# those), control characters included
NAMES = st.one_of(
    st.sampled_from(
        [
            "a/b",
            "/",
            "%2F",
            "%",
            "x?y#z",
            " spaced out ",
            "ü/日本",
            "-",
            "..",
            "../x",
            "a+b",
            "a=b",
            "<b>&'\"",
            "%E2%82%AC",
            "\x01",
            "a\tb",
            "line\nbreak",
            "\r\n",
            "\x7f",
            "c1 \x85\x9f",
            "\x1b[31mred",
            "&#1;",
        ]
    ),
    st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters=["\x00"]),
        min_size=1,
        max_size=40,
    ),
)
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_count = itertools.count()


def raw_controls(page: str) -> list[str]:
    """Text between tags that holds a control character (the templates' own line breaks between
    tags aside)."""
    return [t for t in re.findall(r">([^<]*)<", page) if CONTROL.search(t) and t.strip("\n")]


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tenant=NAMES, segment=NAMES)
def test_every_overview_link_opens_its_segment(migrated_db, make_settings, tenant, segment):
    factory = session_factory(migrated_db)
    n = next(_count)
    with factory() as s:
        base = s.query(DriftRun).order_by(DriftRun.window_end.desc()).first()
        if base is None:  # the first example on this database
            seed_history(s, hours=2)
            base = s.query(DriftRun).order_by(DriftRun.window_end.desc()).first()
        run = DriftRun(
            baseline_id=base.baseline_id,
            window_start=base.window_end,
            status="done",
            num_samples=2,
            window_end=base.window_end + timedelta(hours=1),
            started_at=base.window_end,
            summary={},
        )
        s.add(run)
        s.flush()
        for label in (f"tenant={tenant}", f"segment={segment}"):
            s.add(
                DriftResult(
                    run_id=run.id,
                    test="psi",
                    feature="prompt_tokens",
                    segment=label,
                    statistic=0.9,
                    threshold=0.2,
                    drifted=True,
                    insufficient=False,
                    detail={},
                )
            )
        s.add(
            Sample(
                id=f"slice-{n}",
                timestamp=run.window_start,
                ingested_at=run.window_start,
                tenant=tenant,
                segment=segment,
                prompt=f"prompt of slice {n}",
                sample_weight=1.0,
                source="ingest",
            )
        )
        s.commit()
    client = TestClient(create_app(make_settings(migrated_db), factory))
    overview = client.get("/", headers=AUTH).text
    moved = overview.split('id="moved"')[1].split("</table>")[0]
    links = [html.unescape(h) for h in re.findall(r'<a href="([^"]*)">', moved)]
    assert len(links) == 2
    assert raw_controls(moved) == []  # the link texts show control characters as \xNN
    for link, (key, name) in zip(links, (("tenant", tenant), ("segment", segment)), strict=True):
        assert parse_qs(urlsplit(link).query)[key] == [name]
        r = client.get(link, headers=AUTH)
        assert r.status_code == 200, (link, r.status_code)
        h1 = re.search(r"<h1>(.*?)</h1>", r.text, re.S).group(1)
        assert (
            html.unescape(h1) == f"{key} {visible(name)}"
        )  # the segment named on the page, escaped:
        assert not re.search(r"""[<>"']|&(?!(amp|lt|gt|quot|#\d+|#x[0-9a-fA-F]+);)""", h1)
        assert raw_controls(r.text) == []  # nowhere on the page a raw control character
        drift_src = html.unescape(
            re.search(r'data-series="(/api/v1/series\?kind=drift[^"]*)"', r.text).group(1)
        )
        assert parse_qs(urlsplit(drift_src).query)["segment"] == [f"{key}={name}"]
        assert client.get(drift_src, headers=AUTH).status_code == 200  # and its chart data loads
        assert f"prompt of slice {n}</td>" in r.text  # the page read the slice named in the link
