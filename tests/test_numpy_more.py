"""jax.numpy names added to vkgrad.numpy: numpy 2's aliases and dtype names, the bit and float
ufuncs (frexp, ldexp, spacing, gcd, packbits, ...), JAX's functional forms of numpy's in-place
functions (put, place, fill_diagonal, ...), selection with data-dependent lengths (compress,
extract, delete, insert, unique_*: size= or concrete inputs), nan quantiles, grids, I/O, and
the names refused by name. Values against numpy or against JAX 0.10.2's (pasted literals),
gradients against finite differences, a few jitted on the interpreter and one on Vulkan."""

import io
import warnings

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp

RNG = np.random.default_rng(3)
X = RNG.normal(size=(3, 7)).astype(np.float32)
FLOATS = np.array([0, 1.5, -3.25, 1e-40, -1e-42, np.inf, -np.inf, np.nan, 3e38, 1.0, 0.5, 7.0],
                  np.float32)


def same(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_array_equal(got, want)


def close(got, want, **kw):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, **{"rtol": 1e-5, "atol": 1e-6, **kw})


def test_numpy2_aliases_and_dtype_names():
    u = np.clip(X * 0.3, -0.9, 0.9)
    for new, old, x in [("acos", "arccos", u), ("acosh", "arccosh", u + 2), ("asin", "arcsin", u),
                        ("asinh", "arcsinh", X), ("atan", "arctan", X), ("atanh", "arctanh", u)]:
        same(getattr(vnp, new)(x), getattr(vnp, old)(x))
    close(vnp.atan2(X, 1.5), np.arctan2(X, 1.5))
    assert vnp.bool is np.bool_ and vnp.single is np.float32 and vnp.int_ is np.int32
    assert vnp.double is np.float64 and vnp.float_ is np.float64
    assert vnp.zeros(2, vnp.int_).dtype == np.int32
    with pytest.warns(UserWarning, match="float64 requested"):
        assert vnp.zeros(2, vnp.double).dtype == np.float32     # x64 off, as JAX
    assert vnp.euler_gamma == np.euler_gamma
    for name in ("generic", "character", "flexible", "unsignedinteger", "complexfloating"):
        assert getattr(vnp, name) is getattr(np, name)
    assert not vnp.issubdtype(vnp.asarray(X).dtype, vnp.complexfloating)
    assert vnp.can_cast(np.int32, np.float64) and vnp.iterable([1]) and not vnp.iterable(1)
    assert issubclass(vnp.ComplexWarning, Warning)
    with pytest.warns(UserWarning, match="uint16 requested in zeros is stored as int32"):
        assert vnp.zeros(2, vnp.uint16).dtype == np.int32     # as uint8: stored as int32


def test_promote_types_isdtype_isscalar():
    assert vnp.promote_types(np.int32, np.float16) == np.float16     # JAX's lattice
    assert vnp.promote_types(vnp.bfloat16, np.float16) == np.float32
    assert vnp.promote_types("bool", "int32") == np.int32
    assert vnp.isdtype(np.float32, "real floating") and vnp.isdtype(vnp.bfloat16, "numeric")
    assert vnp.isdtype(np.int32, ("bool", "integral")) and not vnp.isdtype(np.int32, "bool")
    assert vnp.isdtype(np.float32, np.float32) and not vnp.isdtype(np.float32, np.int32)
    with pytest.raises(vg.ArgumentError, match="kind 'reals'"):
        vnp.isdtype(np.float32, "reals")
    assert vnp.isscalar(1.0) and vnp.isscalar(vnp.asarray(2.0)) and not vnp.isscalar([1.0])
    assert not vnp.isscalar(vnp.asarray(X))


