# Source on the NVIDIA device machine, from the repo root, with .gpu carried:
#   source bench/gpu_env.sh && python3 bench/<script>.py
# Prepares Vulkan + glslang (../shared/gpu/env.sh with GPU_KP=project) and puts vkgrad's patched
# kp on PYTHONPATH: .gpu/kp_project/ if it holds a build for this Python, else it builds one
# (about 30 s there) and leaves a copy in $OUT to keep in .gpu/kp_project/.
GPU_KP=project source .gpu/env.sh >/dev/null
if ! ls .gpu/kp_project/kp.cpython-312-*.so >/dev/null 2>&1; then
  VKGRAD_CACHE=/tmp/vkgrad-cache scripts/build_kp.sh python3 .gpu/kp_project && cp .gpu/kp_project/kp.cpython-*.so "${OUT:-/tmp}"/
fi
export PYTHONPATH=$PWD/.gpu/kp_project:$PWD
python3 -c 'import kp; print("vkgrad kp on:", [d["device_name"] for d in kp.list_physical_devices()])'
