"""Golden-text tests of the IR: the printer, each pass (input text -> parse -> pass -> expected
text, xDSL's style), the parser, the verifier, the interpreter and the networkx view."""

from __future__ import annotations

import textwrap

import networkx as nx
import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.errors import IRError
from vkgrad import primitives as P
from vkgrad.transforms.autodiff import grad_program
from vkgrad.ir.core import Eqn, Literal, Params, Program, Var
from vkgrad.ir.graph import program_graph
from vkgrad.ir.interpreter import run_program
from vkgrad.ir.parser import parse_program
from vkgrad.passes import PASSES, cse, dce, fold_transposes, optimize, simplify
from vkgrad.ir.core import print_program
from vkgrad.ir.verifier import verify
from vkgrad.lowering.glsl import code_for_op

S = vg.ShapeDtype
ARGS = (S((8, 6)), S((4, 6)), S((4,)), S((8,), "i32"))


def loss(x, w, b, labels):
    h = vnp.tanh(x @ w.T + b)
    return vg.nn.cross_entropy(h, labels)


def golden(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


TRACED = golden("""
    program loss(%0: f32[8,6], %1: f32[4,6], %2: f32[4], %3: i32[8]) -> f32[] {
      %4: f32[6,4] = transpose[perm=(1,0)] %1
      %5: f32[8,4] = matmul %0, %4
      %6: f32[8,4] = add %5, %2
      %7: f32[8,4] = tanh %6
      %8: f32[8,4] = log_softmax[axis=1] %7
      %9: bool[8] = lt %3, 0:i32
      %10: i32[8] = add %3, 4:i32
      %11: i32[8] = select %9, %10, %3
      %12: i32[8,1] = reshape[shape=(8,1)] %11
      %13: i32[4] = iota[dimension=0, dtype=i32, shape=(4,)]
      %14: bool[8,4] = eq %12, %13
      %15: f32[8,4] = convert[dtype=f32] %14
      %16: f32[8,4] = mul %8, %15
      %17: bool[8] = lt %3, -4:i32
      %18: bool[8] = le 4:i32, %3
      %19: bool[8] = select %17, True:bool, %18
      %20: bool[8,1] = reshape[shape=(8,1)] %19
      %21: f32[8,1] = select %20, nan:f32, 0.0:f32
      %22: f32[8,4] = add %16, %21
      %23: f32[8] = reduce_sum[axes=(1,)] %22
      %24: f32[] = reduce_sum[axes=(0,)] %23
      %25: f32[] = mul %24, 0.125:f32
      %26: f32[] = neg %25
      return %26
    }
    """)

# The optimised joint program of d loss / d (w, b): `x @ w.T` is one matmul with
# transpose_b, the weight gradient one matmul with transpose_a (no transpose anywhere), the
# bias gradient a reduction (broadcast in the forward), relu-free tanh' = 1 - y*y.
GRAD = golden("""
    program loss(%0: f32[8,6], %1: f32[4,6], %2: f32[4], %3: i32[8]) -> (f32[], f32[4,6], f32[4]) {
      %4: f32[8,4] = matmul[transpose_b=True] %0, %1
      %5: f32[8,4] = add %4, %2
      %6: f32[8,4] = tanh %5
      %7: f32[8,4] = log_softmax[axis=1] %6
      %8: bool[8] = lt %3, 0:i32
      %9: i32[8] = add %3, 4:i32
      %10: i32[8] = select %8, %9, %3
      %11: i32[8,1] = reshape[shape=(8,1)] %10
      %12: i32[4] = iota[dimension=0, dtype=i32, shape=(4,)]
      %13: bool[8,4] = eq %11, %12
      %14: f32[8,4] = convert[dtype=f32] %13
      %15: f32[8,4] = mul %7, %14
      %16: bool[8] = lt %3, -4:i32
      %17: bool[8] = le 4:i32, %3
      %18: bool[8] = select %16, True:bool, %17
      %19: bool[8,1] = reshape[shape=(8,1)] %18
      %20: f32[8,1] = select %19, nan:f32, 0.0:f32
      %21: f32[8,4] = add %15, %20
      %22: f32[] = reduce_sum[axes=(0,1)] %21
      %23: f32[] = mul %22, 0.125:f32
      %24: f32[] = neg %23
      # ---- backward ----
      %25: f32[8,4] = mul -0.125:f32, %14
      %26: f32[8,4] = log_softmax_bwd[axis=1] %7, %25
      %27: f32[8,4] = mul %6, %6
      %28: f32[8,4] = neg %27
      %29: f32[8,4] = add 1.0:f32, %28
      %30: f32[8,4] = mul %26, %29
      %31: f32[4] = reduce_sum[axes=(0,)] %30
      %32: f32[4,6] = matmul[transpose_a=True] %30, %0
      return %24, %32, %31
    }
    """)


def test_printer_golden():
    assert str(vg.make_ir(loss)(*ARGS)) == TRACED


def test_grad_program_golden():
    joint = optimize(grad_program(vg.make_ir(loss)(*ARGS), [1, 2]))
    assert print_program(joint) == GRAD
    # the same program, reached through the public transform inside make_ir: value_and_grad
    # optimises its joint program and binds it, marker included, into make_ir's trace
    assert str(vg.make_ir(vg.value_and_grad(loss, argnums=(1, 2)))(*ARGS)) == GRAD


def test_source_comments_point_at_user_lines():
    text = print_program(vg.make_ir(loss)(*ARGS), source=True)
    first = loss.__code__.co_firstlineno
    assert "= transpose[perm=(1,0)] %1" in text
    for line in text.splitlines()[1:5]:   # transpose, matmul, add, tanh: `h = ...` line
        assert line.endswith(f"# tests/test_core_ir.py:{first + 1}"), line
    assert text.splitlines()[5].endswith(f"test_core_ir.py:{first + 2}")  # cross_entropy


def test_backward_eqns_carry_the_forward_source():
    joint = grad_program(vg.make_ir(loss)(*ARGS), [1])
    bwd = [e for e in joint.eqns if e.phase == "bwd"]
    assert bwd and all(e.source and "test_core_ir.py" in e.source for e in bwd)
    first = loss.__code__.co_firstlineno
    mm = [e for e in bwd if e.prim is P.matmul_p]
    assert mm and all(e.source.endswith(f":{first + 1}") for e in mm)


def run_pass(p, text):
    prog = parse_program(golden(text))
    out = p.apply(prog)
    verify(out)
    return print_program(out)


def test_dce_golden():
    assert run_pass(dce, """
        program f(%0: f32[3], %1: f32[3]) -> f32[3] {
          %2: f32[3] = add %0, %1
          %3: f32[3] = exp %2
          %4: f32[3] = mul %0, %0
          %5: f32[3] = log %4
          return %3
        }
        """) == golden("""
        program f(%0: f32[3], %1: f32[3]) -> f32[3] {
          %2: f32[3] = add %0, %1
          %3: f32[3] = exp %2
          return %3
        }
        """)


def test_cse_golden_with_commutative_operands():
    assert run_pass(cse, """
        program f(%0: f32[3], %1: f32[3]) -> f32[3] {
          %2: f32[3] = add %0, %1
          %3: f32[3] = add %1, %0
          %4: f32[3] = mul %2, %3
          %5: f32[3] = exp %0
          %6: f32[3] = exp %0
          %7: f32[3] = add %4, %5
          %8: f32[3] = add %7, %6
          %9: f32[3] = div %0, %1
          %10: f32[3] = div %1, %0
          %11: f32[3] = add %8, %9
          %12: f32[3] = add %11, %10
          return %12
        }
        """) == golden("""
        program f(%0: f32[3], %1: f32[3]) -> f32[3] {
          %2: f32[3] = add %0, %1
          %3: f32[3] = mul %2, %2
          %4: f32[3] = exp %0
          %5: f32[3] = add %3, %4
          %6: f32[3] = add %5, %4
          %7: f32[3] = div %0, %1
          %8: f32[3] = div %1, %0
          %9: f32[3] = add %6, %7
          %10: f32[3] = add %9, %8
          return %10
        }
        """)


SIMPLIFY_IN = """
    program f(%0: f32[2,3], %1: f32[3]) -> (f32[2,3], f32[3,2], f32[2,3]) {
      %2: f32[2,3] = mul %0, 1.0:f32
      %3: f32[2,3] = add 0.0:f32, %2
      %4: f32[2,3] = neg %3
      %5: f32[2,3] = neg %4
      %6: f32[6] = reshape[shape=(6,)] %5
      %7: f32[3,2] = reshape[shape=(3,2)] %6
      %8: f32[2,3] = transpose[perm=(1,0)] %7
      %9: f32[3,2] = transpose[perm=(1,0)] %8
      %10: f32[2,3] = pow %0, 2.0:f32
      %11: f32[] = mul 2.0:f32, 0.25:f32
      %12: f32[2,3] = mul %10, %11
      %13: f32[2,3] = stop_gradient %12
      %14: f32[2,3] = broadcast_to[shape=(2,3)] %1
      %15: f32[2,3] = broadcast_to[shape=(2,3)] 1.0:f32
      %16: f32[2,3] = mul %14, %15
      %17: f32[2,3] = add %13, %16
      %18: f32[2] = reduce_sum[axes=(1,)] %17
      %19: f32[] = reduce_sum[axes=(0,)] %18
      %20: f32[2,3] = select True:bool, %17, %5
      %21: f32[2,3] = mul %20, %19
      return %5, %9, %21
    }
    """


def test_simplify_golden():
    # x*1, 0+x, neg(neg x), reshape(reshape), transpose(transpose), x**2 -> x*x, constant
    # folding, stop_gradient removal, x*broadcast(1), implicit broadcast, reduce(reduce),
    # select(True, a, b).
    assert run_pass(simplify, SIMPLIFY_IN) == golden("""
        program f(%0: f32[2,3], %1: f32[3]) -> (f32[2,3], f32[3,2], f32[2,3]) {
          %2: f32[3,2] = reshape[shape=(3,2)] %0
          %3: f32[2,3] = mul %0, %0
          %4: f32[2,3] = mul %3, 0.5:f32
          %5: f32[2,3] = add %4, %1
          %6: f32[] = reduce_sum[axes=(0,1)] %5
          %7: f32[2,3] = mul %5, %6
          return %0, %2, %7
        }
        """)


def test_simplify_keeps_stop_gradient_when_asked():
    text = run_pass(simplify.without("stop_gradient"), SIMPLIFY_IN)
    assert "stop_gradient %4" in text


def test_simplify_rules_each_have_an_algebra_comment():
    import inspect

    from vkgrad.passes import simplify as mod
    src = inspect.getsource(inspect.getmodule(mod))
    body = src[src.index("RULES = ["):src.index("\n]\n")]
    rows = body.count("Rule(")
    comments = sum(1 for ln in body.splitlines() if ln.strip().startswith("# "))
    assert rows >= 20 and comments >= rows - 3   # list comprehensions share one comment


def test_fold_transposes_golden():
    assert run_pass(fold_transposes, """
        program f(%0: f32[3,4], %1: f32[5,4], %2: f32[2,4,3], %3: f32[2,4,5]) -> (f32[3,5], f32[2,3,5], f32[5,3], f32[4,5]) {
          %4: f32[4,5] = transpose[perm=(1,0)] %1
          %5: f32[3,5] = matmul %0, %4
          %6: f32[2,3,4] = transpose[perm=(0,2,1)] %2
          %7: f32[2,3,5] = matmul %6, %3
          %8: f32[3,5] = matmul[transpose_b=True] %0, %1
          %9: f32[5,3] = transpose[perm=(1,0)] %8
          return %5, %7, %9, %4
        }
        """) == golden("""
        program f(%0: f32[3,4], %1: f32[5,4], %2: f32[2,4,3], %3: f32[2,4,5]) -> (f32[3,5], f32[2,3,5], f32[5,3], f32[4,5]) {
          %4: f32[4,5] = transpose[perm=(1,0)] %1
          %5: f32[3,5] = matmul[transpose_b=True] %0, %1
          %6: f32[2,3,5] = matmul[transpose_a=True] %2, %3
          %7: f32[5,3] = matmul[transpose_b=True] %1, %0
          return %5, %6, %7, %4
        }
        """)


def test_user_a_at_b_T_is_one_matmul_after_folding():
    prog = optimize(vg.make_ir(lambda a, b: a @ b.T)(S((3, 4)), S((5, 4))))
    assert [e.prim.name for e in prog.eqns] == ["matmul"]
    assert dict(prog.eqns[0].params) == {"transpose_a": False, "transpose_b": True}


def test_passes_preserve_meaning():
    prog = parse_program(golden(SIMPLIFY_IN))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((2, 3)).astype(np.float32),
            rng.standard_normal(3).astype(np.float32)]
    want = run_program(prog, *args)
    for p in PASSES.values():
        for g, w in zip(run_program(p.apply(prog), *args), want):
            np.testing.assert_allclose(g, w, rtol=1e-6)
    assert prog.eqns[0].prim is P.mul_p          # passes never mutate their input


