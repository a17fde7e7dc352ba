"""bfloat16 in SPIR-V without a compiler that knows it.

glslang 13 (the newest on the package index) has no GL_EXT_bfloat16, yet a device with
VK_KHR_shader_bfloat16 (kp patch 0011 enables it) runs bfloat16 cooperative matrices on its
tensor cores. A kernel written with float16_t as its only 16-bit float type, and with no
arithmetic on it (loads, stores, conversions and cooperative-matrix products only: the
operations SPV_KHR_bfloat16 allows on bfloat16), is compiled as usual and then rewritten here:
the one `OpTypeFloat 16` gets SPV_KHR_bfloat16's encoding operand (BFloat16KHR), and the module
declares the extension and its capabilities. Bits stay bits: a value loaded as "float16" from
a buffer of bfloat16 data is now read as the bfloat16 it is.

A shader asks for this with the define VKG_BFLOAT16 (runtime/shaders.py calls `to_bfloat16` on
its SPIR-V, and puts REWRITE_VERSION in the cache key: a change here bumps it).
"""

from __future__ import annotations

import struct

# SPIR-V numbers (the unified SPIR-V headers; SPV_KHR_bfloat16)
OP_EXTENSION = 10
OP_CAPABILITY = 17
OP_TYPE_FLOAT = 22
CAPABILITY_BFLOAT16_TYPE = 5116
CAPABILITY_BFLOAT16_COOPERATIVE_MATRIX = 5118
FP_ENCODING_BFLOAT16 = 0
MAGIC = 0x07230203
REWRITE_VERSION = 1     # part of the cache key of every rewritten shader


class SpirvRewriteError(ValueError):
    pass


def instructions(words):
    """(offset, opcode, word count) of each instruction after the 5-word header."""
    at = 5
    while at < len(words):
        count, op = words[at] >> 16, words[at] & 0xFFFF
        if count == 0 or at + count > len(words):
            raise SpirvRewriteError(f"malformed SPIR-V: instruction at word {at} has length "
                                    f"{count}")
        yield at, op, count
        at += count


def _string_words(text: str) -> list:
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def to_bfloat16(spirv: bytes) -> bytes:
    """The module with its 16-bit float type made bfloat16 (see the module's docstring)."""
    if len(spirv) % 4 or len(spirv) < 20:
        raise SpirvRewriteError("not a SPIR-V module (length)")
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    if words[0] != MAGIC:
        raise SpirvRewriteError("not a little-endian SPIR-V module (magic number)")
    out = words[:5]
    halves = 0
    capabilities_end = None
    for at, op, count in instructions(words):
        inst = words[at:at + count]
        if op == OP_TYPE_FLOAT and count == 3 and inst[2] == 16:
            inst = [(4 << 16) | OP_TYPE_FLOAT, inst[1], 16, FP_ENCODING_BFLOAT16]
            halves += 1
        elif op == OP_TYPE_FLOAT and count == 4 and inst[2] == 16:
            raise SpirvRewriteError("the module already has a 16-bit float with an encoding")
        out += inst
        if op == OP_CAPABILITY:
            capabilities_end = len(out)
    if halves != 1:
        raise SpirvRewriteError(f"expected one 16-bit float type to make bfloat16, found "
                                f"{halves}")
    if capabilities_end is None:
        raise SpirvRewriteError("the module declares no capabilities")
    # capabilities first, then extensions (the module layout SPIR-V requires)
    added = [(2 << 16) | OP_CAPABILITY, CAPABILITY_BFLOAT16_TYPE,
             (2 << 16) | OP_CAPABILITY, CAPABILITY_BFLOAT16_COOPERATIVE_MATRIX]
    name = _string_words("SPV_KHR_bfloat16")
    added += [((1 + len(name)) << 16) | OP_EXTENSION, *name]
    out[capabilities_end:capabilities_end] = added
    return struct.pack(f"<{len(out)}I", *out)


def describe(spirv: bytes) -> dict:
    """What a test checks: the capabilities, extensions and 16-bit float types of a module."""
    words = list(struct.unpack(f"<{len(spirv) // 4}I", spirv))
    caps, exts, halves = [], [], []
    for at, op, count in instructions(words):
        if op == OP_CAPABILITY:
            caps.append(words[at + 1])
        elif op == OP_EXTENSION:
            raw = struct.pack(f"<{count - 1}I", *words[at + 1:at + count])
            exts.append(raw.split(b"\0")[0].decode())
        elif op == OP_TYPE_FLOAT and words[at + 2] == 16:
            halves.append(tuple(words[at + 3:at + count]))
    return {"capabilities": caps, "extensions": exts, "float16_encodings": halves}
