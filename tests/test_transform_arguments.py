"""What the transforms say about their arguments: a non-function where a function is expected,
an integer input to grad."""

import numpy as np
import pytest

import vkgrad as vg
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