def test_parser_round_trip_of_literals_consts_and_markers():
    text = golden("""
        program g(%0: f64[2], %1: i32[2], %2: bool[]) -> (f64[2], i32[2], f64[2]) {
          %3: f64[2] = const [0.5, -1e-30]
          %4: f64[2] = add %0, %3
          %5: f64[2] = max %4, -inf:f64
          # ---- backward ----
          %6: i32[2] = mul %1, -3:i32
          %7: f64[2] = select %2, %5, 0.1:f64
          return %7, %6, %5
        }
        """)
    prog = parse_program(text)
    assert print_program(prog) == text
    assert [e.phase for e in prog.eqns] == ["fwd", "fwd", "bwd", "bwd"]
    out = run_program(prog, np.array([1.0, 2.0]), np.array([1, 2], np.int32), np.array(True))
    np.testing.assert_array_equal(out[1], [-3, -6])
    np.testing.assert_allclose(out[0], [1.5, 2.0])


def test_f32_literals_print_in_shortest_round_trip_form():
    prog = vg.make_ir(lambda x: x * 0.1 + 1e-8)(S((2,)))
    text = str(prog)
    assert "0.1:f32" in text and "1e-08:f32" in text
    assert print_program(parse_program(text)) == text


def test_large_consts_are_elided_and_need_the_array_to_parse():
    table = np.arange(40, dtype=np.float32).reshape(8, 5)
    prog = vg.make_ir(lambda i: vnp.take(table, i, axis=0))(np.array([1, 7]))
    text = str(prog)
    assert "%1: f32[8,5] = const ..." in text
    with pytest.raises(IRError, match="elided"):
        parse_program(text)
    back = parse_program(text, consts={"%1": table})
    np.testing.assert_array_equal(run_program(back, np.array([1, 7]))[0], table[[1, 7]])


