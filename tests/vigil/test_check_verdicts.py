"""`vigil check` verdicts it must not get wrong: "could not judge" is its own exit code (4),
vectors of different dimension across the two files are refused (exit 2), and an invalid UTF-8
byte is reported on its physical line."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path

import pytest
from drift_synth import make_samples, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vigil.cli.check import EXIT_BAD_INPUT, EXIT_DRIFT, EXIT_NO_VERDICT, EXIT_OK, check_command
from vigil.cli.main import build_parser
from vigil.sample_record.jsonl import RecordFileError, read_records


def run(ref: Path, cur: Path) -> tuple[int, str, str]:
    args = argparse.Namespace(
        reference=str(ref), current=str(cur), json=False, segment_by=[], seed=0
    )
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = check_command(args)
    return code, out.getvalue(), err.getvalue()


def test_rejected_reference_against_drifted_current_cannot_judge(tmp_path):
    ref = write_jsonl(make_samples(2, seed=40), tmp_path / "ref.jsonl")
    cur = write_jsonl(make_samples(250, seed=41, drift="prompt"), tmp_path / "cur.jsonl")
    code, out, err = run(ref, cur)
    assert code == EXIT_NO_VERDICT, (out, err)
    assert "baseline REJECTED" in out and "no drift" not in out
    assert "could not judge: the reference was rejected as a baseline" in err
    assert "2 < 100" in err  # validation's own reason, so the user knows what to fix


@pytest.mark.parametrize("n_current", [2, 12])
def test_too_small_current_cannot_judge(tmp_path, n_current):
    ref = write_jsonl(make_samples(500, seed=42), tmp_path / "ref.jsonl")
    cur = write_jsonl(make_samples(n_current, seed=43, drift="prompt"), tmp_path / "cur.jsonl")
    code, out, err = run(ref, cur)
    assert code == EXIT_NO_VERDICT, (out, err)
    assert "baseline valid" in out and "could not judge" in out and "no drift" not in out
    assert f"whole-window tests had too few samples ({n_current} current, 500 reference)" in err


def test_a_few_short_tests_still_judge(tmp_path):
    """30 current samples: the PSI and cluster tests lack samples but KS, MMD and the rest run,
    so the answer stands (no drift on a null pair, drift on a drifted one)."""
    ref = write_jsonl(make_samples(500, seed=44), tmp_path / "ref.jsonl")
    same = write_jsonl(make_samples(30, seed=45, t0=1.7e9 + 7200), tmp_path / "same.jsonl")
    code, out, err = run(ref, same)
    assert code == EXIT_OK and "no drift" in out and "could not judge" not in err
    drifted = write_jsonl(make_samples(60, seed=46, drift="operational"), tmp_path / "cur.jsonl")
    code, out, err = run(ref, drifted)
    assert code == EXIT_DRIFT and "could not judge" not in err


def test_help_documents_every_exit_code():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    text = " ".join(sub.choices["check"].format_help().split())
    for part in ("0 no drift", "3 drift", "2 bad input", "4 could not judge"):
        assert part in text, text
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "4 could not judge" in readme


def _vectors_file(path: Path, field: str, dim: int, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "prompt": f"p{i}",
                    "response": f"r{i}",
                    field: [0.01 * (i + j) for j in range(dim)],
                }
            )
            + "\n"
            for i in range(n)
        )
    )
    return path


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    field=st.sampled_from(["prompt_embedding", "response_embedding"]),
    dims=st.lists(st.integers(1, 48), min_size=2, max_size=2, unique=True),
    sizes=st.tuples(st.integers(1, 6), st.integers(1, 6)),
)
def test_vector_dimension_differing_between_files_is_refused(tmp_path, field, dims, sizes):
    ref = _vectors_file(tmp_path / "ref.jsonl", field, dims[0], sizes[0])
    cur = _vectors_file(tmp_path / "cur.jsonl", field, dims[1], sizes[1])
    code, out, err = run(ref, cur)
    assert code == EXIT_BAD_INPUT and out == "", err
    assert f"{cur}:1: {field} has {dims[1]} values, {ref}:1 has {dims[0]}" in err, err


BAD_BYTES = [b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\x80", b"\xe2\x82"]
TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\n\r\x85\u2028\u2029"),
    min_size=0,
    max_size=120,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(TEXT, min_size=1, max_size=400),
    data=st.data(),
    bad=st.sampled_from(BAD_BYTES),
    in_string=st.booleans(),
    trailing_newline=st.booleans(),
)
def test_invalid_utf8_names_its_physical_line(
    tmp_path, texts, data, bad, in_string, trailing_newline
):
    """Lines of any valid text (multi-byte characters included) and one line with bytes that
    are not UTF-8: the error names that line, wherever it falls in the file's read buffers."""
    bad_line = data.draw(st.integers(1, len(texts)), label="bad_line")
    lines = [json.dumps({"prompt": t or "x"}, ensure_ascii=False).encode() for t in texts]
    if in_string:
        lines[bad_line - 1] = b'{"prompt": "ab' + bad + b'cd"}'
    else:
        lines[bad_line - 1] = bad + lines[bad_line - 1]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"\n".join(lines) + (b"\n" if trailing_newline else b""))
    with pytest.raises(RecordFileError) as info:
        read_records(path)
    assert str(info.value).startswith(f"{path}:{bad_line}: not UTF-8"), (str(info.value), bad_line)


def test_invalid_utf8_on_line_300_of_400_says_line_300(tmp_path):
    good = write_jsonl(make_samples(100, seed=47), tmp_path / "good.jsonl")
    lines = (tmp_path / "good.jsonl").read_bytes().splitlines() * 4
    lines[299] = b'{"prompt": "\xff\xfe"}'
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(lines) + b"\n")
    code, out, err = run(good, bad)
    assert code == EXIT_BAD_INPUT and out == ""
    assert f"{bad}:300: not UTF-8" in err, err