def test_refused_names_say_why():
    for name in ("complex64", "complex128", "complex_", "cdouble", "csingle"):
        with pytest.raises(vg.DTypeError, match=f"vnp.{name}: vkgrad has no complex dtype"):
            vnp.zeros(2, getattr(vnp, name))
    with pytest.raises(vg.DTypeError, match="no complex dtype"):
        vnp.complex64(1.0)
    for name, bits in [("float8_e4m3fn", 8), ("float8_e5m2", 8), ("float4_e2m1fn", 4),
                       ("int4", 4), ("uint4", 4), ("int2", 2)]:
        with pytest.raises(vg.DTypeError, match=f"vnp.{name}: vkgrad has no {bits}-bit dtype"):
            vnp.asarray(X).astype(getattr(vnp, name))
    with pytest.raises(vg.DTypeError, match="sort_complex: its result is complex"):
        vnp.sort_complex(X)
    with pytest.raises(vg.ArgumentError, match="frompyfunc: .*ufunc methods"):
        vnp.frompyfunc(lambda x: x, 1, 1)
    with pytest.raises(vg.ArgumentError, match="vnp.ufunc"):
        vnp.ufunc()
    assert not isinstance(vnp.add, vnp.ufunc)


def test_frexp_ldexp_spacing_nextafter_are_numpys():
    m, e = vnp.frexp(FLOATS)
    nm, ne = np.frexp(FLOATS)
    same(m, nm)
    same(e, ne.astype(np.int32))
    n = np.array([0, 1, -1, 5, 200, -200, 127, 128, -149, -150, 3, -130], np.int32)
    with np.errstate(over="ignore"):
        same(vnp.ldexp(FLOATS, n), np.ldexp(FLOATS, n))
        same(vnp.ldexp(np.float32(1.5), n), np.ldexp(np.float32(1.5), n))
    same(vnp.spacing(FLOATS), np.spacing(FLOATS))
    same(vnp.nextafter(FLOATS, np.float32(0)), np.nextafter(FLOATS, np.float32(0)))
    same(vnp.nextafter(FLOATS, np.float32(np.inf)), np.nextafter(FLOATS, np.float32(np.inf)))
    with pytest.raises(vg.DTypeError, match="ldexp: the exponent must be an integer"):
        vnp.ldexp(1.0, 2.0)


def test_frexp_ldexp_in_float64(x64):
    x = np.array([1e300, 1e-310, 3.5, -2.0 ** -1074, 1.7e308, 0.0])
    m, e = vnp.frexp(x)
    same(m, np.frexp(x)[0])
    same(e, np.frexp(x)[1].astype(np.int32))
    n = np.array([10, -20, 1000, 1074, -3, 5])
    same(vnp.ldexp(x, n), np.ldexp(x, n))
    same(vnp.nextafter(x, 0.0), np.nextafter(x, 0.0))


def test_modf_matches_jax():
    f, w = vnp.modf(np.array([1.5, -2.25, 3.0, np.inf, -2.5], np.float32))
    same(f, np.float32([0.5, -0.25, 0.0, np.nan, -0.5]))      # JAX's: inf - inf is nan
    same(w, np.float32([1.0, -2.0, 3.0, np.inf, -2.0]))


def test_integer_ufuncs():
    a = np.array([12, -18, 0, 0, 7, 2 ** 30, 1071])
    b = np.array([8, 12, 5, 0, 13, 6, 462])
    same(vnp.gcd(a, b), np.gcd(a, b).astype(np.int32))
    same(vnp.lcm(a[:5], b[:5]), np.lcm(a[:5], b[:5]).astype(np.int32))
    v = np.array([0, 7, -1, -8, 255, 2 ** 31 - 1])
    same(vnp.bitwise_count(v), np.bitwise_count(v).astype(np.int32))
    same(vnp.bitwise_count(np.array([True, False])), np.int32([1, 0]))
    with pytest.raises(vg.DTypeError, match="gcd takes integer"):
        vnp.gcd(1.5, 2)


def test_packbits_unpackbits_are_numpys():
    a = RNG.integers(0, 2, (3, 11))
    for kw in ({}, {"axis": 1}, {"axis": 0}, {"bitorder": "little"}, {"axis": -1,
                                                                       "bitorder": "little"}):
        same(vnp.packbits(a, **kw), np.packbits(a, **kw).astype(np.int32))
    u = RNG.integers(0, 256, (2, 3)).astype(np.uint8)
    for kw in ({}, {"axis": 0}, {"axis": 1, "count": 20}, {"count": 5, "bitorder": "little"}):
        same(vnp.unpackbits(u.astype(np.int32), **kw), np.unpackbits(u, **kw).astype(np.int32))
    with pytest.raises(vg.ArgumentError, match="bitorder"):
        vnp.packbits(a, bitorder="middle")


