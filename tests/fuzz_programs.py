"""Random well-typed programs over vkgrad.numpy, and the differential check that runs them
(tests/test_fuzz.py).

A `Program` is Python source: one statement per op, each binding a new name `v<i>` from the
inputs `x<i>` and earlier names, so a failing example prints as code (hypothesis shows the
shrunk `Program(...)`, and the assertion message its source) that pastes into a regression test.

`programs()` is the hypothesis strategy. Its op vocabulary knows each op's shape rule, so every
program is well typed by construction: broadcasting-compatible operands, valid axes, matching
matmul inner dimensions, take indices in range. Values stay in safe ranges: each node carries a
bound on its magnitude, operands of exp/pow are scaled into range first, log and sqrt read
`|x| + c` or `x*x + c`, division is by `|y| + c`, and a node whose bound grows past `RESCALE` is
multiplied back down.

`check(program)` runs the program and the gradient of a random scalarisation of it (the sum of
its outputs times fixed random weights, through `vg.grad`) with `vg.jit` on Vulkan in float32,
and on the interpreter in float64 and float32, and compares (see `assert_close`). It also checks
that neither Vulkan program fell back to the interpreter: every op here has a kernel.

`programs(special=True)` draws the same programs with IEEE special values sprinkled over the
float inputs (`SPECIAL_INPUTS`: NaN, +-Inf, +-0, subnormals, huge values); `check_special`
compares their values with the interpreter's: NaN where it has NaN, the same infinities, finite
values close (see `assert_ieee`).

Shapes come from a small vocabulary (DIMS: awkward sizes, 4 for the vec4 paths, 130 to cross a
matmul tile) because on
lavapipe each distinct fused kernel is a new glslangValidator run (~0.3-0.6 s on the 2-core CI
machine); the hand-written kernels (matmul, reductions, softmax, take) take shapes as push
constants and compile once.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

import numpy as np
import hypothesis
from hypothesis import strategies as st

import vkgrad as vg
import vkgrad.nn as nn
import vkgrad.numpy as vnp
from vkgrad.ir.core import Literal
from vkgrad.ir.interpreter import apply as interpret
from vkgrad.runtime import get_device

DIMS = (1, 3, 4, 7, 33, 130)   # 130: past a 64- or 128-wide matmul tile
MAX_ELEMENTS = 6000     # per value: keeps the interpreter and lavapipe quick
RESCALE = 1e3           # a node whose magnitude bound passes this is scaled back down
EPS32 = float(np.finfo(np.float32).eps)
# Huge is 3e18, whose square still fits: a product that overflows beside an infinity in a sum is
# NaN (inf - inf) or inf as a*b+c is contracted into an fma or not (x0 @ x1 with -1e30 * 1e30
# and an inf term: numpy's BLAS gave inf, lavapipe nan), which no reference can settle.
SPECIAL_INPUTS = np.float32([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-40, 3e18, -3e18])
SPECIAL_FRACTION = 0.25  # of each float input's elements, with special=True


# ----------------------------------------------------------------------------- programs

@dataclass(frozen=True)
class Program:
    """inputs: ((name, shape, kind), ...), kind "f" (uniform floats in [-2, 2]), "t" (floats
    from {-1, -0.5, 0, 0.5, 1}: ties and zeros) or ("i", n) (int32 indices in [0, n));
    lines: statements binding v0, v1, ...; outputs: the names returned (a tuple); special:
    SPECIAL_INPUTS over a SPECIAL_FRACTION of the float inputs' elements."""
    inputs: tuple
    lines: tuple
    outputs: tuple
    seed: int = 0
    special: bool = False

    def source(self) -> str:
        args = ", ".join(name for name, _, _ in self.inputs)
        body = "".join(f"    {line}\n" for line in self.lines)
        return f"def f({args}):\n{body}    return ({', '.join(self.outputs)},)\n"

    def function(self):
        namespace = {"vnp": vnp, "nn": nn, "np": np, "vg": vg}
        exec(compile(self.source(), "<fuzz program>", "exec"), namespace)
        return namespace["f"]

    def arguments(self) -> list:
        """float32 and int32 arrays, the same on every call (seeded)."""
        rng = np.random.default_rng(self.seed)
        out = []
        for _, shape, kind in self.inputs:
            if kind == "f":
                out.append(rng.uniform(-2.0, 2.0, shape).astype(np.float32))
            elif kind == "t":
                out.append(rng.choice(np.float32([-1, -0.5, 0, 0.5, 1]), shape))
            else:
                out.append(rng.integers(0, kind[1], shape).astype(np.int32))
            if self.special and kind in ("f", "t"):
                a = out[-1]
                hit = rng.random(a.shape) < SPECIAL_FRACTION
                a[hit] = rng.choice(SPECIAL_INPUTS, int(hit.sum()))
        return out

    @property
    def float_inputs(self) -> tuple:
        return tuple(i for i, (_, _, kind) in enumerate(self.inputs) if kind in ("f", "t"))


@dataclass
class _Node:
    name: str
    shape: tuple
    mag: float           # an upper bound of |value|


def _num(c: float) -> str:
    return repr(float(f"{c:.3g}"))


def _size(shape) -> int:
    return math.prod(shape)


