"""A `Launch` says how to run one kernel, without a device: which shader, how to specialize it,
how many buffers it binds, its push constants and its workgroup count. Kernel planners are pure
functions from shapes and params to a Launch, so they are tested without a GPU; `dispatch` turns a
Launch plus buffers into a runtime Dispatch (compiling and building the pipeline once).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..runtime import Dispatch, compile_file, compile_glsl


@dataclass(frozen=True)
class Launch:
    name: str                       # shown in profiles: "matmul", "reduce_sum", "fused_3", ...
    shader: str                     # a file in vkgrad/kernels_glsl/ ("matmul.comp"), or GLSL source
    bindings: int                   # buffers bound, in the shader's binding order
    groups: tuple                   # workgroup count (x, y, z)
    push: tuple = ()                # push constants: ints -> int32/uint32 words, floats -> float32
    spec: tuple = ()                # specialization constants, constant_id 0, 1, ...
    defines: tuple = field(default=())  # (("NAME", value), ...) for glslang -D

    @property
    def is_file(self) -> bool:
        return "\n" not in self.shader and self.shader.endswith(".comp")


def kernel_of(device, launch: Launch):
    """The launch's pipeline on `device`: SPIR-V and pipeline are each built once and cached."""
    defines = dict(launch.defines)
    spirv = (compile_file(launch.shader, defines) if launch.is_file
             else compile_glsl(launch.shader, defines, name=launch.name))
    return device.kernel(spirv, bindings=launch.bindings, push_words=len(launch.push),
                         spec=launch.spec, name=launch.name)


def dispatch(device, launch: Launch, buffers) -> Dispatch:
    return Dispatch(kernel_of(device, launch), tuple(buffers),
                    tuple(int(g) for g in launch.groups), tuple(launch.push))
