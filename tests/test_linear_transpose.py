"""vg.linear_transpose (jax.linear_transpose): the transpose of a linear function, its values
against the matrices they transpose, its linearity check naming the op that is not linear, and
its use inside and across vg.jit."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
MASK = np.array([True, False, True, False])
X0 = np.zeros(4, np.float32)


def _scan_cumsum(x):
    return vg.lax.scan(lambda c, xi: (c + xi, c + xi), 0.0, x)[1]


def _matrix(f, n):
    """f's matrix, column by column (f applied to the unit vectors)."""
    eye = np.eye(n, dtype=np.float32)
    return np.stack([np.asarray(f(vnp.asarray(eye[i]))) for i in range(n)], axis=1)


# name -> a linear function of one f32[4] (the ops a linear function is built of)
LINEAR = {
    "matvec": lambda x: A @ x,
    "einsum": lambda x: vnp.einsum("ij,j->i", A, x),
    "scale_and_shift_mean": lambda x: 2.0 * x - x.mean() / 3.0,
    "cumsum": vnp.cumsum,
    "transpose": lambda x: vnp.reshape(x, (2, 2)).T.ravel(),
    "concatenate": lambda x: vnp.concatenate([x, -x[::2]]),
    "pad": lambda x: vnp.pad(x, (1, 2)),
    "where_constant_mask": lambda x: vnp.where(MASK, x, 0.0),
    "at_set_add": lambda x: x.at[1].set(0.0).at[np.array([0, 0, 2])].add(x[:3]),
    "roll_flip": lambda x: vnp.flip(vnp.roll(x, 1)),
    "convolve": lambda x: vnp.convolve(x, np.float32([1, 2, 3])),
    "through_float16": lambda x: x.astype(vnp.float16).astype(vnp.float32),
    "vmap": lambda x: vg.vmap(lambda r: r @ x)(A),
    "scan": _scan_cumsum,
    "fori_loop": lambda x: vg.lax.fori_loop(0, 3, lambda i, c: c * 2.0 + x, x),
    "cond_on_a_constant": lambda x: vg.lax.cond(True, lambda v: v[::-1], lambda v: v, x),
}


@pytest.mark.parametrize("name", sorted(LINEAR))
def test_the_transpose_is_the_transposed_matrix(name):
    f = LINEAR[name]
    m = _matrix(f, 4)                                 # f(x) = m @ x
    ct = RNG.integers(-8, 9, m.shape[0]).astype(np.float32) / 4   # exact in float16 too
    (got,) = vg.linear_transpose(f, X0)(ct)
    np.testing.assert_allclose(np.asarray(got), m.T @ ct, rtol=1e-5, atol=1e-5)


def test_pytrees_in_and_out_and_shape_dtype_structs():
    def f(x, p):
        return {"a": 2.0 * x + p["w"][0], "b": vnp.sum(p["w"]) - x[1]}

    spec = vg.ShapeDtypeStruct((3,), np.float32)
    f_t = vg.linear_transpose(f, spec, {"w": np.ones((2, 3), np.float32)})
    ct_a = np.float32([1.0, 2.0, 3.0])
    out = f_t({"a": ct_a, "b": 0.5})
    assert isinstance(out, tuple) and len(out) == 2 and set(out[1]) == {"w"}
    np.testing.assert_allclose(np.asarray(out[0]), 2.0 * ct_a - np.float32([0, 0.5, 0]))
    np.testing.assert_allclose(np.asarray(out[1]["w"]), np.stack([ct_a + 0.5, np.full(3, 0.5)]))
    assert np.asarray(out[1]["w"]).dtype == np.float32


def test_an_affine_function_transposes_its_linear_part_and_an_unused_input_gets_zeros():
    f_t = vg.linear_transpose(lambda x, y: 3.0 * x + 1.0, 1.0, np.zeros(2, np.float32))
    gx, gy = f_t(2.0)
    assert float(gx) == 6.0 and np.array_equal(np.asarray(gy), [0.0, 0.0])