def _bcast(a, b):
    """numpy's broadcast of two shapes, or None."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


class _Builder:
    def __init__(self, draw):
        self.draw = draw
        self.inputs, self.lines, self.nodes = [], [], []

    # --- drawing helpers. Choices are a wide integer taken modulo the number of options:
    # hypothesis draws small integers far more often than others (sampled_from over a long
    # list kept picking its first entries), and a wide one is near uniform; it still shrinks
    # to 0, the first option.
    def choice(self, n: int) -> int:
        return self.draw(st.integers(0, 2**16 - 1)) % n

    def between(self, lo: int, hi: int) -> int:
        return lo + self.choice(hi - lo + 1)

    def pick(self, seq):
        return seq[self.choice(len(seq))]

    def coin(self, p_true_in: int = 2) -> bool:
        """True with probability 1/p_true_in (shrinks to False)."""
        return self.choice(p_true_in) == p_true_in - 1

    def shape(self, min_dims=0, max_dims=3) -> tuple:
        nd = min_dims + self.choice(max_dims - min_dims + 1)
        while True:
            s = tuple(self.pick(DIMS) for _ in range(nd))
            if _size(s) <= MAX_ELEMENTS:
                return s
            nd -= 1

    def operand(self) -> _Node:
        """An existing node: the latest half of the time (deep programs), else any (shrinks to
        the latest)."""
        i = self.choice(2 * len(self.nodes))
        return self.nodes[-1 - (i if i < len(self.nodes) else 0)]

    def fresh(self, shape, kind=None) -> _Node:
        kind = kind or ("t" if self.coin(6) else "f")
        name = f"x{len(self.inputs)}"
        self.inputs.append((name, tuple(shape), kind))
        return _Node(name, tuple(shape), 2.0 if kind in ("f", "t") else float(kind[1]))

    def emit(self, expr: str, shape, mag: float) -> _Node:
        name = f"v{len(self.lines)}"
        if mag > RESCALE:   # keep magnitudes bounded: scale back down
            c = 10.0 / mag
            expr, mag = f"({expr}) * {_num(c)}", 10.0 * 1.01
        self.lines.append(f"{name} = {expr}")
        node = _Node(name, tuple(shape), mag)
        self.nodes.append(node)
        return node

    def scaled(self, x: _Node, limit: float) -> tuple:
        """(expression, bound): x, scaled down so that its bound is at most `limit`."""
        if x.mag <= limit:
            return x.name, x.mag
        c = limit / x.mag
        return f"({x.name} * {_num(c)})", limit

    def compatible(self, shape) -> _Node:
        """A second operand broadcasting with `shape`: an existing node when one fits, or a fresh
        input of a shape derived from it (equal, a suffix, some dims 1, or one more dim)."""
        fits = [n for n in self.nodes if (r := _bcast(n.shape, shape)) is not None
                and _size(r) <= MAX_ELEMENTS]
        if fits and self.coin(2):
            return fits[-1 - self.choice(len(fits))]
        how = self.pick(["same", "suffix", "ones", "lead"])
        s = list(shape)
        if how == "suffix" and s:
            s = s[self.choice(len(s) + 1):]
        elif how == "ones":
            s = [1 if self.coin(2) else d for d in s]
        elif how == "lead" and len(s) < 3:
            s = [self.pick(DIMS)] + s
            if _size(_bcast(s, shape)) > MAX_ELEMENTS:
                s = s[1:]
        return self.fresh(s)


# --- the ops: each takes the builder, reads operands, emits one statement

_UNARY = {
    # name: (template, magnitude bound of the result from the operand's bound m, operand limit)
    "neg": ("-{x}", lambda m: m, None),
    "exp": ("vnp.exp({x})", lambda m: math.exp(m), 3.0),
    "log": ("vnp.log(vnp.abs({x}) + 0.5)", lambda m: max(0.7, math.log(m + 0.5)), None),
    "log_sq": ("vnp.log({x} * {x} + 0.25)", lambda m: max(1.4, math.log(m * m + 0.25)), 100.0),
    "log1p": ("vnp.log1p(vnp.abs({x}))", lambda m: math.log1p(m), None),
    "log1p_small": ("vnp.log1p({x} * 0.001)", lambda m: 0.01, 10.0),
    "sqrt": ("vnp.sqrt(vnp.abs({x}) + 0.25)", lambda m: math.sqrt(m + 0.25), None),
    "sqrt_sq": ("vnp.sqrt({x} * {x} + 0.25)", lambda m: m + 0.5, 100.0),
    "tanh": ("vnp.tanh({x})", lambda m: 1.0, None),
    "sin": ("vnp.sin({x})", lambda m: 1.0, None),
    "cos": ("vnp.cos({x})", lambda m: 1.0, None),
    "abs": ("vnp.abs({x})", lambda m: m, None),
    "sign": ("vnp.sign({x})", lambda m: 1.0, None),
    "square": ("vnp.square({x})", lambda m: m * m, 30.0),
    "cube": ("{x} ** 3", lambda m: m ** 3, 10.0),
    "pow_frac": ("(vnp.abs({x}) + 0.5) ** 1.5", lambda m: (m + 0.5) ** 1.5, 100.0),
    "rsqrt": ("(vnp.abs({x}) + 0.5) ** -0.5", lambda m: 1.5, None),
    "reciprocal": ("1.0 / (vnp.abs({x}) + 0.5)", lambda m: 2.0, None),
    "relu": ("nn.relu({x})", lambda m: m, None),
    "sigmoid": ("nn.sigmoid({x})", lambda m: 1.0, None),
    "clip": ("vnp.clip({x}, -0.5, 1.0)", lambda m: 1.0, None),
    "affine": ("{x} * 1.5 + 0.5", lambda m: 1.5 * m + 0.5, None),
    "rsub": ("2.0 - {x}", lambda m: m + 2, None),
    "scale_div": ("{x} / 4.0", lambda m: m / 4, None),
    "stop_gradient": ("vnp.stop_gradient({x}) * {x}", lambda m: m * m, 30.0),
}


def op_unary(b: _Builder):
    x = b.operand()
    name = b.pick(sorted(_UNARY))
    template, bound, limit = _UNARY[name]
    expr, m = b.scaled(x, limit) if limit else (x.name, x.mag)
    b.emit(template.format(x=expr), x.shape, bound(m))


_BINARY = {
    "add": ("{x} + {y}", lambda a, c: a + c),
    "sub": ("{x} - {y}", lambda a, c: a + c),
    "mul": ("{x} * {y}", lambda a, c: a * c),
    "div": ("{x} / (vnp.abs({y}) + 0.5)", lambda a, c: 2 * a),
    "maximum": ("vnp.maximum({x}, {y})", max),
    "minimum": ("vnp.minimum({x}, {y})", max),
    "pow": ("(vnp.abs({x}) + 0.5) ** {y}", lambda a, c: (a + 0.5) ** c + 2 ** c),
}
_SCALARS = ("0.5", "1.5", "-2.0", "0.0", "3.0")


def op_binary(b: _Builder):
    x = b.operand()
    name = b.pick(sorted(_BINARY))
    template, bound = _BINARY[name]
    if b.coin(5):   # a Python scalar (weakly typed)
        s = b.pick(_SCALARS)
        y_expr, y_mag, shape = s, abs(float(s)), x.shape
    else:
        y = b.compatible(x.shape)
        y_expr, y_mag, shape = y.name, y.mag, _bcast(x.shape, y.shape)
        if name == "pow":
            y_expr, y_mag = b.scaled(y, 2.0)
    x_expr, x_mag = b.scaled(x, 4.0) if name == "pow" else (x.name, x.mag)
    if name == "pow" and y_expr in _SCALARS:
        y_expr, y_mag = "1.5", 1.5
    operands = [x_expr, y_expr] if name == "pow" or not b.coin(4) else [y_expr, x_expr]
    expr = template.format(x=operands[0], y=operands[1])
    if name == "pow":   # (|x| + 0.5) ** y <= (max + 0.5) ** |y| + 2 ** |y|
        b.emit(expr, shape, bound(x_mag, y_mag))
    else:
        mags = (x_mag, y_mag) if operands[0] == x_expr else (y_mag, x_mag)
        b.emit(expr, shape, bound(*mags))


def op_where(b: _Builder):
    x = b.operand()
    y = b.compatible(x.shape)
    shape = _bcast(x.shape, y.shape)
    cmp = b.pick(["<", "<=", ">", ">="])
    lhs, rhs = b.pick([(x.name, y.name), (x.name, "0.0"), (y.name, "0.5")])
    t, f = b.pick([(x.name, y.name), (y.name, x.name), (x.name, "1.0"), ("-2.0", y.name),
                   (f"{x.name} * {y.name}", x.name)])
    mag = max(x.mag, y.mag, 2.0, x.mag * y.mag if "*" in t else 0)
    expr = f"vnp.where({lhs} {cmp} {rhs}, {t}, {f})"
    read = re.findall(r"\w+", expr)                # the result has the shape of what it reads
    if x.name not in read:
        shape = y.shape
    elif y.name not in read:
        shape = x.shape
    b.emit(expr, shape, mag)


def _axis_arg(b: _Builder, ndim: int):
    """(axis argument as source, the axes it means)."""
    if ndim == 0:
        return "None", ()
    how = b.pick(["int", "none", "tuple", "negative"])
    if how == "none":
        return "None", tuple(range(ndim))
    if how in ("int", "negative"):
        a = b.between(0, ndim - 1)
        return (str(a - ndim) if how == "negative" else str(a)), (a,)
    axes = b.draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return str(tuple(axes)), tuple(sorted(axes))


def op_reduce(b: _Builder):
    x = b.operand()
    fn = b.pick(["sum", "mean", "max", "min", "var", "logsumexp"])
    axis, axes = _axis_arg(b, len(x.shape))
    if any(x.shape[a] == 0 for a in axes):   # max/min of nothing is an error, a mean nan
        fn = "sum"
    keep = b.coin(3)
    n = _size([x.shape[a] for a in axes])
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else \
        tuple(d for i, d in enumerate(x.shape) if i not in axes)
    expr, m = x.name, x.mag
    if fn == "var":
        expr, m = b.scaled(x, 30.0)
    mag = {"sum": m * n, "mean": m, "max": m, "min": m, "var": m * m,
           "logsumexp": m + math.log(max(n, 1)) + 1}[fn]
    kd = ", keepdims=True" if keep else ""
    b.emit(f"vnp.{fn}({expr}, axis={axis}{kd})", shape, mag)


def _factor(n: int) -> list:
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def op_reshape(b: _Builder):
    x = b.operand()
    factors = _factor(_size(x.shape))
    order = b.draw(st.permutations(factors)) if factors else []
    nd = b.between(0 if not factors else 1, 3)
    groups = [1] * nd
    for f in order:
        groups[b.between(0, nd - 1)] *= f
    shape = tuple(groups)
    if _size(shape) != _size(x.shape):
        shape = (_size(x.shape),)
    src = list(shape)
    if src and b.coin(3):
        src[b.between(0, len(src) - 1)] = -1
    b.emit(f"{x.name}.reshape({tuple(src)})", shape, x.mag)


def op_transpose(b: _Builder):
    x = b.operand()
    nd = len(x.shape)
    if nd < 2:
        return op_unary(b)
    how = b.pick(["perm", "T", "swapaxes", "moveaxis"])
    if how == "T":
        perm = tuple(reversed(range(nd)))
        expr = f"{x.name}.T"
    elif how == "perm":
        perm = tuple(b.draw(st.permutations(range(nd))))
        expr = f"vnp.transpose({x.name}, {perm})"
    else:
        i, j = b.between(0, nd - 1), b.between(0, nd - 1)
        perm = list(range(nd))
        if how == "swapaxes":
            perm[i], perm[j] = perm[j], perm[i]
            expr = f"vnp.swapaxes({x.name}, {i}, {j - nd})"
        else:
            perm.remove(i)
            perm.insert(j, i)
            expr = f"vnp.moveaxis({x.name}, {i}, {j})"
    b.emit(expr, tuple(x.shape[p] for p in perm), x.mag)


def op_index(b: _Builder):
    """Basic indexing: ints, slices with any step (negative ones too), None."""
    x = b.operand()
    if not x.shape:
        return op_unary(b)
    key, shape = [], []
    for n in x.shape:
        if len(x.shape) < 3 and b.coin(6):
            key.append("None")
            shape.append(1)
        how = b.pick(["all", "slice", "int"])
        if how == "all" or n == 0:
            key.append(":")
            shape.append(n)
        elif how == "int":
            key.append(str(b.between(-n, n - 1)))
        else:
            step = b.pick([1, 2, -1, 3, -2])
            start = b.between(-n, n - 1)
            stop = b.between(-n - 1, n)
            m = len(range(*slice(start, stop, step).indices(n)))
            if m == 0 and not b.coin(8):   # mostly non-empty; now and then an empty array
                start, stop, m = None, None, len(range(*slice(None, None, step).indices(n)))
            key.append(f"{'' if start is None else start}:{'' if stop is None else stop}"
                       f"{'' if step == 1 else ':' + str(step)}")
            shape.append(m)
    b.emit(f"{x.name}[{', '.join(key)}]", tuple(shape), x.mag)


def op_expand(b: _Builder):
    x = b.operand()
    how = b.pick(["expand_dims", "squeeze", "broadcast_to"])
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if how == "squeeze" and ones:
        a = b.pick(ones)
        b.emit(f"vnp.squeeze({x.name}, axis={a})", x.shape[:a] + x.shape[a + 1:], x.mag)
    elif how == "broadcast_to" and (len(x.shape) < 3 or ones):
        s = [b.pick(DIMS) if d == 1 else d for d in x.shape]
        if len(s) < 3 and b.coin(2):
            s = [b.pick(DIMS)] + s
        if _size(s) > MAX_ELEMENTS:
            s = list(x.shape)
        b.emit(f"vnp.broadcast_to({x.name}, {tuple(s)})", tuple(s), x.mag)
    elif len(x.shape) < 3:
        a = b.between(0, len(x.shape))
        b.emit(f"vnp.expand_dims({x.name}, {a})", x.shape[:a] + (1,) + x.shape[a:], x.mag)
    else:
        op_unary(b)


def op_concatenate(b: _Builder):
    x = b.operand()
    nd = len(x.shape)
    if not x.shape:
        return op_unary(b)
    if b.coin(3):   # stack
        ax = b.between(0, nd)
        if nd == 3 or 2 * _size(x.shape) > MAX_ELEMENTS:
            return op_unary(b)
        same = [n for n in b.nodes if n.shape == x.shape]
        y = b.pick(same) if b.coin(2) else b.fresh(x.shape)
        shape = x.shape[:ax] + (2,) + x.shape[ax:]
        b.emit(f"vnp.stack([{x.name}, {y.name}], axis={ax})", shape, max(x.mag, y.mag))
        return
    ax = b.between(0, nd - 1)
    others = [n for n in b.nodes if len(n.shape) == nd and
              all(d == e for i, (d, e) in enumerate(zip(n.shape, x.shape)) if i != ax)]
    if b.coin(2) and others:
        y = b.pick(others)
    else:
        y = _Node("", x.shape[:ax] + (b.pick(DIMS),) + x.shape[ax + 1:], 2.0)
    parts = [x, y] if not b.coin(4) else [y, x, x]
    shape = list(x.shape)
    shape[ax] = sum(p.shape[ax] for p in parts)
    if _size(shape) > MAX_ELEMENTS:
        return op_unary(b)
    if not y.name:
        y.name = b.fresh(y.shape).name
    axis = ax - nd if b.coin(3) else ax
    b.emit(f"vnp.concatenate([{', '.join(p.name for p in parts)}], axis={axis})", tuple(shape),
           max(x.mag, y.mag))


def op_matmul(b: _Builder):
    """x @ w with w an existing node of the right shape or a fresh input; either operand may be
    used transposed (swapaxes of its last two dims: the primitive's transpose flags)."""
    x = b.operand()
    nd = len(x.shape)
    if nd == 0:
        return op_unary(b)
    ta = nd >= 2 and b.coin(2)
    tb = b.coin(2)
    left = nd == 1 or not b.coin(4)   # x on the left (else w @ x)
    xs = x.shape
    # the operand as used: x (or its transpose)
    used = xs[:-2] + (xs[-1], xs[-2]) if ta else xs
    x_expr = (f"{x.name}.T" if nd == 2 else f"vnp.swapaxes({x.name}, -1, -2)") if ta else x.name
    n = b.pick(DIMS)
    if left:
        k = used[-1]
        w_used = (k, n) if nd == 1 or b.coin(2) else used[:-2] + (k, n)
        out = (n,) if nd == 1 else used[:-1] + (n,)
    else:
        k = used[-2] if nd >= 2 else used[-1]
        w_used = (n, k)
        out = used[:-2] + (n, used[-1]) if nd >= 2 else (n,)
    if _size(out) > MAX_ELEMENTS:
        return op_unary(b)
    w_stored = w_used[:-2] + (w_used[-1], w_used[-2]) if tb else w_used
    fits = [m for m in b.nodes if m.shape == w_stored and m is not x]
    w = b.pick(fits) if fits and b.coin(2) else b.fresh(w_stored)
    w_expr = (f"{w.name}.T" if len(w_stored) == 2 else f"vnp.swapaxes({w.name}, -1, -2)") \
        if tb else w.name
    expr = f"{x_expr} @ {w_expr}" if left else f"{w_expr} @ {x_expr}"
    b.emit(expr, out, k * x.mag * w.mag)


def op_softmax(b: _Builder):
    x = b.operand()
    if not x.shape:
        return op_unary(b)
    fn = b.pick(["softmax", "log_softmax"])
    ax = b.between(-len(x.shape), len(x.shape) - 1)
    expr, m = b.scaled(x, 50.0)
    mag = 1.0 if fn == "softmax" else 2 * m + math.log(max(x.shape[ax], 1)) + 1
    b.emit(f"vnp.{fn}({expr}, axis={ax})", x.shape, mag)


def op_take(b: _Builder):
    """take along an axis with traced indices (an int input) or concrete ones (negative too),
    or integer-array indexing."""
    x = b.operand()
    if not x.shape:
        return op_unary(b)
    ax = b.between(0, len(x.shape) - 1)
    n = x.shape[ax]
    if n == 0:          # no index is in range
        return op_unary(b)
    idx_shape = b.pick([(3,), (7,), (1,), (2, 3)])
    out = x.shape[:ax] + idx_shape + x.shape[ax + 1:]
    if _size(out) > MAX_ELEMENTS or len(out) > 4:
        return op_unary(b)
    how = b.pick(["traced", "concrete", "getitem"])
    if how == "concrete":
        rng = np.random.default_rng(len(b.lines))
        idx = f"np.array({rng.integers(-n, n, idx_shape).tolist()})"
    else:
        idx = b.fresh(idx_shape, ("i", n)).name
    if how == "getitem":
        expr = f"{x.name}[{':, ' * ax}{idx}]"
    else:
        expr = f"vnp.take({x.name}, {idx}, axis={ax})"
    b.emit(expr, out, x.mag)


def op_many(b: _Builder):
    """x combined with up to 40 more arrays in one expression: elementwise kernels bind at
    most 32 buffers on lavapipe. Either the arrays themselves (broadcasting with x), or the
    sums of their squares (a global gradient norm)."""
    x = b.operand()
    k = 2 + b.choice(39)
    if b.coin(2):
        expr, mag, shape = x.name, x.mag, x.shape
        for _ in range(k):
            y = b.compatible(shape)
            expr += b.pick([" + ", " - "]) + y.name
            mag += y.mag
            shape = _bcast(shape, y.shape)
        b.emit(expr, shape, mag)
    else:
        ys = [b.fresh(b.shape()) for _ in range(k)]
        norm = " + ".join(f"vnp.sum({y.name} * {y.name})" for y in ys)
        b.emit(f"{x.name} / vnp.sqrt({norm} + 1.0)", x.shape, x.mag)


def op_int(b: _Builder):
    """Integer and boolean values on the way: an int input of x's shape (or one broadcasting
    with it) through integer arithmetic, reversal, a permutation, comparisons and logic, then
    back into x as a float factor or a where mask."""
    x = b.operand()
    shape = x.shape[b.choice(len(x.shape) + 1):] if x.shape else ()
    i = b.fresh(shape, ("i", 5)).name
    for _ in range(1 + b.choice(3)):
        how = b.pick(["arith", "max", "abs", "where", "reverse", "permute", "slice"])
        if how == "arith":
            i = f"({i} * {b.pick([2, 3, -1])} - {b.pick([1, 2, 7])})"
        elif how == "max":
            i = f"vnp.maximum({i}, {b.pick([0, 1, 2])})"
        elif how == "abs":
            i = f"vnp.abs({i} - 2)"
        elif how == "where":
            i = f"vnp.where({x.name} > 0.0, {i}, 1 - {i})" if shape == x.shape else \
                f"vnp.where({i} > 1, {i}, 3)"
        elif shape and how == "reverse":
            a = b.choice(len(shape))
            i = f"{i}[{':, ' * a}::-1]"
        elif shape and how == "permute" and 0 not in shape:
            a = b.choice(len(shape))
            perm = np.random.default_rng(len(b.lines)).permutation(shape[a]).tolist()
            i = f"vnp.take({i}, np.array({perm}), axis={a})"
        elif shape and how == "slice":   # a middle slice of both halves, concatenated back
            a = b.choice(len(shape))
            k = b.choice(shape[a] + 1)
            sl = ":, " * a
            i = f"vnp.concatenate([{i}[{sl}{k}:], {i}[{sl}:{k}]], axis={a})"
    how = b.pick(["scale", "mask", "logic"])
    if how == "scale":
        b.emit(f"{x.name} * ({i}).astype(np.float32)", x.shape, x.mag * 20)
    elif how == "mask":
        b.emit(f"vnp.where({i} > 1, {x.name}, -{x.name})", x.shape, x.mag)
    else:
        b.emit(f"vnp.where(({i} == 2) | ~({x.name} > 0.5), {x.name}, 0.5)", x.shape,
               max(x.mag, 0.5))


def op_loop(b: _Builder):
    """A vg.lax.scan over x's leading axis (its stacked ys, or its final carry; forward or
    reverse), or a vg.lax.cond on x's sum: loops and branches on the device, and their
    gradients (the transposed scan, the branches' VJPs)."""
    x = b.operand()
    if not x.shape or b.coin(4):
        how = b.pick(["x * 0.5", "vnp.sin(x)"])
        b.emit(f"vg.lax.cond(vnp.sum({x.name}) > 0.0, lambda x: {how}, lambda x: -x, {x.name})",
               x.shape, x.mag)
        return
    rev = b.pick(["False", "True"])
    body = "lambda c, t: (vnp.tanh(c * 0.5 + t), c * t)"
    scan = f"vg.lax.scan({body}, vnp.zeros_like({x.name}[0]), {x.name}, reverse={rev})"
    if b.coin(2):
        b.emit(f"{scan}[1]", x.shape, x.mag)
    else:
        b.emit(f"{scan}[0]", x.shape[1:], 1.0)


OPS = [op_unary, op_binary, op_where, op_reduce, op_reshape, op_transpose, op_index, op_expand,
       op_concatenate, op_matmul, op_softmax, op_take, op_many, op_int, op_loop]


@st.composite
def programs(draw, max_ops: int = 6, special: bool = False) -> Program:
    b = _Builder(draw)
    x = b.fresh(b.shape(1, 3))
    b.nodes.append(x)
    for _ in range(1 + b.choice(max_ops)):
        b.pick(OPS)(b)
    # return what nothing reads (so no op is dead code), the latest first, at most 3
    read = set(re.findall(r"\b[vx]\d+\b", " ".join(line.split(" = ", 1)[1] for line in b.lines)))
    sinks = [n.name for n in b.nodes if n.name.startswith("v") and n.name not in read]
    outputs = sinks[::-1][:1 + b.choice(3)]
    if b.coin(8):     # an input returned as is, or one value returned twice
        outputs.append(b.pick([name for name, _, kind in b.inputs if kind in ("f", "t")]
                              + outputs[:1]))
    return Program(tuple(b.inputs), tuple(b.lines), tuple(outputs),
                   draw(st.integers(0, 2**32 - 1)), special)


# ----------------------------------------------------------------------------- the check

# Primitives whose result is exactly the same in float32 on every backend when their operands
# are: they move or pick values, or flip a sign bit. Anything else rounds (and a driver may
# contract a*b+c into one fma), so two values equal in one evaluation may differ in another.
_EXACT = {"broadcast_to", "reshape", "transpose", "slice", "pad", "concatenate", "iota", "take",
          "select", "stop_gradient", "neg", "abs", "convert", "max", "min", "reduce_max",
          "reduce_min"}
# Where a tiny difference in an operand flips a discrete choice: comparisons (where, the VJPs
# of max/min/abs), the extreme of a reduction (its VJP shares the gradient among ties), sign,
# and a float converted to an integer or bool.
_CHOOSERS = {"lt", "le", "eq", "ne", "reduce_max", "reduce_min", "sign", "convert"}
NEAR = 1e-5     # "near": within this much of the operands' magnitude


def _near_choice(e, ins) -> bool:
    """Does eqn e (a chooser) decide anything by less than NEAR times its operands' scale?"""
    with np.errstate(invalid="ignore", over="ignore"):   # special values: inf - inf
        return _near(e, ins)


def _near(e, ins) -> bool:
    arrays = [np.asarray(a, np.float64) for a in ins]
    scale = max([float(np.max(np.abs(a))) for a in arrays if a.size] + [1e-30])
    tol = NEAR * scale
    name = e.prim.name
    if name in ("lt", "le"):
        return bool(np.any(np.abs(arrays[0] - arrays[1]) <= tol))
    if name in ("eq", "ne"):   # a near miss; equality itself is the max VJP finding its pick
        d = np.abs(arrays[0] - arrays[1])   # (two picks, a tie, are the reduction's to flag)
        return bool(np.any((d > 0) & (d <= tol)))
    if name == "sign":
        return bool(np.any(np.abs(arrays[0]) <= tol))
    if name == "convert":      # to an integer (truncation) or to bool (x != 0)
        if e.out.dtype not in ("i32", "bool"):
            return False
        x = arrays[0]
        return bool(np.any(np.abs(x - np.round(x)) <= tol))
    x, axes = arrays[0], e.params["axes"]
    if not axes or x.size == 0:
        return False
    best = x.max(axis=axes, keepdims=True) if name == "reduce_max" else \
        x.min(axis=axes, keepdims=True)
    near = (np.abs(x - best) <= tol).sum(axis=axes)
    return bool(np.any(near > 1))      # a (near) tie: more than one candidate


def _reference_walk(compiled, args):
    """Run the optimised program on `args` eqn by eqn: the largest |value| any float value
    reaches (the scale of the rounding errors float32 makes along the way), and which outputs
    depend on an ill-conditioned choice (a chooser, on rounded operands, deciding by a margin
    under the rounding: float32 may choose otherwise, and the result jump)."""
    program = compiled.stages["optimized"]
    env = dict(zip(program.inputs, args))
    env.update(program.consts)
    exact = set(program.inputs) | {v for v, _ in program.consts}
    tainted = set()
    big = 1.0

    def note(a):
        nonlocal big
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.size:
            fin = np.abs(a[np.isfinite(a)])
            if fin.size:
                big = max(big, float(fin.max()))

    for a in args:
        note(a)
    for e in program.eqns:
        ins = [x.array() if isinstance(x, Literal) else env[x] for x in e.inputs]
        outs = interpret(e.prim, ins, e.params, [o.type for o in e.outputs])
        env.update(zip(e.outputs, outs))
        for o in outs:
            note(o)
        vars_in = [x for x in e.inputs if not isinstance(x, Literal)]
        # integers and bools are exact (a comparison's own margin is checked where it is made)
        exact.update(o for o in e.outputs if o.dtype in ("i32", "bool"))
        if e.prim.name in _EXACT and all(x in exact for x in vars_in):
            exact.update(e.outputs)
        rounded = any(x not in exact for x in vars_in)
        floats = all(np.asarray(a).dtype.kind == "f" for a in ins)
        if any(x in tainted for x in vars_in) or (
                e.prim.name in _CHOOSERS and rounded and floats and _near_choice(e, ins)):
            tainted.update(e.outputs)
    ill = {i for i, o in enumerate(program.outputs) if o in tainted}
    return big, ill


RTOL = 2e-4
ATOL = 2e-5   # times the largest magnitude in the computation


def assert_close(what, got, want64, want32, scale, source):
    """got (Vulkan, float32) against the interpreter's float64 result: within RTOL of it plus
    ATOL times `scale` (the largest magnitude any intermediate reached). Where the float32
    interpreter is as far from float64 (an ill-conditioned spot: a near-tie in max or where,
    cancellation), agreeing with the float32 interpreter within the same tolerance passes."""
    got, want64, want32 = np.asarray(got), np.asarray(want64), np.asarray(want32)
    assert got.shape == want64.shape, f"{what}: shape {got.shape} != {want64.shape}\n{source}"
    assert got.dtype == np.float32, f"{what}: dtype {got.dtype}\n{source}"
    assert np.all(np.isfinite(want64)), f"{what}: the generator made a non-finite value\n{source}"
    tol = RTOL * np.abs(want64) + ATOL * scale
    bad = (np.abs(got - want64) > tol) & (np.abs(got - want32) > tol)
    bad |= ~np.isfinite(got)
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {got.size} elements differ; first at {i}: vulkan "
            f"{got[i]!r}, interpreter f64 {want64[i]!r}, f32 {want32[i]!r} (tolerance "
            f"{tol[i]:.3g}, magnitude scale {scale:.3g})\n{source}")


