"""Donation planning: which program outputs may be written over a donated input's buffer.

`plan_donation(lowered, donated) -> lowered'` is a pure function: `lowered'.donation` maps an
output slot to the donated input (by index) whose buffer it may overwrite, and `lowered'` is
`lowered` with its steps possibly reordered to make that legal. The pipeline's plan stage runs
it (vkgrad/pipeline.py); the runner only follows it.

An output may take a donated input's buffer when its first write comes after the input's last
read, or in that same dispatch when that dispatch reads the input only at the thread's own
element (an elementwise update in place: the Adam step). A writer that comes too early is moved
after the last reader when nothing in between touches what it reads or writes; kernels of one
fusion height are independent (vkgrad/passes/fuse.py), so this is common: the Adam step count
is updated after the parameters. A donated argument that no result can be written over still
has the result that replaces it kept on the device (`Lowered.carried`).
"""

from __future__ import annotations

import dataclasses

from vkgrad.lowering.lower import Lowered


def plan_donation(lowered: Lowered, donated) -> Lowered:
    plan, taken = {}, set()
    steps = list(lowered.steps)
    for i in sorted(donated):
        si = lowered.input_slots[i]
        if si in lowered.output_slots:
            continue
        for so in dict.fromkeys(lowered.output_slots):
            if so is None or so in taken or lowered.slots[so].kind != "output":
                continue
            if (lowered.slots[so].size, lowered.slots[so].dtype) != \
                    (lowered.slots[si].size, lowered.slots[si].dtype):
                continue
            last_read = max((k for k, st in enumerate(steps) if si in st.reads), default=-1)
            w = next((k for k, st in enumerate(steps) if so in st.writes), None)
            if w is None:
                continue
            # an output already given a donated buffer IS that buffer: a move must respect
            # both (moving a kernel past another broke an earlier choice; tests/test_fuzz.py)
            same = {o: lowered.input_slots[j] for o, j in plan.items()}
            # no moves in a plan with loops: a step moved into or out of a loop's range
            # would run a different number of times
            if w < last_read and not lowered.loops and _can_move_after(steps, w, last_read,
                                                                        same):
                steps.insert(last_read, steps.pop(w))
                w = last_read
            if w > last_read or (w == last_read and (si, so) in steps[w].in_place_ok):
                plan[so] = i
                taken.add(so)
                break
    return dataclasses.replace(lowered, steps=steps, donation=plan,
                               carried=_carried(lowered, donated, plan))


def _carried(lowered: Lowered, donated, plan) -> frozenset:
    """The results that replace a donated argument whose buffer none of them could take: the
    Adam step count, read by every parameter's update, is incremented in the first update
    kernel, before its last reader. Each such argument is paired, in order, with the first
    result of its size and type that took no buffer; those results stay on the device (no
    small result comes back to the host for them), so the next call binds them as they are
    instead of waiting for this one to finish to upload them again."""
    left = [lowered.input_slots[i] for i in sorted(donated)
            if i not in plan.values() and lowered.input_slots[i] not in lowered.output_slots]
    free = [so for so in dict.fromkeys(lowered.output_slots)
            if so is not None and so not in plan and lowered.slots[so].kind == "output"]
    kind = lambda s: (lowered.slots[s].size, lowered.slots[s].dtype)   # noqa: E731
    carried = []
    for si in left:
        so = next((so for so in free if kind(so) == kind(si)), None)
        if so is not None:
            free.remove(so)
            carried.append(so)
    return frozenset(carried)


def _can_move_after(steps, w, r, same=None) -> bool:
    """Can steps[w] run after steps[w+1..r] instead of before them? `same` maps slots that
    share a buffer (planned donations) to one slot."""
    same = same or {}
    reads = lambda st: {same.get(s, s) for s in st.reads}
    writes = lambda st: {same.get(s, s) for s in st.writes}
    mine = steps[w]
    for st in steps[w + 1: r + 1]:
        if writes(mine) & (reads(st) | writes(st)) or reads(mine) & writes(st):
            return False
    return True
