# Sourced by the device suites (bench/device_*_suite.sh) after `commit` and `out` are set: the
# carried wheels (.whl, from bench/device/device_setup.sh) installed beside the machine's packages, and
# the environment every benchmark there runs with (results to $out, the commit named in them).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  >/dev/null 2>&1 || { echo "wheel install failed"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 VIGIL_BENCH_RESULTS_DIR=$out VIGIL_BENCH_COMMIT=$commit
