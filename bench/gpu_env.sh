# Source on the NVIDIA device machine, from the repo root, with .gpu carried:
#   source bench/gpu_env.sh && python3 bench/<script>.py
# Prepares Vulkan + glslang (../shared/gpu/env.sh with GPU_KP=project) and puts vkgrad's patched
# kp on PYTHONPATH. The build is cached in .gpu/cache/kp/<key>/ (key: Python, patches, script),
# so a changed patch set is rebuilt (about 30 s there); a fresh build is also copied to $OUT:
# keep it here as .gpu/cache/kp/<key>/kp.cpython-312-x86_64-linux-gnu.so for later calls.
GPU_KP=project source .gpu/env.sh >/dev/null
export VKGRAD_CACHE=$PWD/.gpu/cache
scripts/build_kp.sh python3 .gpu/kp_project > /tmp/kp_build.txt 2>&1 || cat /tmp/kp_build.txt
if grep -q ', built ' /tmp/kp_build.txt; then
  cp .gpu/kp_project/kp.cpython-*.so "${OUT:-/tmp}"/ && cat /tmp/kp_build.txt
fi
export PYTHONPATH=$PWD/.gpu/kp_project:$PWD
python3 -c 'import kp; print("vkgrad kp on:", [d["device_name"] for d in kp.list_physical_devices()])'
