"""One table of JAX API calls with their inputs, for tests/test_jax_names.py: each row is an
expression over `jnp`, `nn`, `lax`, `random` and `jax` (vkgrad's modules under those names
in the test, JAX's in scripts/jax_reference.py, which wrote the expected values into
tests/golden/jax_names.json from JAX 0.10.2 on its CPU backend) and the names of its inputs.
Plain numpy only here: both sides import it."""

import numpy as np

INPUTS = {
    "edge": np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -2.0, 0.5, 3.0], np.float32),
    "mid": np.array([-2.5, -1.3, -0.3, 0.2, 0.7, 1.5, 4.0], np.float32),
    "pos": np.array([0.1, 0.5, 1.0, 2.0, 30.0], np.float32),
    "empty": np.zeros((0,), np.float32),
    "scalar": np.array(0.7, np.float32),
    "mat": np.array([[1.0, np.nan, 3.0, -1.0], [np.nan, np.nan, np.nan, np.nan],
                     [2.0, 5.0, -4.0, 0.5]], np.float32),
    "cube": np.array([-8.0, 27.0, 1e-30, 3e30, 0.3, 64.0], np.float32),
    "sign": np.array([-0.0, 0.0, -1.0, 2.0, np.inf, -np.inf], np.float32),
    "ints": np.array([3, -1, 0, 7], np.int32),
    "int3": np.arange(12, dtype=np.int32).reshape(3, 4),
    "t234": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    # for derivatives: a sigmoid's tail or a sum of squares of t234 cancels in float32
    "s234": (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11) / 8,
}

# elementwise activations: values on the edge values, 0-d and empty arrays; derivatives
# (vmap of grad) away from the kinks
_ACTIVATIONS = ["swish", "silu", "log_sigmoid", "selu", "celu", "hard_sigmoid", "hard_silu",
                "hard_swish", "mish", "soft_sign", "squareplus", "sparse_plus",
                "sparse_sigmoid", "tanh", "identity"]

CASES = {}
for _n in _ACTIVATIONS:
    CASES[f"nn.{_n}.edge"] = (f"nn.{_n}(a)", ["edge"])
    CASES[f"nn.{_n}.scalar"] = (f"nn.{_n}(a)", ["scalar"])
    CASES[f"nn.{_n}.empty"] = (f"nn.{_n}(a)", ["empty"])
    CASES[f"nn.{_n}.grad"] = (f"jax.vmap(jax.grad(nn.{_n}))(a)", ["mid"])
