"""vkgrad.numpy's semantics beyond the table (tests/cases.py has every function's values and
gradients): what it refuses and how it says so (numpy functions it lacks, out=, bad
shapes), the dtype policy, operators, vg.lax.top_k, einsum's program. Indexing and x.at:
tests/test_numpy_indexing.py."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

X = np.arange(12, dtype=np.float32).reshape(3, 4) / 7 - 0.5


def test_numpy_function_hint_names_only_functions_that_exist():
    with pytest.raises(vg.ConcretizationError, match="use vkgrad.numpy.exp instead"):
        vg.make_ir(lambda x: np.exp(x, out=x))(X)
    with pytest.raises(vg.ConcretizationError, match="vnp.cumsum"):
        vg.make_ir(lambda x: np.add.accumulate(x))(X)
    with pytest.raises(vg.ConcretizationError) as e:
        vg.make_ir(lambda x: np.real_if_close(x))(X)
    assert "does not support real_if_close yet" in str(e.value) and \
        "vkgrad.numpy.real_if_close" not in str(e.value)
    with pytest.raises(vg.ConcretizationError, match="does not support fft yet"):
        vg.make_ir(lambda x: np.fft.fft(x))(X)
    # a function vnp has is used through numpy's name
    prog = vg.make_ir(lambda x: np.cumsum(np.arcsinh(x), axis=1) + np.linalg.norm(x))(X)
    assert "asinh" in str(prog) and "sqrt" in str(prog)
    vg.make_ir(lambda x: np.linalg.inv(x[:, :3]))(X)      # numpy.linalg's names too
    with pytest.raises(vg.DTypeError, match="sort_complex: its result is complex"):
        vg.make_ir(lambda x: np.sort_complex(x))(X)
    assert "cumsum" in str(vg.make_ir(lambda x: np.unwrap(np.spacing(x)))(X))   # vnp's now


def test_dtype_names_follow_the_policy():
    with pytest.warns(UserWarning, match="int64 requested in astype .* truncated to dtype int32"):
        assert vnp.astype(X, vnp.int64).dtype == np.int32
    with pytest.warns(UserWarning, match="float64 requested in zeros .* to dtype float32"):
        assert vnp.zeros(2, vnp.float64).dtype == np.float32
    with vg.enable_x64():
        assert vnp.zeros(2, vnp.float64).dtype == np.float64
    assert vnp.ones(2, vnp.bool_).dtype == np.bool_
    assert vnp.astype(X, vnp.float16).dtype == np.float16     # tests/test_float16.py
    assert vnp.astype(X, "bfloat16").dtype == vnp.bfloat16
    with pytest.raises(vg.DTypeError, match="complex"):
        vnp.zeros(2, np.complex64)


def test_out_is_refused_clearly():
    for f in (lambda: vnp.sum(X, out=X), lambda: vnp.cumsum(X, out=X),
              lambda: vnp.dot(X, X.T, out=X)):
        with pytest.raises(vg.ArgumentError, match="out= is not supported"):
            f()


def test_axis_tuples_keepdims_dtype():
    with vg.enable_x64():
        got = vnp.prod(X + 1, axis=(0, 1), keepdims=True, dtype=np.float64)
    np.testing.assert_allclose(got, np.prod(X + 1, axis=(0, 1), keepdims=True, dtype=np.float64))
    assert got.dtype == np.float64


def test_mod_and_floordiv_operators_on_traced_values():
    prog = vg.make_ir(lambda x: x % 2.0 + x // 3.0 + 5.0 % (x + 9) + 7 // (x + 9))(X)
    got = vg.run_program(prog, X)[0]
    np.testing.assert_allclose(got, X % 2.0 + X // 3.0 + 5.0 % (X + 9) + 7 // (X + 9), rtol=1e-6)


def test_allclose_needs_concrete_values():
    assert vnp.allclose(X, X + 1e-9) is True and vnp.allclose(X, X + 1) is False
    with pytest.raises(vg.ConcretizationError, match="vnp.all\\(vnp.isclose"):
        vg.make_ir(lambda x: vnp.allclose(x, x))(X)


def test_one_argument_where_outside_a_trace():
    rows, cols = vnp.where(X > 0.5)
    np.testing.assert_array_equal(rows, np.where(X > 0.5)[0])
    np.testing.assert_array_equal(cols, np.where(X > 0.5)[1])
    with pytest.raises(vg.ConcretizationError, match="vnp.where\\(cond, x, y\\)"):
        vg.make_ir(lambda x: vnp.where(x > 0))(X)


def test_matrix_2_norm_and_unknown_pad_modes():
    """The matrix 2-norm is the largest singular value (it was refused before the SVD)."""
    np.testing.assert_allclose(vnp.linalg.norm(X, 2), np.linalg.norm(X, 2), rtol=1e-5)
    with pytest.raises(vg.ArgumentError, match="'constant', 'edge' and 'reflect'"):
        vnp.pad(X, 1, mode="wrap")


def test_lax_top_k():
    vals, idx = vg.lax.top_k(np.float32([[1, 5, 3, 5], [0, -1, 2, 9]]), 3)
    np.testing.assert_array_equal(vals, [[5, 5, 3], [9, 2, 0]])
    np.testing.assert_array_equal(idx, [[1, 3, 2], [3, 2, 0]])   # ties: the lower index first
    g = vg.grad(lambda x: vnp.sum(vg.lax.top_k(x, 2)[0] * np.float32([1, 10])))(X)
    want = np.zeros_like(X)
    want[:, 3], want[:, 2] = 1, 10
    np.testing.assert_array_equal(g, want)


def test_einsum_program_is_transposes_and_one_matmul():
    prog = vg.make_ir(lambda a, b: vnp.einsum("bij,bkj->kib", a, b))(
        np.ones((2, 3, 4), np.float32), np.ones((2, 5, 4), np.float32))
    names = [e.prim.name for e in prog.eqns]
    assert names.count("matmul") == 1 and "transpose" in names


@pytest.mark.parametrize("make", [lambda: vnp.ones((3.5,)), lambda: vnp.zeros((-1,)),
                                  lambda: vnp.full(("a",), 1), lambda: vnp.zeros(2.0),
                                  lambda: vnp.empty((2, None))])
def test_a_bad_shape_is_refused_by_name(make):
    with pytest.raises(vg.ShapeError, match="is not a shape"):
        make()
    assert vnp.zeros((2, np.int64(3))).shape == (2, 3) and vnp.ones(()).shape == ()


def test_integers_beyond_int32_are_an_error_not_a_wrap():
    """vkgrad computes integers in int32 (JAX without x64): a value int32 cannot hold is an
    IntegerOverflowError (an OverflowError, as JAX raises for Python ints), never a silent
    wrap (`jit(lambda x: x + 1)(2**40)` gave 1; `sum(arange(100000) ** 2)` 216474736)."""
    with pytest.raises(vg.IntegerOverflowError, match="Python int 1099511627776"):
        vg.jit(lambda x: x + 1)(2 ** 40)
    with pytest.raises(OverflowError, match="int64 value 9999800001 does not fit int32"):
        vnp.sum(np.arange(100000) ** 2)
    with pytest.raises(vg.IntegerOverflowError):
        vg.jit(lambda x: x * 2)(np.array([2 ** 33]))
    with pytest.raises(OverflowError):
        vnp.asarray(2 ** 31)
    assert float(vg.grad(lambda x: x * (2 ** 31))(1.0)) == 2.0 ** 31   # weak: takes float32
    # int64 data that fits is narrowed to int32 exactly
    np.testing.assert_array_equal(np.asarray(vg.jit(lambda x: x + 1)(np.arange(3))), [1, 2, 3])
    assert vnp.sum(np.arange(1000) ** 2) == 332833500
