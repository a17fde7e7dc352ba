"""A scan on the device: its body is lowered ONCE, and the plan marks that run of dispatches as
a loop (Lowered.loops) that the call's one submission runs `length` times: the runtime records
the body once, into a secondary command buffer the sequence executes `length` times (kp patch
0012; vkgrad/runtime/vulkan.py, Executable). Nothing in the IR, the plan or the recording is
copied per step.

Each replay is the same recorded dispatches: the iteration index lives on the device, in a
two-word counter (IN, OUT below) that the step's first and last dispatches hand on, so no
dispatch of its own counts. Around the body:

    before   init -> the carry inputs (copies; a literal is filled), counter = 0; the body
             reads its consts from the operands' own buffers (lower.py aliases them; a literal
             const is filled into a buffer of its own)
    each     first: xs[idx] -> the body's x inputs, and a y that is the carry entering the
                    step -> ys[idx]                                     (idx from word IN)
             the body's dispatches
             last:  the other ys -> ys[idx], the carry outputs -> the carry inputs, word IN =
                    word OUT + 1       (idx = the counter, or length-1-counter where reverse)
             (first and last each one dispatch of up to MAX_MOVES copies: a gradient's scans
             move a slice per residual every step; a literal y is filled by a dispatch of
             its own, a swap goes through a temporary first, since the last dispatch writes
             every carry input)
    after    the carry inputs -> the scan's final carry

A carry whose new value the one dispatch that makes it may write over the old one (its
in_place pairs: the old value read only at the element stored, as an accumulated gradient in a
matmul's store; or not read there at all) and that nothing later in the step reads, is written
in place: no copy a step (`_in_place`). So a step of an RNN's forward is 4 dispatches (in, the
matmul with its tanh, h.sum(), out) and its transposed body's 5 (in, tanh's backward, two
matmuls that write both carries in place, out: the counter alone), where a step was 6 and 7
with a copy dispatch per carry and a dispatch counting; each dispatch of a step costs a launch
and a barrier on every replay.

Memory: a value read or written in more than one iteration (the carries, the consts, xs, ys,
the counter) is kept alive across the whole loop: the counter reset reads it and the step's
last dispatch reads it again, so the memory plan (first write .. last read) never lends its
buffer to a value of one iteration. Values of one iteration share buffers as any others do.

A while loop has no lowering of its own: at a program's top level vkgrad/execution/segmented.py
runs it as chunks, each a scan of masked iterations (primitives/control_flow.py, while_chunk);
in a scan body or a cond branch it is bounded there (a chunk, a flag saying whether that was
enough, run again with more where not); in another while's body the lowering raises
Unsupported and the program runs on the interpreter, counted in vg.fallbacks(). A cond is its
branches and a select before it gets here (passes/select_conds.py).
"""

from __future__ import annotations

import math

from vkgrad.ir.core import Literal, Var
from vkgrad.lowering.elementwise import max_bindings
from vkgrad.lowering.launch import Launch, cdiv
from vkgrad.primitives.control_flow import scan_p

SHADER = "loop_copy.comp"
COPY, FILL, SET = 0, 1, 2


def move_launch(mode: int, n: int, *, src_stride=0, dst_stride=0, length=0, reverse=False,
                value=0) -> Launch:
    """One of loop_copy.comp's moves (n words; strides in words per iteration)."""
    groups = (min(cdiv(max(n, 1), 256), 1024), 1, 1)
    return Launch("loop_copy", SHADER, 3, groups,
                  push=(mode, n, src_stride, dst_stride, length, int(reverse), value))


# copies in one dispatch: 2 + 30 push words, Vulkan's guaranteed 128 bytes (and 61 bindings
# where the device allows them: lavapipe 32, so 15)
MAX_MOVES = 30

# The counter is two words. The step's first dispatch (its slices in) reads the index from word
# IN and hands it to word OUT; its last (its slices out and the carries written back) reads OUT
# and writes IN = OUT + 1 for the next step. Each dispatch reads one word and writes the other,
# so no invocation reads a word another one writes, and the step needs no dispatch of its own
# to count (dispatches between the two, literal fills, read IN as loop_copy.comp does).
IN, OUT = 0, 1


