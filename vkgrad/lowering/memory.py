"""The memory plan: which buffer (slot) holds each value a program's dispatches touch.

Inputs, consts and what the program returns get slots of their own (arguments and results
live beyond the call). Every other value, and every kernel temporary, is *scratch*: it lives
from the dispatch that first writes it to the last one that reads it, and scratch slots are
shared by values whose lives do not overlap:
  * in place first: a dispatch that reads a dying scratch value only at the element each thread
    writes (an elementwise kernel, a fused epilogue) writes a result of the same size over it;
  * else the smallest free slot that fits; else the largest free slot, grown (a slot is sized
    for the largest value it ever holds, and every slot exists for the whole call, so growing
    one costs less than adding one);
  * else a new slot.
A slot's bytes do not depend on the dtype: f32, i32 and bool (stored as uint32) are 4 bytes.
`reuse=False` (VKGRAD_DISABLE_PASSES=memory) gives every value its own slot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

ITEM_BYTES = 4    # every device dtype (f32, i32, bool as uint32) is 4 bytes


@dataclass
class Slot:
    size: int           # elements
    dtype: str          # IR dtype name (of the first value it holds)
    kind: str           # "input" | "const" | "output" | "scratch"
    values: list = field(default_factory=list)   # (Var or temp key, first step, last step)

    @property
    def nbytes(self) -> int:
        return self.size * ITEM_BYTES


def _elements(v) -> int:
    return max(1, math.prod(v.shape))


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

    free: list[int] = []
    release: dict = {}
    for i, (_, refs, _, reads, writes, in_place) in enumerate(raw):
        taken = set()
        for r in dict.fromkeys((*writes, *refs)):
            if r in slot_of or first.get(r) != i:
                continue
            v = temps.get(r, r)
            need = _elements(v)
            s = None
            if reuse:
                for x in in_place:     # a dying operand read only at the element written
                    sx = slot_of.get(x)
                    if sx is not None and last.get(x) == i and sx not in taken and \
                            slots[sx].kind == "scratch" and _elements(temps.get(x, x)) == need:
                        s = sx
                        break
                if s is None and free:
                    fits = [f for f in free if slots[f].size >= need]
                    s = min(fits, key=lambda f: slots[f].size) if fits else \
                        max(free, key=lambda f: slots[f].size)
                    free.remove(s)
                    slots[s].size = max(slots[s].size, need)
            if s is None:
                s = new_slot(v, "scratch")
            taken.add(s)
            slot_of[r] = s
            slots[s].values.append((r, first[r], last[r]))
            release.setdefault(last[r], []).append(r)
        for r in release.pop(i, []):
            s = slot_of[r]
            if reuse and s not in free and all(end <= i for _, _, end in slots[s].values):
                free.append(s)
    return slots, slot_of
