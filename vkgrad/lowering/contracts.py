"""Kernel contracts: what each hand-written kernel family computes and what it can take, stated
once, in the family's own lowering module, beside its planner (matmul.py, kernels.py,
attention.py, scan.py, sort.py). The lowering plans an eqn through its contract; the fusion
passes that give kernels generated loads and stores (lowering/fusion/) ask the contract which
operands and results may take them; nothing copies a family's constants.

A contract says:
    name, shader        the family and its .comp file (vkgrad/kernels_glsl/)
    primitives          the primitives it implements
    plan(e, target)     -> (OpPlan, {role: Var}): the dispatches for eqn `e` on `target`, and
                        which value plays each role of the plan (roles not in the map are
                        temporaries); raises Unsupported for what the kernel cannot run
    plan_group(anchors, target, root, body)
                        the same for a fused kernel whose body holds several anchors (sibling
                        reductions; a matmul and its column sum), or one anchor with fused
                        loads or stores (`body`: the fused kernel's body, for a family that
                        reads its operands' views in place: conv); None where the group is
                        not this family's
    fused_loads         {primitive: operand positions whose loads may run generated code}
                        (the shader's VKG_LOAD_Bn hooks, binding n = operand position)
    load_max_cost, load_max_full_inputs
                        a fused load runs once per use of the element: a kernel that reads
                        each operand element many times (matmul: once per tile of the other
                        operand) takes only chains this cheap (fusion/producers.py's units)
    fused_stores        primitives whose results may go through an epilogue (VKG_STORE_Bn)
    takes_hooks(e, target, loads)
                        whether this eqn, on this target, pays for generated stores (or, with
                        `loads`, loads): the family's cost policy
    column_sum          the kernel can also write the column sums of its B operand
                        (a bias gradient beside its weight gradient: matmul)
    siblings            how many operands of one shape one dispatch can take (reductions)
    dtypes              the element types it computes in (and target_dtypes(target): those
                        it takes on a target that has what they need; eqn_dtypes(e, target):
                        those it takes for one eqn, where that depends on the eqn's shapes)
    limits              its limits, in words (also raised as Unsupported with the numbers)

Adding a family: its shader, its lowering module (planner + contract, registered with
`register`), its tests (docs/architecture.md, "Adding a kernel family").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from vkgrad.errors import VkgradError


class Unsupported(VkgradError):
    """This program cannot run on the Vulkan kernels; `reason` says why in a few words, `eqn`
    (when known) is the eqn that could not be lowered (its `.source` is the user's line)."""

    def __init__(self, reason: str, eqn=None):
        super().__init__(reason)
        self.reason = reason
        self.eqn = eqn


class Concat(tuple):
    """A kernel result holding several values one after the other (C and its column sums)."""


class Each(tuple):
    """A kernel role that is one value per output of a multi-output reduction."""


class Members(Each):
    """A kernel role that is one value per member of a horizontal group, of any shapes: each
    loaded in its own index space (lowering/hooks.py, HookWriter.load_each)."""


def need_f32(e, *xs) -> None:
    for x in xs:
        if x.dtype != "f32":
            raise Unsupported(f"{e.prim.name} of {x.dtype} (the kernel computes in f32)")


def _always(e, target, loads=False) -> bool:
    return True


def _single(contract):
    """The default plan_group: one anchor, planned as on its own."""
    def plan_group(anchors, target, root, body=None):
        if len(anchors) == 1 and anchors[0].prim in contract.primitives:
            return contract.plan(anchors[0], target)
        return None
    return plan_group


@dataclass(frozen=True, eq=False)     # one object per family: compared and hashed by identity
class KernelContract:
    name: str
    shader: str
    primitives: tuple
    plan: Callable = field(repr=False)
    plan_group: Callable | None = field(default=None, repr=False)
    fused_loads: dict = field(default_factory=dict)
    load_max_cost: int | None = None
    load_max_full_inputs: int | None = None
    fused_stores: frozenset = frozenset()
    takes_hooks: Callable = field(default=_always, repr=False)
    column_sum: bool = False
    siblings: int = 1
    dtypes: tuple = ("f32",)
    # the element types it takes on a target beyond `dtypes` (matmul: f16 where the target
    # has cooperative matrices)
    target_dtypes: Callable = field(default=lambda target: (), repr=False)
    # the element types it takes for eqn e on a target, where shapes decide (attention); None:
    # dtypes_on(target)
    eqn_dtypes: Callable | None = field(default=None, repr=False)
    limits: str = ""

    def dtypes_on(self, target) -> tuple:
        return self.dtypes + tuple(self.target_dtypes(target))

    def dtypes_for(self, e, target) -> tuple:
        """The element types eqn `e` may have as it is on `target` (others widen_halves
        converts to f32 around it)."""
        return self.dtypes_on(target) if self.eqn_dtypes is None else self.eqn_dtypes(e, target)

    def group(self, anchors, target, root, body=None):
        return (self.plan_group or _single(self))(anchors, target, root, body)

    def loads(self, e, target) -> tuple:
        """Operand positions of `e` whose loads may run fused code on `target`."""
        ops = self.fused_loads.get(e.prim, ())
        return ops if ops and self.takes_hooks(e, target, loads=True) else ()

    def stores(self, e, target) -> bool:
        """May `e`'s results go through an epilogue on `target`?"""
        return e.prim in self.fused_stores and self.takes_hooks(e, target)


# primitive -> its family's contract, filled by each family's module as it is imported
CONTRACTS: dict = {}


def register(contract: KernelContract) -> KernelContract:
    for p in contract.primitives:
        if p in CONTRACTS:
            raise ValueError(f"primitive {p.name} has two kernel contracts: "
                             f"{CONTRACTS[p].name} and {contract.name}")
        CONTRACTS[p] = contract
    return contract
