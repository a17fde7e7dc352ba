#!/usr/bin/env bash
# Build Kompute's Python module (kp 0.9.0) offline, with vkgrad's patch set, and cache it.
#
#   scripts/build_kp.sh PYTHON DEST_DIR
#
# PYTHON is the interpreter the module is for; DEST_DIR receives kp.cpython-*.so.
# PyPI holds kp only as a source distribution. Its setup.py is not used: it lacks a comma
# between two CMake arguments (so KOMPUTE_OPT_DISABLE_VULKAN_VERSION_CHECK and
# PYTHON_EXECUTABLE fuse into one) and its CMake fetches Vulkan-Headers, fmt and pybind11 from
# GitHub. We configure CMake ourselves against the system's Vulkan headers, fmt and pip's
# pybind11 (DESIGN.md lists these options). About 75 s on 2 cores.
#
# The result is cached under ${VKGRAD_CACHE:-~/.cache/vkgrad}/kp/<key>/, the key hashing the
# Python version, the kp version, this script and the patches, so a second set-up is a copy.
# Environment: KP_SDIST (path to kp-0.9.0.tar.gz; else .gpu/ or pip download),
# KP_CMAKE_ARGS (extra CMake arguments, e.g. from ../shared/gpu/env.sh on the device machine).
set -euo pipefail
py=${1:?usage: build_kp.sh PYTHON DEST_DIR}
dest=${2:?usage: build_kp.sh PYTHON DEST_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
kp_version=0.9.0
# KP_PATCHES (a list of patch files) builds a variant, e.g. for bench/ comparisons.
patches=(${KP_PATCHES:-"$root"/third_party/kompute/patches/*.patch})

pyver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
key=$( { echo "$pyver $kp_version"; cat "$0" "${patches[@]}"; } | sha256sum | cut -c1-16)
cache=${VKGRAD_CACHE:-$HOME/.cache/vkgrad}/kp/$key
mkdir -p "$dest"

# a new file renamed over the old one: a process that has the old module loaded keeps its copy
# (copying over it in place crashed Python processes running the old one)
install_so() { for f in "$@"; do cp "$f" "$dest/.$(basename "$f").tmp" && mv -f "$dest/.$(basename "$f").tmp" "$dest/$(basename "$f")"; done; }
if ls "$cache"/kp.cpython-*.so >/dev/null 2>&1; then
  install_so "$cache"/kp.cpython-*.so
  echo "kp $kp_version (patched, cached $key) -> $dest"
  exit 0
fi

work=$(mktemp -d /tmp/vkgrad-kp.XXXXXX)
trap 'rm -rf "$work"' EXIT
sdist=${KP_SDIST:-}
if [ -z "$sdist" ] && [ -f "$root/.gpu/kp-$kp_version.tar.gz" ]; then sdist=$root/.gpu/kp-$kp_version.tar.gz; fi
if [ -z "$sdist" ]; then
  "$py" -m pip download -q --no-deps --no-binary :all: "kp==$kp_version" -d "$work" 2>/dev/null
  sdist=$work/kp-$kp_version.tar.gz
fi
tar xzf "$sdist" -C "$work"
src=$work/kp-$kp_version
for p in "${patches[@]}"; do
  patch -s -p1 -d "$src" < "$p" || { echo "build_kp.sh: patch $(basename "$p") does not apply" >&2; exit 1; }
done

pybind11_dir=$("$py" -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null) || {
  echo "build_kp.sh: $py has no pybind11 (pip install pybind11)" >&2; exit 1; }
mkdir -p "$src/build"
echo "building kp $kp_version with ${#patches[@]} patches for Python $pyver (about a minute)..."
# shellcheck disable=SC2086
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
  -DKOMPUTE_OPT_BUILD_PYTHON=ON -DKOMPUTE_OPT_INSTALL=OFF -DKOMPUTE_OPT_LOG_LEVEL=Off \
  -DKOMPUTE_OPT_USE_SPDLOG=OFF -DKOMPUTE_OPT_DISABLE_VULKAN_VERSION_CHECK=ON \
  -DKOMPUTE_OPT_USE_BUILT_IN_VULKAN_HEADER=OFF -DKOMPUTE_OPT_USE_BUILT_IN_FMT=OFF \
  -DKOMPUTE_OPT_USE_BUILT_IN_PYBIND11=OFF -Dpybind11_DIR="$pybind11_dir" \
  -DPYTHON_EXECUTABLE="$(command -v "$py")" ${KP_CMAKE_ARGS:-} >"$work/cmake.log" 2>&1 \
  || { tail -30 "$work/cmake.log" >&2; echo "build_kp.sh: CMake configure failed" >&2; exit 1; }
cmake --build "$src/build" -j"$(nproc)" >"$work/make.log" 2>&1 \
  || { grep -m20 -B2 -A5 'error' "$work/make.log" >&2; echo "build_kp.sh: build failed" >&2; exit 1; }
so=$(ls "$src"/build/lib/kp.cpython-*.so 2>/dev/null || find "$src/build" -name 'kp.cpython-*.so' | head -1)
mkdir -p "$cache"
cp "$so" "$cache"/
install_so "$so"
echo "kp $kp_version (patched, built $key) -> $dest"
