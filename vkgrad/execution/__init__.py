"""The execution layer: what runs programs for users, one small module per job.

    jit.py         vg.jit: the cache of compiled programs, keyed by argument types
    compiled.py    Compiled: a program's stages and its runner; backend choice and fallbacks
    array.py       vg.Array, and `call` (a compiled program on Arrays -> Arrays)
    eager.py       vnp operations and whole programs on device Arrays, outside any trace
    device_put.py  vg.device_put
    profile.py     vg.profile: per-kernel GPU time
"""
