"""The table of cases (tests/cases.py) on the interpreter and under the gradient checks:

* the traced program, and its optimised form, run on the numpy interpreter, equal the eager
  (numpy) evaluation in float32, and numpy's own function where the row gives one (shape,
  dtype, values); print -> parse -> print is the identity;
* derivatives vs central finite differences in float64, first order and grad-of-grad
  (vg.check_grads: reverse and forward mode, random unit directions);
* forward mode against reverse mode: <v, J u> from jvp equals <J^T v, u> from vjp;
* completeness: every primitive is in some row's program, and every primitive with a VJP rule
  in some gradient-checked row's program.

Every program produced along the way is verified (tests/conftest.py turns VERIFY_ALL on).
tests/test_vulkan_ops.py runs the same rows on Vulkan.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from cases import (BY_NAME, CASES, GRAD_CASES, all_primitives, assert_same,
                   differentiable_primitives, ids, primitives_in, to_float32)
from vkgrad.ir.core import print_program
from vkgrad.ir.interpreter import run_program
from vkgrad.ir.parser import parse_program
from vkgrad.passes import optimize
from vkgrad.tracer.pytree import tree_flatten, tree_map


@functools.cache
def traced(name):
    """The row's traced program for its float32 arguments (shared by the completeness tests)."""
    case = BY_NAME[name]
    return vg.make_ir(case.fun)(*case.args32())


# ----------------------------------------------------------------------------- the interpreter

@pytest.mark.parametrize("case", CASES, ids=ids(CASES))
def test_program_matches_eager_and_round_trips(case):
    args = case.args32()
    results = tree_flatten(case.fun(*tree_map(vnp.asarray, args)))[0]   # on vg.Arrays, eagerly
    assert all(isinstance(x, vg.Array) for x in results), \
        f"{case.name}: eager results {[type(x).__name__ for x in results]}, not vg.Arrays"
    eager = [np.asarray(x) for x in results]
    if case.numpy is not None:          # vkgrad.numpy's numpy semantics, eagerly
        want = [np.asarray(x) for x in tree_flatten(case.numpy(*args))[0]]
        assert len(eager) == len(want)
        for e, w in zip(eager, want):
            assert_same(e, w, 1e-5, 1e-6, f"{case.name}: eager vs numpy")
    program = traced(case.name)
    leaves = tree_flatten(args)[0]
    for prog in (program, optimize(program)):
        got = run_program(prog, *leaves)
        assert len(got) == len(eager)
        for g, e in zip(got, eager):
            assert_same(g, e, 2e-5, 2e-5, f"{case.name}: {prog.name} vs eager")
        if case.numpy is not None:
            for g, w in zip(got, want):
                assert_same(g, w, 1e-5, 1e-6, f"{case.name}: {prog.name} vs numpy")
        if not case.text:
            continue
        text = print_program(prog)
        consts = {f"%{len(prog.inputs) + i}": a for i, (_, a) in enumerate(prog.consts)}
        assert print_program(parse_program(text, consts)) == text


# ----------------------------------------------------------------------------- derivatives

@pytest.mark.parametrize("case", GRAD_CASES, ids=ids(GRAD_CASES))
def test_derivatives_match_finite_differences(case):
    # order 2 checks first derivatives, then the derivatives of x -> vjp(fun, x)(v): the
    # backward program, differentiated again, against finite differences of the first
    # derivative. (One call: a separate order-1 test repeated its first half, a measured 3 s.)
    vg.check_grads(case.fun, case.make_args(), order=case.grad, modes=case.modes, **case.tol)


def _float_leaves(tree):
    return [np.asarray(x) for x in tree_flatten(tree)[0]
            if x is not None and np.asarray(x).dtype.kind == "f"]


def _map_float(tree, fn, zero_int=False):
    return tree_map(lambda x: fn(x) if np.asarray(x).dtype.kind == "f" else
                    (np.zeros_like(x) if zero_int else x), tree)


JVP_CASES = [c for c in GRAD_CASES if {"fwd", "rev"} <= set(c.modes)]   # both run: compared


@pytest.mark.parametrize("case", JVP_CASES, ids=ids(JVP_CASES))
def test_jvp_agrees_with_vjp(case, x64):   # float64 exact
    args = case.make_args()
    rng = np.random.default_rng(1)
    tangents = tuple(
        _map_float(a, lambda x: rng.standard_normal(np.shape(x)), zero_int=True) for a in args)
    out, t_out = vg.jvp(case.fun, tuple(args), tangents)
    v = _map_float(out, lambda x: rng.standard_normal(np.shape(x)))
    _, vjp_fn = vg.vjp(case.fun, *args)
    cts = vjp_fn(v)
    lhs = sum(float(np.vdot(a, b)) for a, b in zip(_float_leaves(v), _float_leaves(t_out)))
    rhs = sum(float(np.vdot(a, b)) for a, b in
              zip(_float_leaves(cts), _float_leaves(tangents)))
    assert lhs == pytest.approx(rhs, rel=1e-9, abs=1e-9)


# ----------------------------------------------------------------------------- completeness

