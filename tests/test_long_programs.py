"""Long programs (issue 19): a chain of 10,000 dependent elementwise ops traces, prints, parses,
differentiates and runs on the interpreter, and a chain of 3,000 compiles and runs on Vulkan
(the fused kernel's source and the backward's recomputation were recursive walks that stopped
past Python's 1,000 frames). Every graph walk they go through is iterative."""

import numpy as np

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.ir.parser import parse_program


def chain(n):
    def f(x):
        for i in range(n):
            x = vnp.sin(x) if i % 2 else x * 1.0001
        return vnp.sum(x)
    return f


def reference(x, n):
    """f's value and gradient by hand, in float64: d sin(u) = cos(u), d (1.0001 u) = 1.0001."""
    x = x.astype(np.float64)
    grad = np.ones_like(x)
    for i in range(n):
        if i % 2:
            grad *= np.cos(x)
            x = np.sin(x)
        else:
            grad *= 1.0001
            x = x * 1.0001
    return x.sum(), grad


X = np.array([0.3, 0.7, 1.1, -0.4], np.float32)


def test_a_chain_of_10000_ops_traces_prints_and_parses():
    program = vg.make_ir(chain(10_000))(X)
    assert len(program.eqns) == 10_001
    text = str(program)
    assert text.count("\n") > 10_000
    assert str(parse_program(text)) == text


def test_a_chain_of_10000_ops_runs_and_differentiates_on_the_interpreter():
    f = chain(10_000)
    want, want_grad = reference(X, 10_000)
    np.testing.assert_allclose(float(f(X)), want, rtol=1e-4)
    value, grad = vg.value_and_grad(f)(X)
    np.testing.assert_allclose(float(value), want, rtol=1e-4)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=2e-3, atol=1e-6)


def test_a_chain_of_3000_ops_compiles_and_runs_on_vulkan():
    f = chain(3_000)
    want, want_grad = reference(X, 3_000)
    # 1,500 sines in float32 on the device's sin (Vulkan bounds its error by 2^-11 absolute):
    # lavapipe 1e-4 off, the H200 1.3e-3
    np.testing.assert_allclose(float(vg.jit(f, backend="vulkan")(X)), want, rtol=5e-3)
    grad = vg.jit(vg.grad(f), backend="vulkan")(X)
    # the gradient multiplies 1,500 device cosines too: the H200 3.3e-3 off
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-2, atol=1e-6)


def test_a_chain_of_3000_ops_after_a_matmul_lowers_to_one_epilogue():
    """The kernels' source of a matmul whose epilogue is 3,000 ops, and of its gradient (with
    the backward's recomputation), built without a device: the stages up to GLSL."""
    from vkgrad.pipeline import run_stages
    body = chain(3_000)
    f = lambda x, w: body(x @ w)
    x, w = np.full((4, 4), 0.1, np.float32), np.eye(4, dtype=np.float32)
    for program in (vg.make_ir(f)(x, w), vg.make_ir(vg.grad(f))(x, w)):
        glsl = run_stages(program, "glsl")["glsl"]
        assert glsl.count("sin(") >= 1_000


def test_kernel_bodies_are_ordered_without_recursion():
    """toposort of a 5,000-eqn chain given consumers first: producers before users."""
    from vkgrad.passes.fused_program import toposort
    eqns = list(vg.make_ir(chain(5_000))(X).eqns)
    assert toposort(eqns[::-1]) == eqns


def test_a_chain_of_10000_ops_compiles_as_kernels_of_bounded_depth_and_runs_on_vulkan():
    """No generated kernel computes a chain longer than MAX_FUSED_DEPTH ops: LLVM's compile time
    grows faster than the kernel (lavapipe: the 10,000-op chain as one kernel took 517 s to
    compile, cut every 1,000 ops 11 s on a loaded 2-core machine)."""
    from vkgrad.passes.fuse import MAX_FUSED_DEPTH
    from vkgrad.pipeline import run_stages
    from vkgrad.primitives.compiler import fused_p
    f = chain(10_000)
    fused = run_stages(vg.make_ir(f)(X), "fused")["fused"]
    bodies = [e.params["body"] for e in fused.eqns if e.prim is fused_p]
    assert len(bodies) >= 10_000 // MAX_FUSED_DEPTH
    assert all(len(b.eqns) <= MAX_FUSED_DEPTH + 1 for b in bodies)   # + the sum in the last
    want, _ = reference(X, 10_000)
    np.testing.assert_allclose(float(vg.jit(f, backend="vulkan")(X)), want, rtol=1e-2)
