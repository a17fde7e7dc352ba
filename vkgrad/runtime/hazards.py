"""Which dispatches need a barrier before them: barriers only where a hazard is.

kp patch 0001 puts one global memory barrier before every recorded op, so each dispatch waits
for the previous one to finish and drain even when the two touch different memory: a backward
pass's input and weight gradients, a gradient norm's independent sums of squares, the
optimizer's per-parameter updates. kp patch 0013 lets an op be recorded without it; this
module decides where that is safe.

A dispatch needs a barrier when it reads or writes a buffer that a dispatch since the last
barrier wrote (read-after-write, write-after-write), or writes one that such a dispatch read
(write-after-read). Buffers are compared by identity: the memory planner reuses a Buffer
object for values whose lifetimes do not overlap, so reuse is a hazard like any other. Which
bindings a kernel may write comes from its SPIR-V: a storage block whose members are all
decorated NonWritable (GLSL `readonly`) is read-only; any other binding counts as written.

Only the program's own dispatches are judged; the ops around them (uploads, the slot copies
that read buffers through device addresses, downloads) and the first op of each run between
loops always get their barrier, as does the first op of a loop's body (kp patch 0012), which
orders each iteration after the previous one. With timestamps on (vg.profile), every op keeps
its barrier, so each kernel's time is its own.
VKGRAD_BARRIERS=all puts every barrier back (for comparisons: bench/).
"""

from __future__ import annotations

import os
import struct

from .spirv_bfloat16 import instructions

OP_MEMBER_DECORATE = 72
OP_DECORATE = 71
OP_VARIABLE = 59
OP_TYPE_POINTER = 32
OP_TYPE_STRUCT = 30
DECORATION_BINDING = 33
DECORATION_NON_WRITABLE = 24


def written_bindings(spirv: bytes, bindings: int) -> frozenset:
    """The binding numbers a shader may write: every binding but the storage blocks whose
    members are all NonWritable (or whose variable is)."""
    words = struct.unpack(f"<{len(spirv) // 4}I", spirv[:len(spirv) // 4 * 4])
    binding_of, nonwritable_var, members, nonwritable_members = {}, set(), {}, {}
    pointee, var_type = {}, {}
    for at, op, count in instructions(words):
        args = words[at + 1:at + count]
        if op == OP_DECORATE and len(args) >= 2:
            if args[1] == DECORATION_BINDING and len(args) >= 3:
                binding_of[args[0]] = args[2]
            elif args[1] == DECORATION_NON_WRITABLE:
                nonwritable_var.add(args[0])
        elif op == OP_MEMBER_DECORATE and len(args) >= 3 and args[2] == DECORATION_NON_WRITABLE:
            nonwritable_members.setdefault(args[0], set()).add(args[1])
        elif op == OP_TYPE_STRUCT:
            members[args[0]] = len(args) - 1
        elif op == OP_TYPE_POINTER:
            pointee[args[0]] = args[2]
        elif op == OP_VARIABLE:
            var_type[args[1]] = args[0]
    written = set(range(bindings))
    for var, b in binding_of.items():
        struct_id = pointee.get(var_type.get(var))
        readonly = var in nonwritable_var or (
            struct_id in members
            and len(nonwritable_members.get(struct_id, ())) == members[struct_id])
        if readonly:
            written.discard(b)
    return frozenset(written)


def mode() -> str:
    """VKGRAD_BARRIERS: "all" (a barrier before every op) or "" (the default: barriers only at
    hazards, the ops reordered into levels, below)."""
    return os.environ.get("VKGRAD_BARRIERS", "")


def _accesses(d):
    writes = d.kernel.writes
    if writes is None:
        writes = range(len(d.buffers))
    r = {id(b) for j, b in enumerate(d.buffers) if j not in writes}
    w = {id(b) for j, b in enumerate(d.buffers) if j in writes}
    return r, w


def levels(dispatches) -> list:
    """The run's dispatches (indices) in levels: each level's dispatches depend only on earlier
    levels', so a level needs one barrier before it and none inside. A dispatch depends on an
    earlier one that wrote a buffer it reads or writes, or read one it writes (buffer reuse by
    the memory planner included); each goes in the first level after all it depends on, in
    program order within a level (as soon as possible: the fewest barriers a run's hazards
    allow, its critical path)."""
    last_writer, readers, level = {}, {}, []
    for j, d in enumerate(dispatches):
        r, w = _accesses(d)
        after = [level[last_writer[b]] for b in r | w if b in last_writer]
        after += [level[i] for b in w for i in readers.get(b, ())]
        level.append(1 + max(after, default=-1))
        for b in r:
            readers.setdefault(b, []).append(j)
        for b in w:
            last_writer[b] = j
            readers[b] = []
    out = [[] for _ in range(max(level, default=-1) + 1)]
    for j, n in enumerate(level):
        out[n].append(j)
    return out


def schedule(dispatches) -> list:
    """(index, barrier) for each dispatch of a run, in the order to record them (mode())."""
    if mode() == "all":
        return [(i, True) for i in range(len(dispatches))]
    return [(i, k == 0) for lv in levels(dispatches) for k, i in enumerate(lv)]
