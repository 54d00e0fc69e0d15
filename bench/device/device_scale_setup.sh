#!/usr/bin/env bash
# Prepares what bench_scale needs on a GPU machine without package registries, from the shared
# .venv (make install):
#   .whl/              Python 3.12 wheels of what the sidecar's ingest app, storage and drift job
#                      import and the machine's image lacks, at the versions installed here
#   .gpuassets/minilm  the embedding model with its weights stored in fp16 (the fp32 file, 88 MB,
#                      is over what one device call carries); the embedder casts them back to fp32
# On the machine (carry .whl and .gpuassets), before anything else:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
#   export PYTHONPATH=/tmp/site:$PWD VIGIL_EMBEDDING_MODEL_PATH=$PWD/.gpuassets/minilm
# Evidently is not carried (its plotting stack is large): the run's report says the Evidently
# section could not be drawn, the rest of the window is measured as here.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
PACKAGES="alembic annotated-types fastapi googleapis-common-protos mako multipart opentelemetry-api
opentelemetry-exporter-http-transport opentelemetry-exporter-otlp-common
opentelemetry-exporter-otlp-proto-common opentelemetry-exporter-otlp-proto-http opentelemetry-proto
opentelemetry-sdk opentelemetry-semantic-conventions pydantic pydantic-core pydantic-settings
python-dotenv pytz sniffio sqlalchemy greenlet starlette typing-inspection typing-extensions ujson
uvicorn watchfiles drain3 jsonpickle cachetools"
mkdir -p .whl .gpuassets
for name in $PACKAGES; do
  version=$($PY -m pip show "$name" 2>/dev/null | awk '/^Version:/{print $2}')
  [ -n "$version" ] || { echo "not installed here: $name (make install first)" >&2; exit 1; }
  $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_26_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
    -d .whl "$name==$version" 2>&1 | grep -v '^WARNING: Location' || true
done
$PY - <<'PYEOF'
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from sidecar.embedder import default_model_path

source, target = Path(default_model_path()), Path(".gpuassets/minilm")
shutil.rmtree(target, ignore_errors=True)
shutil.copytree(source, target, ignore=shutil.ignore_patterns("model.safetensors", "*.md"))
weights = load_file(str(source / "model.safetensors"))
save_file({k: v.half().contiguous() for k, v in weights.items()}, str(target / "model.safetensors"))
PYEOF
du -sh .whl .gpuassets