def _ieee_class(a) -> np.ndarray:
    """0 NaN, 1 +inf, 2 -inf, 3 finite."""
    return np.select([np.isnan(a), np.isposinf(a), np.isneginf(a)], [0, 1, 2], 3)


def assert_ieee(what, got, want64, want32, scale, source):
    """got (Vulkan, float32) against the interpreter on special values: the same class (NaN,
    +inf, -inf, finite) as the float32 interpreter's, and finite values as `assert_close` has
    them. Elements whose class float64 and float32 disagree on (an overflow in float32, a
    cancellation of huge values: the order of a sum decides) have no reference."""
    got, want64, want32 = np.asarray(got), np.asarray(want64), np.asarray(want32)
    assert got.shape == want32.shape, f"{what}: shape {got.shape} != {want32.shape}\n{source}"
    cls, c64, c32 = _ieee_class(got), _ieee_class(want64), _ieee_class(want32)
    stable = c64 == c32
    bad = stable & (cls != c32)
    fin = stable & (c32 == 3) & (cls == 3)
    with np.errstate(invalid="ignore", over="ignore"):
        tol = RTOL * np.abs(want64) + ATOL * scale
        far = (np.abs(got - want64) > tol) & (np.abs(got - want32) > tol)
    bad |= fin & far
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {got.size} elements differ; first at {i}: vulkan "
            f"{got[i]!r}, interpreter f64 {want64[i]!r}, f32 {want32[i]!r}\n{source}")