def test_reductions_ediff1d_unwrap_array_equiv():
    m = np.array([[1, 4], [9, 16]])
    same(vnp.ediff1d(m, to_begin=[-1, -2], to_end=99), np.ediff1d(m, to_begin=[-1, -2],
                                                                  to_end=99))
    p = np.cumsum(RNG.uniform(-4, 4, (3, 8)), axis=1).astype(np.float32)
    close(vnp.unwrap(p), np.unwrap(p))
    close(vnp.unwrap(p, axis=0, discont=1.0), np.unwrap(p, axis=0, discont=1.0))
    same(vnp.unwrap(np.array([0, 5, 9, 1]), period=8), np.unwrap(np.array([0, 5, 9, 1]),
                                                                 period=8))
    assert bool(vnp.array_equiv([1, 2], [[1, 2], [1, 2]]))
    assert not bool(vnp.array_equiv([1, 2], [1, 2, 3]))


def test_gradients():
    p = np.cumsum(RNG.uniform(-2, 2, 6)).astype(np.float64)
    vg.check_grads(lambda x: vnp.unwrap(x), (p,), order=1, modes=("rev",))
    vg.check_grads(lambda x: vnp.ediff1d(x, to_begin=x[:1]), (p,), order=1)
    x = X.astype(np.float64)
    x[0, 2] = x[1, 3] = np.nan
    vg.check_grads(lambda a: vnp.nan_to_num(vnp.nanmedian(a, axis=1)), (x,), order=1,
                   modes=("rev",))
    vg.check_grads(lambda a: vnp.nanquantile(a, 0.3, axis=0), (x,), order=1, modes=("rev",))
    vg.check_grads(lambda a: vnp.ldexp(a, np.array([1, -2, 3])), (np.array([0.3, -1.2, 2.0]),),
                   order=1, modes=("rev",))
    vg.check_grads(lambda a: vnp.frexp(a)[0], (np.array([0.3, -1.2, 5.0]),), order=1,
                   modes=("rev",))
    vg.check_grads(lambda a: vnp.modf(a)[0], (np.array([0.3, -1.2, 5.1]),), order=1)
    vg.check_grads(lambda a, v: vnp.place(a, a > 0, v, inplace=False),
                   (x[2], np.array([1.0, 2.0])), order=1, modes=("rev",))
    vg.check_grads(lambda a: vnp.insert(a, np.array([1, 1]), a[:2] * 2), (p,), order=1,
                   modes=("rev",))
    vg.check_grads(lambda a: vnp.vecdot(a, a[::-1]), (x[2:],), order=1)


def test_nan_quantiles_are_numpys():
    a = X.copy()
    a[0, 2] = np.nan
    a[1, :] = np.nan
    a[2, [1, 5]] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # numpy's all-NaN slice warning
        for q in (0.0, 0.3, 1.0, [0.1, 0.9]):
            close(vnp.nanquantile(a, q, axis=1), np.nanquantile(a, q, axis=1))
        close(vnp.nanmedian(a, axis=1), np.nanmedian(a, axis=1))
        close(vnp.nanmedian(a), np.nanmedian(a))
        close(vnp.nanpercentile(a, [25, 75], axis=0, keepdims=True),
              np.nanpercentile(a, [25, 75], axis=0, keepdims=True))
    with pytest.raises(vg.ArgumentError, match="nanpercentile: q must lie in"):
        vnp.nanpercentile(a, 101)


def test_lexsort_is_numpys():
    k1, k2 = np.array([1, 5, 1, 4, 3, 4, 4]), np.array([9, 4, 0, 4, 0, 2, 1])
    same(vnp.lexsort((k1, k2)), np.lexsort((k1, k2)).astype(np.int32))
    m = RNG.integers(0, 3, (3, 2, 5))
    same(vnp.lexsort(m), np.lexsort(m).astype(np.int32))
    same(vnp.lexsort([m[0], m[1]], axis=0), np.lexsort([m[0], m[1]], axis=0).astype(np.int32))


