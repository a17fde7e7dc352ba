"""vg.distributed: data-parallel training over MPI processes (docs/distributed.md).

    mpirun -n 2 python train.py

    import vkgrad as vg
    vg.distributed.init()                 # from the MPI environment; a world of 1 without it
    params = vg.distributed.broadcast(params)             # rank 0's values everywhere

    def step(params, batch):              # batch: this rank's share of the global batch
        loss, g = vg.value_and_grad(loss_fn)(params, batch)
        g = vg.lax.pmean(g, "batch")      # JAX's name: the mean over the world axis
        return sgd(params, g), vg.lax.pmean(loss, "batch")

    step = vg.distributed.data_parallel(step, axis_name="batch")   # vg.jit, with the axis bound

`data_parallel(fun, axis_name)` is vg.jit(fun) with `axis_name` bound to the processes of the
MPI world while fun is traced (as jax.pmap binds its axis_name over devices, one process per
device here): a collective over it stays in the program as an eqn (vkgrad/primitives/
collective.py), which the interpreter runs as an MPI all-reduce and which splits a Vulkan
program into submissions with the all-reduce on the host between them
(vkgrad/execution/segmented.py), donated arguments donated to the part that reads them last.
In a world of one the collectives are the identity and the optimizer removes them: the step
is the plain jitted step, one program.
Each call first checks that every rank calls with the same argument shapes and static
arguments (a mismatch would otherwise hang or garble the all-reduce).

One Vulkan device per rank: the rank's local rank (its index among the ranks on its machine)
picks among the machine's devices of the preferred type, unless VKGRAD_DEVICE says otherwise.

Faults: after init(), an exception no one catches on any rank prints "rank R of N failed: ..."
and aborts the MPI job (MPI_Abort), so the other ranks end too instead of waiting in a
collective.
"""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import time
import zlib

import numpy as np

from vkgrad.errors import ArgumentError, VkgradError
from vkgrad.execution.device_put import device_put
from vkgrad.execution.jit import jit
from vkgrad.primitives import collective
from vkgrad.runtime import device as runtime_device
from vkgrad.tracer import core
from vkgrad.tracer.pytree import tree_flatten, tree_unflatten
from vkgrad.traceback_util import api_boundary

# Variables a launcher sets in each process it starts: MPICH/Hydra and Intel MPI (PMI_*),
# Open MPI (OMPI_*), PMIx launchers (PMIX_RANK), Slurm's srun with PMI (PMI_RANK too).
_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
OPS = ("sum", "mean", "max", "min")


class DistributedError(VkgradError, RuntimeError):
    """The ranks of a job disagree (their programs' shapes), or MPI is missing or failed."""


class _World:
    """The MPI world: COMM_WORLD, this process' rank in it and on its machine."""

    def __init__(self, mpi):
        self.mpi = mpi
        self.comm = mpi.COMM_WORLD
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.local_rank = self.comm.Split_type(mpi.COMM_TYPE_SHARED).Get_rank()
        self._ops = {"sum": mpi.SUM, "max": mpi.MAX, "min": mpi.MIN}

    def all_reduce(self, arrays, op: str) -> list:
        """Each array reduced over the ranks (op: sum, max, min), all of one dtype in ONE
        MPI_Allreduce of a flat buffer. 16-bit floats go through float32 (MPI has no
        bfloat16). Every rank receives the same bits: MPI's allreduce of a commutative op
        gives each rank the same result (the tests check it)."""
        arrays = [np.asarray(a) for a in arrays]
        out = [None] * len(arrays)
        for dtype in sorted({a.dtype for a in arrays}, key=str):   # one order on every rank
            idx = [i for i, a in enumerate(arrays) if a.dtype == dtype]
            wide = np.float32 if dtype.kind == "f" and dtype.itemsize < 4 else dtype
            flat = np.concatenate([arrays[i].astype(wide).reshape(-1) for i in idx])
            self.comm.Allreduce(self.mpi.IN_PLACE, flat, op=self._ops[op])
            at = 0
            for i in idx:
                n = arrays[i].size
                out[i] = flat[at:at + n].reshape(arrays[i].shape).astype(dtype, copy=False)
                at += n
        return out

    def broadcast(self, arrays, root: int) -> list:
        return [self.comm.bcast(np.asarray(a), root=root) for a in arrays]

    def allgather(self, value) -> list:
        return self.comm.allgather(value)

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)