def moves_launch(sizes, length: int, reverse: bool, *, last: bool) -> Launch:
    """One dispatch for several copies (`sizes`: (n, src_stride, dst_stride) words each, each
    stride 0 or n: the iteration's slice of a scanned operand in, of a stacked result out, or
    a whole carry; none: it only hands the counter on), the step's first dispatch (`last`
    False) or its last: binding 0 the counter, then each copy's source and destination. A
    step of a scan copies every x in and every y out (a gradient's forward stacks each
    residual) and writes every carry back: one dispatch for each side, not one each, since
    each dispatch of a replayed body costs its own launch and barrier. Which strides are n is
    in the source; the sizes are push constants, so shapes share a shader."""
    m = len(sizes)
    read, write, inc = (OUT, IN, " + 1u") if last else (IN, OUT, "")
    decl = "".join(f"layout(std430, binding = {1 + 2 * j}) readonly buffer S{j} {{ uint s{j}[]; }};\n"
                   f"layout(std430, binding = {2 + 2 * j}) buffer D{j} {{ uint d{j}[]; }};\n"
                   for j in range(m))
    words = "".join(f" uint n{j};" for j in range(m))
    at = lambda j, stride: f"idx * n{j} + i" if stride else "i"
    body = "".join(f"    for (uint i = gl_GlobalInvocationID.x; i < n{j}; i += stride)\n"
                   f"        d{j}[{at(j, ds)}] = s{j}[{at(j, ss)}];\n"
                   for j, (_, ss, ds) in enumerate(sizes))
    source = (f"// {m} copies of a loop step's slices, its {'last' if last else 'first'} "
              "dispatch (vkgrad/lowering/loops.py, moves_launch)\n"
              "#version 450\nlayout(local_size_x = 256) in;\n"
              "layout(std430, binding = 0) buffer Counter { uint counter[]; };\n"
              f"{decl}layout(push_constant) uniform Push {{ uint length_; uint reverse;{words} }};\n"
              "void main() {\n    uint stride = gl_NumWorkGroups.x * 256u;\n"
              f"    uint t = counter[{read}];\n"
              f"    if (gl_GlobalInvocationID.x == 0u) counter[{write}] = t{inc};\n"
              "    uint idx = reverse != 0u ? length_ - 1u - t : t;\n"
              f"{body}}}\n")
    groups = (min(cdiv(max(max((n for n, _, _ in sizes), default=1), 1), 256), 1024), 1, 1)
    return Launch(f"loop_{'out' if last else 'in'}_{m}", source, 1 + 2 * m, groups,
                  push=(length, int(reverse), *(n for n, _, _ in sizes)))


def _size(v) -> int:
    return max(1, math.prod(v.shape))


def _bits(lit: Literal):
    """The literal as its word: float32 bits (a float push constant), an int, a bool as 0/1."""
    return float(lit.value) if lit.dtype in ("f32", "f64") else int(lit.value)


