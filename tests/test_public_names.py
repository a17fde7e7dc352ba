"""Names say what things are: kernel variants, lowered kernels, program inputs; and what
vkgrad exports (vg.devices, vg.StrictModeError)."""

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.lowering.matmul import VARIANTS


def test_names_say_what_things_are():
    assert "cpu" not in VARIANTS and "wide64" in VARIANTS
    f = vg.jit(lambda x: vg.grad(lambda x: vnp.sum(vnp.log_softmax(x, axis=-1)[:, 0]))(x),
               backend="vulkan")
    text = f.lower(np.ones((4, 5), np.float32)).as_text("lowered")
    assert "log_softmax_bwd" in text and "log_softmax_grad" not in text
    prog = vg.make_ir(lambda p, x: vnp.sum(x @ p["w"]))({"w": np.ones((3, 2), np.float32)},
                                                        np.ones((4, 3), np.float32))
    assert "# inputs: %0 p['w'], %1 x" in str(prog)


def test_devices_and_strict_mode_error_are_exported():
    devs = vg.devices()
    assert devs and devs[0].index == 0 and devs[0].name
    assert issubclass(vg.StrictModeError, vg.VkgradError)
    assert "devices" in vg.__all__ and "StrictModeError" in vg.__all__


def test_make_jaxpr_is_jax_name_for_the_traced_program():
    prog = vg.make_jaxpr(lambda x: vnp.sin(x) * 2.0)(np.ones(3, np.float32))
    assert isinstance(prog, vg.Program) and "sin" in str(prog) and "make_jaxpr" in vg.__all__