@pytest.mark.parametrize("text, message", [
    ("program f(%0: f32[3]) -> f32[3] {\n  %1: f32[3] = exp %2\n  return %1\n}", "before"),
    ("program f(%0: f32[3]) -> f32[3] {\n  %1: f32[3] = frobnicate %0\n  return %1\n}",
     "unknown primitive"),
    ("program f(%0: f32[3]) -> f32[3] {\n  %0: f32[3] = exp %0\n  return %0\n}", "twice"),
    ("program f(%0: f32[3]) -> f32[3] {\n  %1: f32[3] = exp %0\n}", "no return"),
    ("program f(%0: q8[3]) -> f32[3] {\n  return %0\n}", "bad type"),
])
def test_parser_errors(text, message):
    with pytest.raises(IRError, match=message):
        parse_program(text)


def _prog(eqns, inputs, outputs):
    return Program("bad", inputs, outputs, eqns)


def test_verifier_rejects_ill_formed_programs():
    a, b = Var((3,), "f32"), Var((4,), "f32")
    out = Var((3,), "f32")
    with pytest.raises(IRError, match="shape rule rejects"):
        verify(_prog([Eqn(P.add_p, (a, b), Params(), (out,))], [a, b], [out]))
    wrong = Var((3,), "f64")
    with pytest.raises(IRError, match="shape rule gives f32"):
        verify(_prog([Eqn(P.exp_p, (a,), Params(), (wrong,))], [a], [wrong]))
    with pytest.raises(IRError, match="used before"):
        verify(_prog([Eqn(P.exp_p, (out,), Params(), (out,))], [a], [out]))
    with pytest.raises(IRError, match="defined twice"):
        verify(_prog([Eqn(P.exp_p, (a,), Params(), (a,))], [a], [a]))
    with pytest.raises(IRError, match="phase"):
        verify(_prog([Eqn(P.exp_p, (a,), Params(), (out,), phase="sideways")], [a], [out]))
    with pytest.raises(IRError, match="used before"):
        verify(_prog([], [a], [b]))
    with pytest.raises(IRError, match="do not fit"):
        verify(_prog([Eqn(P.exp_p, (a,), Params(axis=1), (out,))], [a], [out]))