class ScanLowering:
    """Lowers one scan eqn into the builder `b` (lower.py's _Builder): `b.eqn` lowers each body
    eqn, `b.add` appends a dispatch, `b.root` resolves views, `b.loops` collects the loops.
    Its temporaries (the counter, a swap's) are fresh Vars: scratch like any other value."""

    def __init__(self, b, e):
        self.b, self.e = b, e

    def move(self, src, dst, *, src_stride=0, dst_stride=0) -> None:
        """dst = src (a Var, or a Literal filled in), the iteration's slice where a stride is
        given: dst_stride words into a stacked result, src_stride words out of a scanned one."""
        p = self.e.params
        n = dst_stride or _size(dst)
        if isinstance(src, Literal):
            launch = move_launch(FILL, n, dst_stride=dst_stride, length=p["length"],
                                 reverse=p["reverse"], value=_bits(src))
            src = dst
        else:
            launch = move_launch(COPY, n, src_stride=src_stride, dst_stride=dst_stride,
                                 length=p["length"], reverse=p["reverse"])
        c = self.counter
        self.b.add(launch, [src, dst, c], self.e, [src, c], [dst])

    def moves(self, copies, *, last: bool, keep=()) -> None:
        """The step's first (`last` False) or last dispatch: each (src, dst, (n, src_stride,
        dst_stride)) copy, MAX_MOVES to a dispatch (what one dispatch may bind permitting),
        each dispatch handing the counter on (idempotently: a second one writes the same
        word). `keep`: values its last dispatch reads, to keep them alive over the loop."""
        per = min(MAX_MOVES, (max_bindings(self.b.target) - 1) // 2)
        p, c = self.e.params, self.counter
        for k in range(0, max(len(copies), 1), per):
            part = copies[k:k + per]
            launch = moves_launch([size for _, _, size in part], p["length"], p["reverse"],
                                  last=last)
            refs = [c] + [r for src, dst, _ in part for r in (src, dst)]
            self.b.add(launch, refs, self.e, [c, *(src for src, _, _ in part), *keep],
                       [c, *(dst for _, dst, _ in part)])

    def lower(self) -> None:
        b, e, p = self.b, self.e, self.e.params
        body, nc, nk = p["jaxpr"], p["num_consts"], p["num_carry"]
        root = b.root
        consts, init, xs = e.inputs[:nc], e.inputs[nc:nc + nk], e.inputs[nc + nk:]
        b_const, b_carry, b_x = (body.inputs[:nc], body.inputs[nc:nc + nk],
                                 body.inputs[nc + nk:])
        out_carry, out_y = body.outputs[:nk], body.outputs[nk:]
        self.counter = c = Var((2,), "i32")
        ys = [root(o) for o in e.outputs[nk:]]
        across = [*(root(v) for v in b_const), *b_carry,
                  *(root(x) for x in xs if isinstance(x, Var)), *ys, c]
        for src, dst in zip([*consts, *init], [*b_const, *b_carry]):
            if root(dst) is dst:    # (a const operand's buffer is the body's input itself)
                self.move(src if isinstance(src, Literal) else root(src), dst)
        b.add(move_launch(SET, 1, value=IN), [c, c, c], e, [c, *across], [c])
        start = len(b.raw)
        copies_in, copies_out, fills = [], [], []
        for x, v in zip(xs, b_x):
            if isinstance(x, Literal):
                fills.append((x, v, 0))
            else:
                copies_in.append((root(x), v, (_size(v), _size(v), 0)))
        carried = set(b_carry)
        late = []
        for y, dst in zip(out_y, ys):
            y = y if isinstance(y, Literal) else root(y)
            n = _size(y)
            if isinstance(y, Literal):
                fills.append((y, dst, n))
            elif y in carried:    # the carry entering the step, stacked before it is written
                copies_in.append((y, dst, (n, 0, n)))
            else:
                late.append((y, dst, n))
        if copies_in or ys:
            self.moves(copies_in, last=False)
        first = len(b.raw)
        for be in body.eqns:
            b.eqn(be)
        outs = [root(o) if isinstance(o, Var) else o for o in out_carry]
        over = self._in_place(first, outs, b_carry)
        copies_out = [(over.get(y, y), dst, (n, 0, n)) for y, dst, n in late]
        copies_out += self._write_back([over.get(o, o) if isinstance(o, Var) else o
                                        for o in outs], b_carry, fills)
        for src, dst, stride in fills:
            self.move(src, dst, dst_stride=stride)
        self.moves(copies_out, last=True, keep=across)
        b.loops.append((start, len(b.raw), p["length"]))
        for v, o in zip(b_carry, e.outputs[:nk]):
            self.move(v, root(o))

    def _in_place(self, first: int, outs, carry) -> dict:
        """Carries whose new value the body's dispatches (b.raw[first:]) write over the old
        one, so no copy writes it back: {new value: its carry input}, those dispatches
        rewritten to write (and their later readers to read) the carry input's buffer. Where
        the one dispatch that writes the new value reads the old one only at the element it
        stores (its in_place pairs: an accumulated gradient, `g + h.T @ d`, in a matmul's
        store), or not at all, no later dispatch of the step reads the old value, and no other
        carry's new value is it (a swap), not inside a nested loop (whose later iterations
        would read the old value again)."""
        raw, inner = self.b.raw, [r for r in self.b.loops if r[0] >= first]
        over = {}
        for s, v in zip(outs, carry):
            if not isinstance(s, Var) or s is v or s in carry or s in over or v in outs or \
                    s.dtype != v.dtype or _size(s) != _size(v):
                continue
            w = [i for i in range(first, len(raw)) if s in raw[i][4]]
            if len(w) != 1 or any(a <= w[0] < z for a, z, _ in inner):
                continue
            w = w[0]
            if v in raw[w][1] and (v, s) not in raw[w][5]:
                continue
            if any(v in raw[i][1] or v in raw[i][3] for i in range(w + 1, len(raw))):
                continue
            over[s] = v
        for i in range(first, len(raw)):
            launch, refs, e, reads, writes, in_place = raw[i]
            sub = lambda xs: [over.get(x, x) if isinstance(x, Var) else x for x in xs]
            if any(isinstance(x, Var) and x in over for x in (*refs, *reads, *writes)):
                raw[i] = (launch, sub(refs), e, list(dict.fromkeys(sub(reads))),
                          list(dict.fromkeys(sub(writes))),
                          {(a, o) for a, o in in_place if o not in over and a not in over})
        return over

    def _write_back(self, outs, carry, fills) -> list:
        """The copies carry[i] = outs[i] (roots) for the next iteration (a literal goes to `fills`),
        made by the step's last dispatch. An output that is itself one of the carry inputs is
        moved to a temporary first, since that dispatch writes the carry inputs (a swap)."""
        copies = []
        for s, v in zip(outs, carry):
            if isinstance(s, Literal):
                fills.append((s, v, 0))
                continue
            if s is v:
                continue
            if s in carry:
                t = Var(v.shape, v.dtype)
                self.move(s, t)
                s = t
            copies.append((s, v, (_size(v), 0, 0)))
        return copies


def recorded_runs(n: int, loops) -> list:
    """n dispatches as the runtime records them: (indices, count) runs, each `indices`
    recorded `count` times in a row. Each outermost loop (first, end, count) is one run of its
    body (its inner loops' replays expanded into it: Vulkan 1.3 has no secondary command buffer
    that executes another without VK_EXT_nested_command_buffer), recorded once and executed
    `count` times (vkgrad/runtime/vulkan.py, Executable); the dispatches between loops are runs
    of count 1."""
    return _runs(0, n, list(loops))


def replay_order(n: int, loops) -> list:
    """The indices of n dispatches in the order they run: each loop's range (first, end,
    count) `count` times in a row, nested ranges inside their loop's replays."""
    return [i for indices, count in _runs(0, n, list(loops)) for i in indices * count]


def _inside_another(r, loops) -> bool:
    return any(o is not r and o[0] <= r[0] and r[1] <= o[1] for o in loops)


def _runs(lo: int, hi: int, loops: list) -> list:
    outer = {r[0]: r for r in loops if not _inside_another(r, loops)}
    runs, i = [], lo
    while i < hi:
        r = outer.get(i)
        if r is None:
            j = min((s for s in outer if s > i), default=hi)
            runs.append((list(range(i, j)), 1))
            i = j
            continue
        inner = [q for q in loops if q is not r and r[0] <= q[0] and q[1] <= r[1]]
        runs.append(([k for indices, count in _runs(r[0], r[1], inner)
                      for k in indices * count], r[2]))
        i = r[1]
    return runs


def lowers(e) -> bool:
    return e.prim is scan_p
