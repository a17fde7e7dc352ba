"""The memory plan: which buffer (slot) holds each value a program's dispatches touch.

Inputs, consts and what the program returns get slots of their own (arguments and results
live beyond the call). Every other value, and every kernel temporary, is *scratch*: it lives
from the dispatch that first writes it to the last one that reads it, and values whose lives
do not overlap share a slot, sized for the largest of them. Every slot exists for the whole
call, so the scratch memory is the sum of the slot sizes; the assignment is greedy by size, as
TensorFlow Lite's arena planner does: largest value first, each into the smallest slot that
holds it and is free for its whole life, else a new slot. Two values may share a slot in the
dispatch where one dies and the other is born when that dispatch reads the dying one only at
the element each thread writes (an elementwise kernel, a fused epilogue): in place.

f32, i32 and bool (stored as uint32) are 4 bytes an element; f16 and bf16 are 2, packed two to a
32-bit word (kernels_glsl/half.glsl). A slot holds values of one element width only, so its
size in elements means one thing whatever it holds.
`reuse=False` (VKGRAD_DISABLE_PASSES=memory) gives every value its own slot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vkgrad.dtypes import is_half, storage_words

WORD_BYTES = 4


@dataclass
class Slot:
    size: int           # elements
    dtype: str          # IR dtype name (of the first value it holds)
    kind: str           # "input" | "const" | "output" | "scratch"
    values: list = field(default_factory=list)   # (Var or temp key, first step, last step)

    @property
    def nbytes(self) -> int:
        return storage_words(self.size, self.dtype) * WORD_BYTES


def _elements(v) -> int:
    return max(1, math.prod(v.shape))


def value_bytes(v) -> int:
    """Device bytes of value v (a Var)."""
    return storage_words(_elements(v), v.dtype) * WORD_BYTES


def plan_memory(program, raw, temps: dict, exposed, *, reuse: bool = True):
    """(slots, slot_of) for the dispatches `raw` = [(launch, refs, eqn, reads, writes,
    in_place)] whose refs are Vars or temp keys (spec in `temps`); `exposed` are the returned
    values."""
    slots: list[Slot] = []
    slot_of: dict = {}

    def new_slot(v, kind):
        slots.append(Slot(_elements(v), v.dtype, kind))
        return len(slots) - 1

    for v in program.inputs:
        slot_of[v] = new_slot(v, "input")
    for v, _ in program.consts:
        slot_of[v] = new_slot(v, "const")
    for v in dict.fromkeys(exposed):
        if v not in slot_of:
            slot_of[v] = new_slot(v, "output")

    first, last = {}, {}
    for i, (_, refs, _, reads, writes, _) in enumerate(raw):
        for r in (*refs, *reads, *writes):
            first.setdefault(r, i)
            last[r] = i
    for r, s in slot_of.items():
        if r in first:
            slots[s].values.append((r, first[r], last[r]))

    scratch = [r for r in first if r not in slot_of]
    in_place = set()            # (dying, born): may share a slot although both live at step i

    def half(r) -> bool:
        return is_half(temps.get(r, r).dtype)

    for i, (_, refs, _, reads, writes, ip) in enumerate(raw):
        for x, o in ip:
            if last.get(x) == i and first.get(o) == i and x in scratch and \
                    _elements(temps.get(x, x)) == _elements(temps.get(o, o)) and \
                    half(x) == half(o):
                in_place.add((x, o))

    def clash(a, b) -> bool:
        if half(a) != half(b):          # one element width per slot
            return True
        if last[a] < first[b] or last[b] < first[a]:
            return False
        return (a, b) not in in_place and (b, a) not in in_place

    held: dict = {}             # scratch slot -> the values in it
    order = sorted(scratch, key=lambda r: (-_elements(temps.get(r, r)), first[r]))
    for r in order:
        v = temps.get(r, r)
        need = _elements(v)
        s = None
        if reuse:
            free = [k for k, vs in held.items() if not any(clash(r, u) for u in vs)]
            fits = [k for k in free if slots[k].size >= need]
            if fits:
                s = min(fits, key=lambda k: slots[k].size)
            elif free:
                s = max(free, key=lambda k: slots[k].size)
                slots[s].size = need
        if s is None:
            s = new_slot(v, "scratch")
            held[s] = []
        held[s].append(r)
        slot_of[r] = s
    for k, vs in held.items():
        slots[k].values = sorted(((r, first[r], last[r]) for r in vs), key=lambda t: t[1])
    return slots, slot_of
