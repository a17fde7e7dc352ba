"""vkgrad's exceptions: one base class, a few subclasses, messages in the user's terms.

Every error vkgrad raises on purpose is a `VkgradError`. A message says what is wrong in the
user's words, then (when known) which primitive was involved, at which compiler stage, and the
file:line of the user's code that caused it:

    matmul of f32[3,4] by f32[5,6]: inner dimensions differ (4 vs 5)
      (primitive 'matmul', at model.py:12)

Subclasses also derive from the builtin exception a Python user would expect (`TypeError` for a
wrong type, `ValueError` for a wrong shape, `IndexError` for a bad index) so that existing
`except` clauses keep working; none of them is ever a bare builtin raised from inside vkgrad.
"""

from __future__ import annotations


class VkgradError(Exception):
    """Base class of every error vkgrad raises on purpose.

    `primitive` (a name), `stage` (e.g. "shape inference", "autodiff") and `source` (the user's
    "file:line") are optional context, filled in by whichever layer knows them first.
    """

    def __init__(self, message: str = "", *, primitive: str | None = None,
                 source: str | None = None, stage: str | None = None):
        super().__init__(message)
        self.message = message
        self.primitive = primitive
        self.source = source
        self.stage = stage

    def with_context(self, *, primitive=None, source=None, stage=None) -> "VkgradError":
        """Fill in context that is still missing (the innermost layer's context wins)."""
        if self.primitive is None and primitive is not None:
            self.primitive = getattr(primitive, "name", primitive)
        if self.source is None:
            self.source = source
        if self.stage is None:
            self.stage = stage
        return self

    def __str__(self) -> str:
        ctx = []
        if self.primitive:
            ctx.append(f"primitive '{self.primitive}'")
        if self.stage:
            ctx.append(f"during {self.stage}")
        if self.source:
            ctx.append(f"at {self.source}")
        return self.message + (f"\n  ({', '.join(ctx)})" if ctx else "")


class ShapeError(VkgradError, ValueError):
    """Operand shapes an operation cannot combine (broadcasting, matmul, reshape, axes)."""


class DTypeError(VkgradError, TypeError):
    """An unsupported dtype, or operands whose dtypes an operation cannot combine."""


class IntegerOverflowError(DTypeError, OverflowError):
    """An integer that int32 cannot hold, where vkgrad would otherwise have wrapped it."""


class VkgradIndexError(VkgradError, IndexError):
    """An index or axis out of range, or an indexing form vkgrad does not support."""


class ArgumentError(VkgradError, TypeError):
    """A bad argument to a transform: an unsupported type (str, object), bad argnums, a pytree
    of the wrong structure."""


class GradError(VkgradError, TypeError):
    """`grad` asked for something it cannot give: a non-scalar or non-float result, or the
    gradient with respect to an integer argument."""


class ConcretizationError(VkgradError, TypeError):
    """A traced value was used where Python needs a concrete one (`if x > 0:`, `float(x)`,
    `np.asarray(x)`); the message says what to use instead."""


class LeakedTracerError(VkgradError):
    """A traced value escaped the function being traced (stored in a global, say) and was used
    after that trace ended."""


class MissingRuleError(VkgradError, NotImplementedError):
    """A primitive lacks a rule a stage needs (shape, numpy implementation, VJP)."""


class IRError(VkgradError):
    """An ill-formed program (verifier, parser) or an internal rule that broke its contract."""


class GradientCheckError(VkgradError, AssertionError):
    """`check_grads` found a derivative that disagrees with finite differences."""


class CheckpointError(VkgradError, ValueError):
    """A checkpoint file that cannot be read (truncated, corrupt, not safetensors) or that does
    not hold what the caller expects (other names, shapes or dtypes); the message names the file
    and what is wrong."""
