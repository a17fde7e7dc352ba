"""A diagnostic: vg.random.permutation on the device against the interpreter, step by step (the
keys, their argsort, the composed permutation), to find where a device disagrees."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import vkgrad as vg  # noqa: E402
import vkgrad.numpy as vnp  # noqa: E402
import vkgrad.random as R  # noqa: E402
from vkgrad import primitives as P  # noqa: E402
from vkgrad.random import _block, _shuffle_keys  # noqa: E402

key = R.key(0) if hasattr(R, "key") else R.PRNGKey(0)
for n in (100, 300):
    keys = lambda k: P.bits_to_unit(_block(k, (n,), 2, "permutation"))   # noqa: E731
    for name, f in [("keys", lambda k: keys(k)),
                    ("argsort", lambda k: vnp.argsort(keys(k))),
                    ("permutation", lambda k: R.permutation(k, n))]:
        g = np.asarray(vg.jit(f, backend="vulkan")(key))
        w = np.asarray(f(key))
        print(f"n={n} {name}: {np.mean(g == w):.3f} of elements agree", flush=True)
    for i, k in enumerate(_shuffle_keys(key, n)):
        g = np.asarray(vg.jit(lambda k: vnp.argsort(keys(k)), backend="vulkan")(np.asarray(k)))
        print(f"n={n} round {i} argsort: {np.mean(g == np.argsort(np.asarray(keys(k)), kind='stable')):.3f}")
