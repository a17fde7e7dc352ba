"""A `Launch` says how to run one kernel, without a device: which shader, how to specialize it,
how many buffers it binds, its push constants and its workgroup count. Kernel planners are pure
functions from shapes and params to Launches, so they are tested without a GPU; the runtime
turns a Launch plus buffers into a dispatch (`Device.dispatch`, compiling and building the
pipeline once).

Also the helpers every planner shares: `cdiv`, and `grid` for workgroup counts above what one
dimension of a dispatch holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# maxComputeWorkGroupCount[0..2]: 65535 is what every Vulkan device guarantees.
MAX_GROUPS_X = 65535


@dataclass(frozen=True)
class Launch:
    name: str                       # shown in profiles: "matmul", "reduce_sum", "fused_3", ...
    shader: str                     # a file in vkgrad/kernels_glsl/ ("matmul.comp"), or GLSL source
    bindings: int                   # buffers bound, in the shader's binding order
    groups: tuple                   # workgroup count (x, y, z)
    push: tuple = ()                # push constants: ints -> int32/uint32 words, floats -> float32
    spec: tuple = ()                # specialization constants, constant_id 0, 1, ...
    defines: tuple = field(default=())  # (("NAME", value), ...) for glslang -D
    hooks: str = ""                 # generated loads/stores spliced into a hand-written shader
    base: str = ""                  # ... that shader's file (the `shader` is then the source)
    spirv_env: str = "vulkan1.1"    # the SPIR-V's Vulkan version (cooperative matrices: 1.3)

    @property
    def is_file(self) -> bool:
        return "\n" not in self.shader and self.shader.endswith(".comp")


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for non-negative integers."""
    return -(-a // b)


def grid(groups: int) -> tuple:
    """A workgroup count for `groups` groups in one flat index space: (groups, 1, 1) when it fits
    one dimension, else an (x, y) grid whose surplus groups the shader skips (it flattens
    gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x)."""
    if groups <= MAX_GROUPS_X:
        return (max(groups, 1), 1, 1)
    y = cdiv(groups, MAX_GROUPS_X)
    return (cdiv(groups, y), y, 1)