def test_ir_objects_are_immutable_plain_data():
    v = Var((2, 3), "f32")
    with pytest.raises(AttributeError):
        v.shape = (3,)
    assert Literal(0.1, "f32") == Literal(0.1, "f32") and hash(Params(a=(1, 2))) == hash(
        Params(a=[1, 2]))
    prog = vg.make_ir(loss)(*ARGS)
    with pytest.raises(AttributeError):
        prog.eqns[0].prim = P.exp_p
    assert "id" not in repr(v) and repr(v) == "Var(f32[2,3])"


def test_interpreter_checks_its_inputs():
    prog = vg.make_ir(lambda x: x * 2)(S((3,)))
    with pytest.raises(IRError, match="takes 1 inputs"):
        run_program(prog)
    with pytest.raises(IRError, match="shape"):
        run_program(prog, np.zeros(4, np.float32))
    np.testing.assert_array_equal(run_program(prog, np.ones(3))[0], [2, 2, 2])


def test_program_graph_view():
    prog = vg.make_ir(loss)(*ARGS)
    g = program_graph(prog)
    assert isinstance(g, nx.DiGraph) and nx.is_directed_acyclic_graph(g)
    eqn_nodes = [n for n in g if n[0] == "eqn"]
    assert len(eqn_nodes) == len(prog.eqns)
    assert g.nodes[("eqn", 1)]["label"] == "matmul"
    assert g.edges[("input", 0), ("eqn", 1)] == {"value": "%0", "type": "f32[8,6]"}
    # program order is a topological order: every value flows to a later eqn
    assert all(u[1] < v[1] for u, v in g.edges if u[0] == v[0] == "eqn")
    assert nx.ancestors(g, ("output", 0)) >= {("input", 0), ("input", 1), ("input", 3)}
    assert ("eqn", len(prog.eqns) - 1) in g.predecessors(("output", 0))


def test_every_elementwise_primitive_has_a_glsl_template():
    from vkgrad.ir.core import PRIMITIVES
    ew = [p for p in PRIMITIVES.values() if p.elementwise and not p.name.endswith("_for_test")]
    assert len(ew) >= 20
    for p in ew:
        assert p in code_for_op and "{0}" in code_for_op[p], p
    assert code_for_op[P.select_p] == "({0} ? {1} : {2})"


def test_missing_glsl_names_the_primitive_and_the_stage():
    from vkgrad.errors import MissingRuleError
    from vkgrad.ir.core import Eqn, Primitive, Var
    from vkgrad.lowering import glsl
    p = Primitive("no_glsl_for_test", ("pure", "elementwise"))
    x = Var((3,), "f32")
    with pytest.raises(MissingRuleError) as e:
        glsl.expression(Eqn(p, (x,), {}, (Var((3,), "f32"),)), ["a"], "float", "fused kernel GLSL")
    assert "no_glsl_for_test" in str(e.value) and "fused kernel GLSL" in str(e.value)