def test_unique_family():
    x = np.array([[3, 1, 3], [2, 1, 7]])
    r = vnp.unique_all(x)
    want = np.unique_all(x)
    for f in ("values", "indices", "inverse_indices", "counts"):
        same(getattr(r, f), getattr(want, f).astype(getattr(want, f).dtype.kind == "i"
                                                    and np.int32 or None))
    y = np.array([1.0, np.nan, np.nan, 2.0], np.float32)
    same(vnp.unique_counts(y).counts, np.int32([1, 1, 1, 1]))      # NaNs distinct
    same(vnp.unique_values(y), np.unique_values(y))
    same(vnp.unique_inverse(x).inverse_indices, np.unique_inverse(x).inverse_indices)
    f = vg.jit(lambda x: vnp.unique_inverse(x, size=5, fill_value=-1), backend="numpy")
    v, inv = f(x)
    same(v, np.int32([1, 2, 3, 7, -1]))
    same(inv, np.unique_inverse(x).inverse_indices.astype(np.int32))
    with pytest.raises(vg.ConcretizationError, match="size=n"):
        vg.jit(lambda x: vnp.unique_values(x), backend="numpy")(x)


# JAX 0.10.2's values (/tmp/jaxenv), for the functional forms of numpy's in-place functions
def test_put_place_fill_diagonal_match_jax():
    a = np.zeros(6, np.float32)
    idx, v = np.array([-1, 10, 2]), np.float32([1, 2, 3])
    same(vnp.put(a, idx, v, inplace=False), np.float32([0, 0, 3, 0, 0, 2]))
    same(vnp.put(a, idx, v, mode="clip", inplace=False), np.float32([1, 0, 3, 0, 0, 2]))
    same(vnp.put(a, idx, v, mode="wrap", inplace=False), np.float32([0, 0, 3, 0, 2, 1]))
    same(vnp.put(a, np.array([-7, 1]), np.float32([5]), inplace=False),
         np.float32([5, 5, 0, 0, 0, 0]))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    same(vnp.put_along_axis(x, np.array([[0], [3], [-1]]), 99.0, axis=1, inplace=False),
         [[99, 1, 2, 3], [4, 5, 6, 99], [8, 9, 10, 99]])
    same(vnp.put_along_axis(x, np.array([[0], [5], [1]]), 99.0, axis=1, inplace=False),
         [[99, 1, 2, 3], [4, 5, 6, 7], [8, 99, 10, 11]])      # 5 is out of range: dropped
    same(vnp.put_along_axis(x, np.array([1, 2]), -1.0, axis=None, inplace=False),
         np.where(np.isin(np.arange(12), [1, 2]), -1, x.ravel()).reshape(3, 4))
    same(vnp.place(x, x > 5, np.float32([-1, -2]), inplace=False),
         [[0, 1, 2, 3], [4, 5, -1, -2], [-1, -2, -1, -2]])
    same(vnp.fill_diagonal(np.zeros((3, 5)), np.float32([1, 2]), inplace=False),
         np.float32([[1, 0, 0, 0, 0], [0, 2, 0, 0, 0], [0, 0, 1, 0, 0]]))
    same(vnp.fill_diagonal(np.zeros((5, 3), np.float32), 4.0, inplace=False),
         np.pad(np.eye(3, dtype=np.float32) * 4, ((0, 2), (0, 0))))
    for fn, args in [(vnp.put, (a, [0], 1.0)), (vnp.place, (a, a > 0, [1.0])),
                     (vnp.fill_diagonal, (x, 1.0)), (vnp.put_along_axis, (x, x.astype(int), 1, 1))]:
        with pytest.raises(vg.ArgumentError, match="inplace=False"):
            fn(*args)


def test_choose_compress_extract():
    same(vnp.choose(np.array([0, 1, 2, 1]), [np.arange(4), 10 * np.arange(4), 100],
                    mode="wrap"), np.int32([0, 10, 100, 30]))
    c = [np.arange(4), 10 * np.arange(4)]
    same(vnp.choose(np.array([0, 1, 1, 0]), c), np.choose([0, 1, 1, 0], c))
    with pytest.raises(vg.ArgumentError, match="invalid entry"):
        vnp.choose(np.array([0, 2]), [np.zeros(2), np.ones(2)])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    cond = np.array([True, False, True])
    same(vnp.compress(cond, x, axis=1), np.compress(cond, x, axis=1))
    same(vnp.compress(cond, x, axis=0), np.compress(cond, x, axis=0))
    same(vnp.compress(cond, x), np.compress(cond, x))
    same(vnp.compress(cond, x, axis=1, size=3, fill_value=-1),
         [[0, 2, -1], [4, 6, -1], [8, 10, -1]])
    same(vnp.extract(x > 6, x), np.extract(x > 6, x))
    f = vg.jit(lambda c, x: vnp.compress(c, x, axis=1, size=2), backend="numpy")
    same(f(np.array([False, True, False, True]), x), x[:, [1, 3]])
    with pytest.raises(vg.ConcretizationError, match="size=n"):
        vg.jit(lambda c, x: vnp.extract(c, x), backend="numpy")(x > 3, x)