def test_every_primitive_runs_on_the_interpreter():
    seen = set().union(*(primitives_in(traced(c.name)) for c in CASES))
    missing = all_primitives() - seen
    assert not missing, ("primitives in no row's program (add rows to tests/cases.py): "
                          f"{sorted(missing)}")


def test_every_primitive_with_a_vjp_is_gradient_checked():
    seen = set().union(*(primitives_in(traced(c.name)) for c in GRAD_CASES))
    missing = differentiable_primitives() - seen
    assert not missing, ("primitives with a VJP rule in no gradient-checked row's program "
                         f"(add rows to tests/cases.py, with grad >= 1): {sorted(missing)}")


# The three tables merged into tests/cases.py (tests/test_core_table.py, test_core_numpy.py and
# test_vulkan_ops.py before), by their row names; a name two tables shared was renamed.
MERGED = {
    "table": """add_mul sub_div div_positive int_powers float_powers pow_both rpow exp_log_log1p
        trig sqrt_square abs_sign maximum_minimum relu clip where logical_mask neg_neg sigmoid
        python_scalars bias_row scale_col outer scalar_array broadcast_3d broadcast_to sum_all
        sum_axis0 sum_axis1_keepdims sum_axes_0_2 sum_axis_neg mean_axis0 var max_axis1
        min_axis0_keepdims max_all matmul_nn matmul_nt matmul_tn matmul_tt matmul_batched
        matmul_batched_by_2d matmul_batch_broadcast matmul_batched_nt matvec vecmat dot_vectors
        softmax_last softmax_axis0 softmax_3d_middle log_softmax logsumexp_axis1
        logsumexp_all_keepdims index_int index_slices index_negative_step index_newaxis_ellipsis
        index_int_array concatenate stack take_embedding take_axis1 one_hot_weighted
        reshape_transpose swap_expand_squeeze transpose_perm mlp_cross_entropy attention
        layernorm""".split(),
    "numpy": """greater less_equal_scalar equal_not_equal logical where_bool where_int_cond arange
        arange_float arange_step one_hot full_zeros_ones astype astype_bool clip abs_sign_int
        square_sqrt power_int index_mixed index_int_slice index_array_middle index_traced_array
        index_empty_slice take_flat take_negative_concrete concatenate_none stack_neg_axis
        expand_squeeze moveaxis_transpose reshape_ravel matmul_vectors matmul_batched_4d
        dot_matrix softmax log_softmax logsumexp var_ddof_std mean_int max_int_keepdims
        """.split(),
    "vulkan": """add_bcast add_bcast_col sub_mul_div pow pow_int_exponent max_min unary
        log_sqrt_log1p tanh_large compare_where clip_relu int_ops convert int_to_float
        bool_output stop_gradient scalar_math sum_all sum_axis0 sum_axis1_keep sum_middle
        sum_outer_axes max_min_mean var argmax_argmin long_sum transpose3 transpose_to_matmul
        reshape slice_step index_neg concatenate stack broadcast_to arange_onehot
        pad_via_slice_grad take_rows take_axis1 take_grad softmax log_softmax_axis0 logsumexp
        softmax_grad log_softmax_grad long_row_softmax matmul_batched matmul_batched_TT
        matmul_bcast_batch matvec""".split() + [
        f"matmul_{m}x{k}x{n}_{a}{b}" for m, k, n in [(1, 7, 33), (7, 33, 1), (33, 130, 7),
                                                     (130, 257, 33), (257, 1, 130)]
        for a in "NT" for b in "NT"],
}
RENAMED = {
    ("numpy", "clip"): "clip_vs_numpy", ("numpy", "log_softmax"): "log_softmax_vs_numpy",
    ("numpy", "softmax"): "softmax_vs_numpy", ("numpy", "logsumexp"): "logsumexp_vs_numpy",
    **{("vulkan", n): n + "_awkward" for n in ["sum_all", "sum_axis0", "var", "concatenate",
                                               "stack", "broadcast_to", "take_axis1",
                                               "matmul_batched", "matvec"]},
}


def test_no_case_was_lost_in_the_merge():
    assert [len(v) for v in MERGED.values()] == [68, 38, 69]
    new = {RENAMED.get((table, name), name) for table, names in MERGED.items() for name in names}
    assert len(new) == 68 + 38 + 69, "two old rows map to one new name"
    lost = sorted(new - set(BY_NAME))
    assert not lost, f"rows of the old tables missing from tests/cases.py: {lost}"


# ----------------------------------------------------------------------------- beyond the table

def test_float32_models_stay_float32():
    case = BY_NAME["attention"]
    prog = vg.make_ir(case.fun)(*case.args32())
    assert {v.dtype for e in prog.eqns for v in e.outputs} <= {"f32", "i32", "bool"}


def test_traced_indices_are_clamped_like_a_gpu_kernel():
    x = to_float32(np.random.default_rng(3).standard_normal((3, 4)))
    prog = vg.make_ir(lambda x, i: vnp.take(x, i, axis=0))(x, np.array([2, 0, 1], np.int32))
    out = run_program(prog, x, np.array([-5, 1, 99], np.int32))[0]
    np.testing.assert_array_equal(out, x[[0, 1, 2]])