def flush_subnormals(a):
    """`a` with float32 subnormals as (signed) zeros: what a device that flushes them computes
    with (Vulkan allows it unless the shader declares DenormPreserve, which a device honours
    when its Target says denorm_preserve; the H200 flushed them)."""
    a = np.asarray(a)
    if a.dtype.kind != "f":
        return a
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(a) < tiny, np.copysign(np.zeros_like(a), a), a).astype(a.dtype)


def check_special(program: Program) -> None:
    """The values of `program` (special=True) on Vulkan against the interpreter (assert_ieee),
    with no fallback to the interpreter. On a device that may flush subnormals (its Target),
    the interpreter's values on flushed inputs, flushed, are right too."""
    f = program.function()
    source = program.source()
    a32 = program.arguments()
    on_gpu = vg.jit(f, backend="vulkan")
    got = _outputs(on_gpu(*a32))
    fallback = on_gpu.lower(*a32).stats()["fallback"]
    assert fallback is None, f"fell back to the interpreter: {fallback}\n{source}"
    ref = vg.jit(f, backend="numpy")
    try:
        _check_special_against(ref, a32, got, source)
    except AssertionError:
        if get_device().target.denorm_preserve:
            raise
        _check_special_against(ref, [flush_subnormals(a) for a in a32],
                               [flush_subnormals(g) for g in got], source, flush=True)