def test_delete_insert_trim_zeros():
    a = np.arange(6)
    for obj in (np.array([1, -1]), 2, slice(1, 4), np.array([True, False] * 3)):
        same(vnp.delete(a, obj), np.delete(a, obj))
    m = np.arange(6).reshape(2, 3)
    same(vnp.delete(m, 1, axis=1), np.delete(m, 1, axis=1))
    same(vnp.insert(a[:5], np.array([1, 1, -1, 7]), np.array([10, 20, 30, 40])),
         np.int32([0, 10, 20, 1, 2, 3, 30, 4, 40]))        # JAX's: 7 clamps to the end
    same(vnp.insert(m, 1, np.array([7, 8]), axis=1), np.insert(m, 1, [7, 8], axis=1))
    same(vnp.insert(m, np.array([1]), np.array([[7], [8]]), axis=1),
         np.insert(m, [1], [[7], [8]], axis=1))
    same(vnp.insert(m, 1, 5), np.insert(m, 1, 5))
    same(vnp.insert(a, slice(0, 6, 2), -1), np.insert(a, slice(0, 6, 2), -1))
    same(vnp.trim_zeros(np.array([0, 0, 1, 0, 2, 0])), np.int32([1, 0, 2]))
    same(vnp.trim_zeros(np.array([0, 0, 1, 0, 2, 0]), "f"), np.int32([1, 0, 2, 0]))
    same(vnp.trim_zeros(np.array([[0, 0, 0], [0, 1, 0]])), np.int32([[1]]))
    with pytest.raises(vg.ConcretizationError, match="trim_zeros"):
        vg.jit(vnp.trim_zeros, backend="numpy")(a)
    with pytest.raises(vg.ConcretizationError, match="assume_unique_indices=True"):
        vg.jit(lambda i, x: vnp.delete(x, i), backend="numpy")(np.array([1]), a)


def test_traced_indices_jitted_match_jax():
    """One jitted program of the traced forms, on the interpreter, against JAX's values."""
    def f(i, c, x):
        return (vnp.delete(x, i, assume_unique_indices=True), vnp.insert(x, i, -1.0),
                vnp.compress(c, x, size=2), vnp.put_along_axis(x, i, 7.0, axis=0,
                                                               inplace=False),
                vnp.place(x, c, np.float32([5, 6]), inplace=False),
                vnp.put(x, i, 9.0, inplace=False), vnp.choose(i % 2, [x[:3], -x[:3]],
                                                              mode="clip"))
    outs = vg.jit(f, backend="numpy")(np.array([1, -1, 9]),
                                      np.array([True, False, True, True, False, True]),
                                      np.arange(6, dtype=np.float32))
    want = [[0, 2, 3], [0, -1, 1, 2, 3, 4, -1, 5, -1], [0, 2], [0, 7, 2, 3, 4, 7],
            [5, 1, 6, 5, 4, 6], [0, 9, 2, 3, 4, 9], [0, -1, -2]]
    for got, w in zip(outs, want):
        same(got, np.float32(w))