class _Alone(collective.SingleProcess):
    """A world of one process (not launched under MPI)."""
    rank, local_rank = 0, 0

    def broadcast(self, arrays, root):
        return [np.asarray(a) for a in arrays]

    def allgather(self, value):
        return [value]


_world: list = []


def init():
    """Join the MPI job this process was launched in (mpirun, mpiexec, srun: any launcher that
    sets the PMI or Open MPI variables); without one, a world of one process, and no MPI is
    loaded. Idempotent; rank(), size() and the collectives call it. Call it before anything
    opens the Vulkan device: the local rank picks which one."""
    if _world:
        return _world[0]
    if not any(v in os.environ for v in _LAUNCHER_VARS):
        _world.append(_Alone())
        return _world[0]
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError) as e:   # not installed; no libmpi for it to load
        raise DistributedError(
            f"this process was started by an MPI launcher, but mpi4py cannot be loaded ({e}): "
            "install vkgrad's distributed extra (pip install -e '.[distributed]', or "
            "`make setup`)") from None
    world = _World(MPI)
    _world.append(world)
    collective.set_communicator(world)
    runtime_device.set_local_rank(world.local_rank)
    sys.excepthook = _abort_on_uncaught(sys.excepthook, world)
    return world


def rank() -> int:
    """This process' index in the world (JAX's jax.process_index)."""
    return init().rank


def size() -> int:
    """The number of processes in the world (JAX's jax.process_count)."""
    return init().size


def local_rank() -> int:
    """This process' index among the world's processes on its machine."""
    return init().local_rank


def all_reduce(tree, op: str = "sum"):
    """Every leaf of `tree` reduced over the ranks (op: sum, mean, max, min), as vg.Arrays, on
    the host: for values outside a jitted step (a metric, a check). Leaves of one dtype travel
    in one message."""
    if op not in OPS:
        raise ArgumentError(f"all_reduce: op={op!r}: choose one of {', '.join(OPS)}",
                            source=core.user_source())
    world = init()
    leaves, tree_def = tree_flatten(tree)
    out = world.all_reduce([np.asarray(x) for x in leaves], "sum" if op == "mean" else op)
    if op == "mean":
        out = [_mean(x, world.size) for x in out]
    return device_put(tree_unflatten(tree_def, out))


def broadcast(tree, root: int = 0):
    """Every leaf of `tree` as rank `root` has it, as vg.Arrays on every rank (the initial
    parameters: each rank may have drawn its own)."""
    world = init()
    if not (isinstance(root, int) and 0 <= root < world.size):
        raise ArgumentError(f"broadcast: root={root!r} is not a rank of this world of "
                            f"{world.size}", source=core.user_source())
    leaves, tree_def = tree_flatten(tree)
    return device_put(tree_unflatten(tree_def, world.broadcast(leaves, root)))


def _mean(x, n):
    return np.asarray(x / n, x.dtype if x.dtype.kind == "f" else np.float32)


def data_parallel(fun, axis_name="batch", **jit_kwargs):
    """vg.jit(fun, **jit_kwargs) with `axis_name` bound to the ranks of the MPI world while fun
    is traced: vg.lax.psum/pmean/pmax/pmin over it reduce over the ranks. Each rank calls it
    with its own share of the data; every call checks that the ranks' arguments have the same
    structure, shapes and static values (a DistributedError naming the first difference
    otherwise)."""
    world = init()
    name = getattr(fun, "__name__", "step")

    @functools.wraps(fun)     # (jit reads fun's signature through it: static_argnums by name)
    def bound(*args, **kwargs):
        with collective.bound_axis(axis_name, world.size):
            return fun(*args, **kwargs)

    jitted = jit(bound, **jit_kwargs)

    @api_boundary
    @functools.wraps(fun)
    def step(*args, **kwargs):
        if world.size > 1 and core.current_trace() is None:   # (traced: inlined, no call)
            _check_same_arguments(world, name, jitted, args, kwargs)
        return jitted(*args, **kwargs)

    step.jitted, step.lower = jitted, jitted.lower
    return step