def _check_special_against(ref, a32, got, source, flush=False) -> None:
    a64 = [a.astype(np.float64) if a.dtype == np.float32 else a for a in a32]
    want64, want32 = _outputs(ref(*a64)), _outputs(ref(*a32))
    if flush:
        want32 = [flush_subnormals(w) for w in want32]
    scale, ill = _reference_walk(ref.lower(*a64), a64)
    for i, (g, w64, w32) in enumerate(zip(got, want64, want32)):
        if i in ill:
            _event("ill-conditioned output skipped (special values)")
            continue
        assert_ieee(f"value {i}", g, w64, w32, scale, source)


def _outputs(tree) -> list:
    return list(tree) if isinstance(tree, (tuple, list)) else [tree]


def check(program: Program, *, grads: bool = True, calls: bool = True) -> None:
    """Values and gradients of `program` on Vulkan (float32) against the interpreter (float64,
    and float32 for ill-conditioned spots); no fallback to the interpreter. With `calls`, the
    value program is called twice more on other values: with device Arrays as arguments (a
    replay of the recorded sequence), and with its float arguments donated (outputs may be
    written over them in place)."""
    f = program.function()
    source = program.source()
    args32 = program.arguments()
    runs = [("value", f, args32)]
    if grads:
        n = len(args32)
        rng = np.random.default_rng(program.seed ^ 0x5EED)
        outs = vg.jit(f, backend="numpy")(*args32)
        ws32 = [rng.standard_normal(np.shape(o)).astype(np.float32) for o in outs]

        def loss(*a):   # a random scalarisation: sum of the outputs times fixed weights
            return sum(vnp.sum(o * w) for o, w in zip(f(*a[:n]), a[n:]))

        runs.append(("gradient", vg.grad(loss, argnums=program.float_inputs), args32 + ws32))
    jitted = {}
    for what, fun, a32 in runs:
        on_gpu = jitted[what] = vg.jit(fun, backend="vulkan")
        _compare(what, on_gpu(*a32), fun, a32, source)
        fallback = on_gpu.lower(*a32).stats()["fallback"]
        assert fallback is None, f"{what}: fell back to the interpreter: {fallback}\n{source}"
    if calls:
        again = dataclasses.replace(program, seed=program.seed + 1).arguments()
        _compare("value, second call on device Arrays", jitted["value"](*vg.device_put(again)),
                 f, again, source)
        donated = vg.jit(f, backend="vulkan", donate_argnums=program.float_inputs)
        _compare("value, arguments donated", donated(*vg.device_put(args32)), f, args32, source)


def _compare(what, got, fun, a32, source):
    a64 = [a.astype(np.float64) if a.dtype == np.float32 else a for a in a32]
    ref = vg.jit(fun, backend="numpy")
    got, want64, want32 = _outputs(got), _outputs(ref(*a64)), _outputs(ref(*a32))
    scale, ill = _reference_walk(ref.lower(*a64), a64)
    assert len(got) == len(want64)
    for i, (g, w64, w32) in enumerate(zip(got, want64, want32)):
        if i in ill:     # the exact answer jumps within float32's rounding: no reference
            _event(f"ill-conditioned output skipped ({what.split(',')[0]})")
            continue
        assert_close(f"{what} {i}", g, w64, w32, scale, source)


def _event(text):
    try:
        hypothesis.event(text)
    except Exception:   # outside a hypothesis test (the named regression tests)
        pass
