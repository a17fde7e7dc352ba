"""vg.checkpoint (vg.remat): JAX's jax.checkpoint. `vg.checkpoint(f, policy=...)` computes what
f computes; under reverse mode its intermediate values are recomputed in the backward instead of
kept from the forward, except those the policy saves. On any function, and on a scan's body.

    f = vg.checkpoint(block)                                     # save nothing: recompute all
    f = vg.checkpoint(block, policy=vg.checkpoint_policies.dots_saveable)   # keep matmuls
    y = vg.ad_checkpoint.checkpoint_name(x @ w, "proj")         # name a value ...
    f = vg.checkpoint(block, policy=vg.checkpoint_policies.save_only_these_names("proj"))

A policy is JAX's: a function (primitive, *operand types, **params) -> bool, asked of each eqn
of the traced function: True saves that eqn's results. The function is traced once into ONE
checkpoint eqn (vkgrad/primitives/control_flow.py) whose extra results are the saved values;
its VJP evaluates the body's VJP program in the backward. The fused stage inlines the forward
(passes/inline.py, inline_checkpoints) after the optimizer, so nothing merges the recomputation
with the forward again, and the save-or-recompute pass (passes/remat.py) sees the backward
reading only the inputs and the saved values: what it keeps is what the policy said.

On a scan's body: without a checkpoint the scan's VJP stacks every value a step's backward
reads (primitives/control_flow.py, the scan VJP); a checkpointed body is one checkpoint eqn,
so each step stacks only its operands (the carry entering it) and what the policy saves, and
its backward recomputes the rest.
"""

from __future__ import annotations

import functools

from vkgrad import primitives as P
from vkgrad.errors import ArgumentError
from vkgrad.primitives.control_flow import checkpoint_name_p, checkpoint_p, trace_closed
from vkgrad.tracer.core import abstract_leaf, bind, user_source
from vkgrad.tracer.pytree import tree_flatten, tree_unflatten
from vkgrad.transforms.tracing import check_function, fun_name, normalize_argnums


def checkpoint_name(x, name: str):
    """x, named `name` for a policy (jax.ad_checkpoint.checkpoint_name)."""
    if not isinstance(name, str):
        raise ArgumentError(f"checkpoint_name: the name must be a str, got {name!r}",
                            source=user_source())
    return bind(checkpoint_name_p, x, name=name)


class _Policies:
    """jax.checkpoint_policies: which eqns' results a checkpoint saves."""

    @staticmethod
    def nothing_saveable(prim, *types, **params) -> bool:
        return False

    @staticmethod
    def everything_saveable(prim, *types, **params) -> bool:
        return True

    @staticmethod
    def dots_saveable(prim, *types, **params) -> bool:
        return prim is P.matmul_p

    checkpoint_dots = dots_saveable

    @staticmethod
    def dots_with_no_batch_dims_saveable(prim, *types, **params) -> bool:
        return prim is P.matmul_p and all(len(t.shape) == 2 for t in types)

    checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable

    @staticmethod
    def save_only_these_names(*names):
        def policy(prim, *types, **params):
            return prim is checkpoint_name_p and params["name"] in names
        policy.__name__ = "save_only_these_names"   # printed as the eqn's policy
        return policy

    @staticmethod
    def save_any_names_but_these(*names):
        def policy(prim, *types, **params):
            return prim is checkpoint_name_p and params["name"] not in names
        policy.__name__ = "save_any_names_but_these"
        return policy


checkpoint_policies = _Policies()


def checkpoint(fun, *, prevent_cse: bool = True, policy=None, static_argnums=()):
    """jax.checkpoint(fun, prevent_cse=True, policy=None, static_argnums=()): fun, its
    intermediates recomputed in the backward except what `policy` saves (default: nothing)."""
    check_function(fun, "checkpoint")
    policy = checkpoint_policies.nothing_saveable if policy is None else policy
    if not callable(policy):
        raise ArgumentError(f"vg.checkpoint: policy must be a function (vg.checkpoint_policies."
                            f"dots_saveable, ...), got {policy!r}", source=user_source())
    name = fun_name(fun)

    @functools.wraps(fun)
    def checkpointed(*args):
        static = set(normalize_argnums(static_argnums, len(args), "static_argnums")) \
            if static_argnums != () else set()
        dyn = [a for i, a in enumerate(args) if i not in static]
        leaves, tree = tree_flatten(dyn)
        types = [abstract_leaf(x, f"an argument of vg.checkpoint({name})") for x in leaves]
        out_tree = []

        def body(*a):
            it = iter(tree_unflatten(tree, list(a)))
            out = fun(*[args[i] if i in static else next(it) for i in range(len(args))])
            ol, ot = tree_flatten(out)
            out_tree.append(ot)
            return ol

        prog, captured = trace_closed(body, types, f"checkpoint_{name}")
        n = len(types)
        prog = prog.replace(inputs=prog.inputs[n:] + prog.inputs[:n])
        outs = set(x for x in prog.outputs)
        saved = [o for e in prog.eqns if policy(e.prim, *[x.type for x in e.inputs], **e.params)
                 for o in e.outputs if o not in outs]
        prog = prog.replace(outputs=prog.outputs + tuple(saved))
        res = bind(checkpoint_p, *captured, *leaves, jaxpr=prog,
                   policy=_policy_name(policy), num_res=len(saved),
                   prevent_cse=bool(prevent_cse))
        return tree_unflatten(out_tree[0], list(res)[:len(res) - len(saved)])
    return checkpointed


def _policy_name(policy) -> str:
    """The policy as the eqn prints it (an identifier; which values it saved is num_res)."""
    name = getattr(policy, "__name__", "")
    return name if name.isidentifier() else "custom"


remat = checkpoint   # JAX's other name

__all__ = ["checkpoint", "remat", "checkpoint_policies", "checkpoint_name"]
