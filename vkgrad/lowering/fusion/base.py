"""What the passes that give hand-written kernels generated loads and stores share: a pass that
plans for a Target and asks each anchor's kernel contract (lowering/contracts.py) what it may
take there.
"""

from __future__ import annotations

from vkgrad.lowering.contracts import CONTRACTS
from vkgrad.passes.base import TargetPass

# An epilogue runs once per result element in the kernel's store; more than a few extra
# full-size reads or writes there (an optimizer update: 3 and 3) is a kernel of its own.
EPILOGUE_MAX_EXTRA_INPUTS = 2
EPILOGUE_MAX_OUTPUTS = 3


class HookFusion(TargetPass):
    """A pass that gives kernels generated loads or stores, for `target` (None: the generic
    Target). `for_target` gives the same pass for another device."""

    def contract(self, e):
        return CONTRACTS.get(e.prim)

    def loads(self, e) -> tuple:
        """Operand positions of kernel eqn `e` whose loads may run fused code."""
        c = self.contract(e)
        return c.loads(e, self.target) if c is not None else ()

    def stores(self, e) -> bool:
        """May kernel eqn `e`'s results go through an epilogue?"""
        c = self.contract(e)
        return c is not None and c.stores(e, self.target)