def test_shapes_grids_and_contractions():
    same(vnp.resize(np.arange(5), (2, 4)), np.resize(np.arange(5), (2, 4)))
    same(vnp.resize(np.zeros(0, np.float32), 3), np.zeros(3, np.float32))
    same(vnp.diagflat(np.array([[1, 2]]), k=-1), np.diagflat([[1, 2]], k=-1))
    blocks = [[np.ones((2, 2)), np.zeros((2, 1))], [np.full((1, 3), 2.0)]]
    same(vnp.block(blocks), np.block(blocks).astype(np.float32))
    same(vnp.block([1, 2, np.array([3, 4])]), np.block([1, 2, np.array([3, 4])]))
    with pytest.raises(vg.ShapeError, match="depths are mismatched"):
        vnp.block([[1], 2])
    close(vnp.mgrid[0:3, 0:1:3j], np.mgrid[0:3, 0:1:3j])
    same(vnp.mgrid[0:4:2], np.mgrid[0:4:2])
    for g, w in zip(vnp.ogrid[0:3, 0:2], np.ogrid[0:3, 0:2]):
        same(g, w)
    assert vnp.s_[1:2] == slice(1, 2) and vnp.index_exp[1] == (1,)
    same(vnp.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=np.int32),
         np.fromfunction(lambda i, j: i + 10 * j, (2, 3), dtype=np.int32))
    i, j = vnp.mask_indices(3, vnp.triu, 1)
    same(i, np.int32([0, 0, 1]))
    same(j, np.int32([1, 2, 2]))
    a, b = RNG.normal(size=(2, 4, 3)).astype(np.float32), RNG.normal(size=(3,)).astype(
        np.float32)
    close(vnp.matvec(a, b), np.matvec(a, b))
    close(vnp.vecmat(a[..., 0], a), np.vecmat(a[..., 0], a))
    close(vnp.vecdot(a, b), np.vecdot(a, b))
    close(vnp.vecdot(a, a, axis=1), np.vecdot(a, a, axis=1))
    path, _ = vnp.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5)))
    assert path == np.einsum_path("ij,jk,kl->il", np.ones((2, 3)), np.ones((3, 4)),
                                  np.ones((4, 5)), optimize="greedy")[0]


def test_io_and_print_options():
    buf = io.BytesIO()
    vnp.save(buf, np.arange(3.0))
    buf.seek(0)
    got = vnp.load(buf)
    assert isinstance(got, vg.Array)
    same(got, np.arange(3, dtype=np.float32))
    same(vnp.frombuffer(np.arange(3, dtype=np.int32).tobytes(), dtype=np.int32),
         np.int32([0, 1, 2]))
    same(vnp.fromstring("1 2 3", dtype=np.float32, sep=" "), np.float32([1, 2, 3]))
    same(vnp.fromiter(range(4), np.int32), np.int32([0, 1, 2, 3]))
    same(vnp.copy([1.0, 2.0]), np.float32([1, 2]))
    with vnp.printoptions(precision=2):
        assert str(vnp.asarray([1.23456])) == "[1.23]"
    assert vnp.get_printoptions()["precision"] == 8 and vnp.set_printoptions is np.set_printoptions


def test_a_jitted_program_runs_on_vulkan():
    def f(x, c):
        return (vnp.unwrap(x * 3), vnp.ediff1d(x, to_end=x[:1]), vnp.compress(c, x, size=2),
                vnp.place(x, c, np.float32([5, 6]), inplace=False))
    x = np.float32([0.75, -3.5, 10.0, 1e-3])
    c = np.array([True, False, False, True])
    jitted = vg.jit(f, backend="vulkan")
    assert jitted.lower(x, c).fallback_reason is None      # whole on the device
    want = (np.unwrap(x * 3), np.ediff1d(x, to_end=x[:1]), x[c], np.float32([5, -3.5, 10, 6]))
    for got, w in zip(jitted(x, c), want):
        close(got, w)


def test_numpys_text_file_and_dlpack_helpers(tmp_path):
    """array_repr / array_str print the value as numpy does; fromfile reads numpy's raw file;
    from_dlpack takes any __dlpack__ object (a host array here) as a vkgrad array."""
    x = vnp.asarray(np.float32([1.5, -2.0]))
    assert vnp.array_repr(x) == np.array_repr(np.float32([1.5, -2.0]))
    assert vnp.array_str(x, precision=1) == np.array_str(np.float32([1.5, -2.0]), precision=1)
    path = tmp_path / "x.bin"
    np.arange(5, dtype=np.float32).tofile(path)
    got = vnp.fromfile(path, dtype=np.float32)
    assert isinstance(got, vg.Array)
    same(got, np.arange(5, dtype=np.float32))
    got = vnp.from_dlpack(np.arange(3, dtype=np.int32))
    assert isinstance(got, vg.Array)
    same(got, np.arange(3, dtype=np.int32))
    assert vg.lax.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert vg.lax.broadcast_like(np.float32([1, 2, 3]), np.zeros((2, 3))).shape == (2, 3)
