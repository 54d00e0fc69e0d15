"""`vigil` — one command line for the engine, the sidecar and the offline tools.

Each subcommand imports its package only when it runs, so `vigil --help` stays fast and the
layered packages never import each other through this file.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> "module:function"; each function takes the parsed args and returns an exit code
COMMANDS = {
    "serve": "serving.server.processes.main:serve_command",
    "sidecar": "sidecar.main:sidecar_command",
    "proxy": "serving.proxy.main:proxy_command",
    "up": "vigil.cli.up:up_command",
    "check": "vigil.cli.check:check_command",
    "db": "vigil.cli.db:db_command",
    "baseline": "vigil.cli.baseline:baseline_command",
    "report": "vigil.cli.report:report_command",
    "canary": "vigil.cli.canary:canary_command",
    "doctor": "vigil.devtools.doctor:doctor_command",
    "schema": "vigil.cli.schema:schema_command",
    "demo": "vigil.devtools.demo:demo_command",
}


def _count_or_auto(text: str) -> int | str:
    return text if text == "auto" else int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vigil", description="LLM serving with drift monitoring built in."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    _add_process_commands(sub)
    _add_monitor_commands(sub)
    _add_developer_commands(sub)
    return parser


def _add_process_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The long-running processes: engine, sidecar, proxy, and both together."""
    serve = sub.add_parser("serve", help="run the inference engine and its OpenAI-compatible API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)
    serve.add_argument(
        "--model", help="GGUF file or Hugging Face directory (default: SmolLM2-135M-Instruct)"
    )
    serve.add_argument(
        "--served-model-name",
        help="the model name the API announces and answers to (default: the --model directory's "
        "name); VIGIL_MODEL_NAME",
    )
    serve.add_argument(
        "--tensor-parallel-size",
        type=int,
        help="split the model over N GPUs (or N CPU processes); VIGIL_TENSOR_PARALLEL_SIZE",
    )
    serve.add_argument(
        "--api-server-count",
        type=_count_or_auto,
        help="N API server processes on one port, feeding one engine core, or auto (the default: "
        "from the CPU count); VIGIL_API_SERVER_COUNT",
    )

    sidecar = sub.add_parser(
        "sidecar", help="run the monitoring sidecar: jobs, dashboard, ingest API, alerts"
    )
    sidecar.add_argument("--host")
    sidecar.add_argument("--port", type=int)

    proxy = sub.add_parser(
        "proxy",
        help="watch another OpenAI-compatible server: a pass-through that samples its traffic",
    )
    proxy.add_argument(
        "--upstream", help="the server's base URL, e.g. http://vllm:8000; VIGIL_PROXY_UPSTREAM_URL"
    )
    proxy.add_argument("--host")
    proxy.add_argument("--port", type=int)
    proxy.add_argument(
        "--workers",
        type=int,
        help="proxy processes on one port (SO_REUSEPORT); default one per four CPUs, 1 to 8; "
        "VIGIL_PROXY_WORKERS",
    )

    up = sub.add_parser("up", help="run engine and sidecar together on the embedded defaults")
    up.add_argument(
        "--proxy", metavar="URL", help="run the proxy in front of URL instead of the engine"
    )


def _add_monitor_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """One-off monitoring work: offline checks, schema, baselines, reports, canaries."""
    check = sub.add_parser(
        "check",
        help="run the drift tests offline on two JSONL files of samples",
        description="Run the drift tests offline on two JSONL files of samples.",
        epilog="exit status: 0 no drift; 3 drift; 2 bad input (file and line on stderr); "
        "4 could not judge: the reference was rejected as a baseline, or most whole-window "
        "tests had too few samples and none found drift (reason on stderr)",
    )
    check.add_argument("--reference", required=True, help="JSONL of baseline samples")
    check.add_argument("--current", required=True, help="JSONL of current samples")
    check.add_argument("--json", action="store_true", help="print the result as JSON")
    check.add_argument(
        "--segment-by", action="append", default=[], help="field to segment by (repeatable)"
    )
    check.add_argument("--seed", type=int, default=0)
    check.add_argument(
        "--baseline-cache",
        metavar="DIR",
        help="keep the reference's baseline in DIR and reuse it (same file, seed, window size)",
    )

    db = sub.add_parser("db", help="database schema management")
    db.add_argument("action", choices=["upgrade", "current"])
    db.add_argument("--revision", default="head")

    baseline = sub.add_parser("baseline", help="build, validate and activate drift baselines")
    baseline.add_argument("action", choices=["build", "validate", "activate", "list"])
    baseline.add_argument("--from", dest="start", help="window start (RFC 3339)")
    baseline.add_argument("--to", dest="end", help="window end (RFC 3339)")
    baseline.add_argument("--id", type=int, help="baseline id (validate/activate)")
    baseline.add_argument("--name")

    report = sub.add_parser("report", help="run the drift job once and write the HTML report")
    report.add_argument("--hours", type=float, default=1.0, help="window length ending now")

    canary = sub.add_parser(
        "canary", help="engine canaries: calibrate a baseline, or run one comparison"
    )
    canary.add_argument("action", choices=["baseline", "run"])


def _add_developer_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """What this machine has, the record's schema, and the demo."""
    doctor = sub.add_parser(
        "doctor",
        help="print what this machine has (Python, torch, models, PostgreSQL, Chromium, GPU)",
    )
    doctor.add_argument(
        "--fix",
        action="store_true",
        help="install/start what the tests need, or say in one line what is missing",
    )

    sub.add_parser(
        "schema", help="print the sample record's JSON Schema (what ingest and check accept)"
    )
    demo = sub.add_parser(
        "demo", help="engine + sidecar on a fresh database: a steady day, a drift event, an alert"
    )
    demo.add_argument(
        "--quick", action="store_true", help="less traffic; stop when the alert arrived (CI)"
    )
    demo.add_argument("--dir", default="var/demo", help="where the demo database and reports go")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 0
    module_name, func_name = COMMANDS[args.command].split(":")
    from vigil.config import ConfigError

    try:
        handler = getattr(importlib.import_module(module_name), func_name)
        return int(handler(args) or 0)
    except ConfigError as exc:
        print(f"vigil: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
