"""What the transforms say about their arguments: a non-function where a function is expected,
an integer input to grad, arguments grad passes through."""

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import ArgumentError


@pytest.mark.parametrize("name, call", [
    ("grad", lambda: vg.grad(3)), ("value_and_grad", lambda: vg.value_and_grad(3)),
    ("vjp", lambda: vg.vjp(3, np.float32(1.0))), ("vmap", lambda: vg.vmap(3)),
    ("jvp", lambda: vg.jvp(3, (1.0,), (1.0,))), ("make_ir", lambda: vg.make_ir(3)),
    ("check_grads", lambda: vg.check_grads(3, (1.0,)))])
def test_a_transform_of_a_non_function_says_so(name, call):
    with pytest.raises(ArgumentError, match=f"vg.{name} expects a function, got int 3"):
        call()


def test_grad_of_an_integer_input_blames_the_input():
    with pytest.raises(vg.GradError, match="argument 0: it holds i32\\[\\] values \\(an integer "
                       "input\\)"):
        vg.grad(lambda x: x * 2)(3)


def test_grad_passes_arguments_it_does_not_differentiate_through_as_they_are():
    """JAX's grad traces only args[argnums]: a function or a string beside them is passed as
    it is (JAX's custom-rules guide: `grad(app, 1)(lambda x: x ** 3, 3.)` with nondiff_argnums)."""
    from functools import partial

    @partial(vg.custom_vjp, nondiff_argnums=(0,))
    def app(f, x):
        return f(x)
    app.defvjp(lambda f, x: (app(f, x), x), lambda f, x, g: (5 * g,))
    assert float(vg.grad(app, 1)(lambda x: x ** 3, 3.0)) == 5.0
    v, g = vg.value_and_grad(lambda f, x, name: f(x) * len(name), 1)(vnp.sin, 0.0, "abc")
    assert float(v) == 0.0 and float(g) == 3.0
    with pytest.raises(ArgumentError, match="argument 0 of .* has type function"):
        vg.grad(lambda f: f(1.0))(vnp.sin)          # the differentiated one must be an array