NONLINEAR = {   # name -> (function, the primitive the error names)
    "square": (lambda x: x * x, "mul"),
    "sin": (vnp.sin, "sin"),
    "relu_by_where": (lambda x: vnp.where(x > 0, x, 0.0), "select"),
    "index_from_argmax": (lambda x: x[vnp.argmax(x)] * x, "reduce_max"),
    "product_of_parts": (lambda x: x[:2] @ x[2:], "matmul"),
    "floor": (vnp.floor, "floor"),
    "through_int32": (lambda x: x.astype(vnp.int32) * x, "select"),   # astype clamps by select
    "inside_a_scan": (lambda x: vg.lax.scan(lambda c, xi: (c * xi, c), 1.0, x)[1], "mul"),
    "divide_by_it": (lambda x: 1.0 / x, "div"),
}


@pytest.mark.parametrize("name", sorted(NONLINEAR))
def test_a_nonlinear_function_is_an_error_naming_its_op(name):
    f, prim = NONLINEAR[name]
    with pytest.raises(vg.ArgumentError, match="linear in its arguments") as err:
        vg.linear_transpose(f, X0)
    assert err.value.primitive == prim
    assert "test_linear_transpose.py" in err.value.source   # the user's line of that op


def test_bad_arguments_are_jax_errors_in_the_users_terms():
    with pytest.raises(vg.ArgumentError, match=r"float -> float functions.*\(i32\) -> \(f32\)"):
        vg.linear_transpose(lambda n: n * 1.5, 2)
    with pytest.raises(vg.ArgumentError, match="reduce_axes"):
        vg.linear_transpose(lambda x: x, X0, reduce_axes=("batch",))
    with pytest.raises(vg.ArgumentError, match="expects a function"):
        vg.linear_transpose(3.0, X0)
    f_t = vg.linear_transpose(lambda x: (x, x[0]), X0)
    with pytest.raises(vg.ArgumentError, match="has structure"):
        f_t(np.ones(4, np.float32))
    with pytest.raises(vg.ArgumentError, match=r"cotangent leaf 0 .* is f32\[3\], but .* f32\[4\]"):
        f_t((np.ones(3, np.float32), 1.0))
    with pytest.raises(vg.ArgumentError, match=r"cotangent leaf 1 .* is i32\[\]"):
        f_t((np.ones(4, np.float32), np.int32(1)))


def test_inside_jit_closing_over_a_traced_matrix_and_as_a_jit_argument():
    @vg.jit
    def step(m, ct):
        f_t = vg.linear_transpose(lambda x: m @ x, X0)
        return f_t(ct)[0]

    ct = np.float32([1.0, -2.0, 0.5])
    np.testing.assert_allclose(np.asarray(step(A, ct)), A.T @ ct, rtol=1e-5)

    f_t = vg.linear_transpose(LINEAR["matvec"], X0)   # a Partial: a pytree with no leaves here
    assert vg.tree_util.tree_leaves(f_t) == []
    apply = vg.jit(lambda g, c: g(c)[0], backend="vulkan")
    np.testing.assert_allclose(np.asarray(apply(f_t, ct)), A.T @ ct, rtol=1e-5)


def test_vmap_and_jvp_of_the_transpose():
    f_t = vg.linear_transpose(LINEAR["matvec"], X0)
    cts = RNG.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(vg.vmap(lambda c: f_t(c)[0])(cts)), cts @ A,
                               rtol=1e-5, atol=1e-6)
    _, tangent = vg.jvp(lambda c: f_t(c)[0], (cts[0],), (cts[1],))
    np.testing.assert_allclose(np.asarray(tangent), A.T @ cts[1], rtol=1e-5, atol=1e-6)


def test_grad_through_the_transpose():
    f_t = vg.linear_transpose(LINEAR["matvec"], X0)
    g = vg.grad(lambda c: vnp.sum(f_t(c)[0] ** 2))(np.float32([1.0, 2.0, 3.0]))
    c = np.float32([1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(g), 2 * A @ (A.T @ c), rtol=1e-5)