# a default repr's object address ("<function f at 0x7f...>"): it differs between processes
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _describe(jitted, args, kwargs) -> dict:
    """What decides the program a call runs, as text every rank can compare: the dynamic
    arguments' structure and each array leaf's type (the compile cache's key), and each static
    argument's repr (without the object addresses a default repr holds: they differ between
    processes, the value need not)."""
    key = jitted._prepare(args, kwargs)[2]
    return {"structure": str(key.structure), "arrays": [str(a) for a in key.avals],
            "static": [(i, _ADDRESS.sub("", repr(v))) for i, v in key.static]}


def _check_same_arguments(world, name: str, jitted, args, kwargs) -> None:
    """One allgather of a checksum of the arguments' structure, shapes, dtypes and static
    values; on a difference, a second of the descriptions, to name it."""
    mine = _describe(jitted, args, kwargs)
    sums = world.allgather(zlib.crc32(repr(mine).encode()))
    if len(set(sums)) == 1:
        return
    theirs = world.allgather(mine)
    what = _static_difference(jitted.fun, [d["static"] for d in theirs]) or \
        _shape_difference(theirs)
    raise DistributedError(f"data_parallel({name}): {what}", source=core.user_source())


def _shape_difference(theirs) -> str:
    first = theirs[0]
    r, desc = next((r, d) for r, d in enumerate(theirs) if d != first)
    if desc["structure"] != first["structure"]:
        what = f"argument structure {desc['structure']} vs {first['structure']}"
    elif len(desc["arrays"]) != len(first["arrays"]):
        what = f"{len(desc['arrays'])} vs {len(first['arrays'])} array arguments"
    else:
        i, a, b = next((i, a, b) for i, (a, b) in enumerate(zip(desc["arrays"],
                                                               first["arrays"])) if a != b)
        what = f"array argument {i}: {a} vs {b}"
    return (f"rank {r} calls it with other shapes than rank 0 ({what}); every rank must run "
            "the same program: give each rank a batch of the same shape")


def _static_difference(fun, statics) -> str | None:
    """The first static argument whose value differs between the ranks, with which ranks pass
    which value; None where they agree."""
    for i in sorted({i for s in statics for i, _ in s}):
        values = [dict(s).get(i, "(not passed)") for s in statics]
        if len(set(values)) == 1:
            continue
        by_value = {}
        for r, v in enumerate(values):
            by_value.setdefault(v, []).append(r)
        ranks = "; ".join(f"{v} on rank{'s' if len(rs) > 1 else ''} "
                          f"{', '.join(map(str, rs))}" for v, rs in by_value.items())
        return (f"static argument {_argument_name(fun, i)} differs between the ranks "
                f"({ranks}); every rank must run the same program: pass every rank the same "
                "static values")
    return None


def _argument_name(fun, i: int) -> str:
    """Argument i of fun as a message names it: its position, and its name where known."""
    try:
        params = list(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        params = []
    return f"{i} ({params[i]!r})" if i < len(params) else str(i)


# The launcher forwards each rank's output through pipes; an abort at once loses what is still
# in them (seen: when every rank failed at one step, the abort of the first cut the others'
# messages and its own), so a failing rank gives them this long to drain first.
ABORT_DRAIN_S = 0.5


def _abort_on_uncaught(previous, world):
    def hook(kind, value, tb):
        print(f"vkgrad.distributed: rank {world.rank} of {world.size} failed: "
              f"{kind.__name__}: {value}; aborting every rank (MPI_Abort)", file=sys.stderr,
              flush=True)
        previous(kind, value, tb)
        sys.stderr.flush()
        time.sleep(ABORT_DRAIN_S)
        world.abort(1)
    return hook