CASES.update({
    "nn.celu.alpha": ("nn.celu(a, 0.5)", ["mid"]),
    "nn.squareplus.b": ("nn.squareplus(a, 1.0)", ["mid"]),
    "nn.log1mexp.pos": ("nn.log1mexp(a)", ["pos"]),
    "nn.log1mexp.grad": ("jax.vmap(jax.grad(nn.log1mexp))(a)", ["pos"]),
    "nn.glu": ("nn.glu(a)", ["t234"]),
    "nn.glu.axis": ("nn.glu(a, axis=0)", ["t234"]),
    "nn.glu.grad": ("jax.grad(lambda x: nn.glu(x).sum())(a)", ["s234"]),
    "nn.logmeanexp": ("nn.logmeanexp(a)", ["mid"]),
    "nn.logmeanexp.axis": ("nn.logmeanexp(a, axis=1, keepdims=True)", ["t234"]),
    "nn.logmeanexp.where": ("nn.logmeanexp(a, where=a > 0)", ["mid"]),
    "nn.standardize": ("nn.standardize(a)", ["t234"]),
    "nn.standardize.stable": ("nn.standardize(a, axis=(0, 2), algorithm='stable')", ["t234"]),
    "nn.standardize.grad": ("jax.grad(lambda x: (nn.standardize(x, algorithm='stable') * x).sum())(a)",
                            ["s234"]),
    # initializers: JAX's draws wherever vg.random's uniform/normal/truncated_normal are JAX's
    "init.lecun_normal": ("nn.initializers.lecun_normal()(random.key(0), (3, 4))", []),
    "init.glorot_uniform": ("nn.initializers.glorot_uniform()(random.key(1), (2, 3, 5))", []),
    "init.he_normal": ("nn.initializers.he_normal(in_axis=0, out_axis=1)(random.key(2), (4, 6))",
                       []),
    "init.variance_scaling": ("nn.initializers.variance_scaling(0.5, 'fan_geo_avg', 'normal')"
                              "(random.key(3), (4, 2))", []),
    "init.normal": ("nn.initializers.normal(0.1)(random.key(4), (5,))", []),
    "init.uniform": ("nn.initializers.uniform(2.0)(random.key(5), (5,))", []),
    "init.truncated_normal": ("nn.initializers.truncated_normal(0.5)(random.key(6), (6,))", []),
    "init.constant": ("nn.initializers.constant(-3.0)(random.key(7), (2, 2))", []),
    "init.zeros": ("nn.initializers.zeros(random.key(7), (2,))", []),
    "init.ones": ("nn.initializers.ones(random.key(7), (2,))", []),
    # random
    "random.exponential": ("random.exponential(random.key(0), (6,))", []),
    "random.laplace": ("random.laplace(random.key(1), (6,))", []),
    "random.logistic": ("random.logistic(random.key(2), (6,))", []),
    "random.cauchy": ("random.cauchy(random.key(3), (6,))", []),
    "random.rademacher": ("random.rademacher(random.key(4), (8,))", []),
    "random.exponential.scalar": ("random.exponential(random.key(5))", []),
    "random.laplace.empty": ("random.laplace(random.key(5), (0,))", []),
    # jnp
    "jnp.cbrt": ("jnp.cbrt(a)", ["cube"]),
    "jnp.cbrt.edge": ("jnp.cbrt(a)", ["edge"]),
    "jnp.cbrt.grad": ("jax.vmap(jax.grad(jnp.cbrt))(a)", ["mid"]),
    "jnp.signbit": ("jnp.signbit(a)", ["sign"]),
    "jnp.signbit.int": ("jnp.signbit(a)", ["ints"]),
    "jnp.copysign": ("jnp.copysign(a, b)", ["edge", "edge"]),
    "jnp.copysign.zero": ("jnp.copysign(3.0, a)", ["sign"]),
    "jnp.copysign.grad": ("jax.vmap(jax.grad(jnp.copysign, (0, 1)))(a, -a)", ["mid"]),
    "jnp.heaviside": ("jnp.heaviside(a, 0.5)", ["edge"]),
    "jnp.float_power": ("jnp.float_power(a, 2)", ["ints"]),
    "jnp.pow": ("jnp.pow(a, 3)", ["ints"]),
    "jnp.hypot.edge": ("jnp.hypot(a, a[::-1])", ["edge"]),
    "jnp.hypot.grad0": ("jax.grad(jnp.hypot, (0, 1))(0.0, 0.0)", []),
    "jnp.nanargmax": ("jnp.nanargmax(a, axis=1)", ["mat"]),
    "jnp.nanargmin": ("jnp.nanargmin(a, axis=1, keepdims=True)", ["mat"]),
    "jnp.nanargmax.flat": ("jnp.nanargmax(a)", ["mat"]),
    "jnp.nanprod": ("jnp.nanprod(a, axis=1)", ["mat"]),
    "jnp.nanvar": ("jnp.nanvar(a, axis=1)", ["mat"]),
    "jnp.nanvar.ddof": ("jnp.nanvar(a, axis=0, ddof=1)", ["mat"]),
    "jnp.nanstd": ("jnp.nanstd(a, axis=1, keepdims=True)", ["mat"]),
    "jnp.nanstd.empty": ("jnp.nanstd(a)", ["empty"]),
    "jnp.nancumsum": ("jnp.nancumsum(a, axis=1)", ["mat"]),
    "jnp.nancumprod": ("jnp.nancumprod(a)", ["mat"]),
    "jnp.cumulative_sum": ("jnp.cumulative_sum(a, include_initial=True)", ["ints"]),
    "jnp.cumulative_sum.axis": ("jnp.cumulative_sum(a, axis=1)", ["int3"]),
    "jnp.cumulative_prod": ("jnp.cumulative_prod(a, axis=0, include_initial=True)", ["int3"]),
    "jnp.cumulative_sum.empty": ("jnp.cumulative_sum(a)", ["empty"]),
    "jnp.concat": ("jnp.concat([a, b], axis=1)", ["int3", "int3"]),
    "jnp.concat.none": ("jnp.concat([a, b], axis=None)", ["int3", "ints"]),
    "jnp.permute_dims": ("jnp.permute_dims(a, (2, 0, 1))", ["t234"]),
    "jnp.matrix_transpose": ("jnp.matrix_transpose(a)", ["t234"]),
    "jnp.unstack": ("jnp.unstack(a, axis=1)", ["int3"]),
    "jnp.tril_indices": ("jnp.tril_indices(3, 1, 4)", []),
    "jnp.triu_indices": ("jnp.triu_indices(4, -1)", []),
    "jnp.triu_indices_from": ("jnp.triu_indices_from(a)", ["int3"]),
    "jnp.diag_indices": ("jnp.diag_indices(3, 3)", []),
    "jnp.tril_indices.take": ("a[jnp.tril_indices(3, 0, 4)]", ["int3"]),
    # jax.Array's methods
    "Array.mT": ("jnp.asarray(a).mT", ["t234"]),
    "Array.real": ("jnp.asarray(a).real", ["edge"]),
    "Array.imag": ("jnp.asarray(a).imag", ["edge"]),
    "Array.conj": ("jnp.asarray(a).conj()", ["edge"]),
    "Array.ptp": ("jnp.asarray(a).ptp(axis=1)", ["int3"]),
    "Array.sort": ("jnp.asarray(a).sort(descending=True)", ["mid"]),
    "Array.sort.nan": ("jnp.asarray(a).sort()", ["edge"]),
    "Array.take": ("jnp.asarray(a).take(jnp.asarray([0, 5, -1]))", ["int3"]),
    "Array.nbytes": ("jnp.asarray(jnp.asarray(a).nbytes + 100 * jnp.asarray(a).itemsize)", ["t234"]),
    "jnp.dot.precision": ("jnp.dot(a, b.T, precision=lax.Precision.HIGHEST)", ["int3", "int3"]),
    "jnp.matmul.preferred": ("jnp.matmul(a, b.T, preferred_element_type=jnp.float32)",
                             ["int3", "int3"]),
    # signed zeros: JAX's max(-0, 0) is 0 and min(0, -0) is -0 in either order
    "jnp.maximum.zeros": ("jnp.maximum(a, -a)", ["sign"]),
    "jnp.maximum.zeros.flipped": ("jnp.maximum(-a, a)", ["sign"]),
    "jnp.minimum.zeros": ("jnp.minimum(a, -a)", ["sign"]),
    "jnp.minimum.zeros.flipped": ("jnp.minimum(-a, a)", ["sign"]),
    "jnp.maximum.nan": ("jnp.maximum(a, a[::-1])", ["edge"]),
    "jnp.minimum.nan": ("jnp.minimum(a, a[::-1])", ["edge"]),
    # where JAX raises, vkgrad raises an error of the same class (its own, naming the problem)
    "raises.nanargmax.empty": ("jnp.nanargmax(a)", ["empty"]),
    "raises.cumulative_sum.scalar": ("jnp.cumulative_sum(a)", ["scalar"]),
    "raises.unstack.scalar": ("jnp.unstack(a)", ["scalar"]),
    "raises.matrix_transpose.1d": ("jnp.matrix_transpose(a)", ["mid"]),
    "raises.standardize.scalar": ("nn.standardize(a)", ["scalar"]),
})
