#!/usr/bin/env bash
# Set vkgrad up on a fresh Debian machine: system packages, .venv with vkgrad (editable, test,
# examples and distributed extras: the last brings MPICH's mpirun into .venv/bin), and Kompute's
# `kp` built with our patches (cached, so a second set-up takes seconds).
# `make test` and `make demo` run this when anything it depends on changed.
set -euo pipefail
cd "$(dirname "$0")/.."

debs="libvulkan-dev mesa-vulkan-drivers glslang-tools libfmt-dev vulkan-tools spirv-tools cmake g++ patch"
missing=""
for d in $debs; do
  dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q "install ok installed" || missing="$missing $d"
done
if [ -n "$missing" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian packages:$missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq $missing >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq $missing >/dev/null; }
  else
    echo "setup: vkgrad needs these Debian packages:$missing" >&2
    echo "       install them with:  sudo apt-get install -y$missing" >&2
    exit 1
  fi
fi

py=${PYTHON:-python3}
"$py" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' 2>/dev/null \
  || { echo "setup: vkgrad needs Python 3.10 or newer ($py is $("$py" --version 2>&1))" >&2; exit 1; }
[ -x .venv/bin/python ] || "$py" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e '.[test,examples,distributed]' pybind11 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import vkgrad, pytest, hypothesis, tqdm, matplotlib, safetensors, mpi4py' \
  || { echo "setup: installing vkgrad into .venv failed (see pip's output above)" >&2; exit 1; }
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
scripts/build_kp.sh .venv/bin/python "$site"
.venv/bin/python -m vkgrad devices
