"""Write tests/golden/jax_names.json: JAX's value of every row of tests/jax_cases.py.

    JAX_PLATFORMS=cpu python scripts/jax_reference.py    # a Python with jax (0.10.2 here)
"""
import importlib.util
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax, nn, random

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("jax_cases", ROOT / "tests" / "jax_cases.py")
cases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cases)


def encode(v):
    if isinstance(v, (tuple, list)):
        return {"tuple": [encode(x) for x in v]}
    a = np.asarray(v)
    return {"dtype": str(a.dtype), "shape": list(a.shape),
            "values": [repr(float(x)) if a.dtype.kind == "f" else int(x) for x in a.ravel()],
            "signbit": np.signbit(a).ravel().tolist() if a.dtype.kind == "f" else None}


out = {}
ns = {"jnp": jnp, "nn": nn, "lax": lax, "random": random, "jax": jax}
for name, (src, inputs) in cases.CASES.items():
    fn = eval("lambda a=None, b=None: " + src, ns)
    try:
        out[name] = encode(fn(*[cases.INPUTS[i] for i in inputs]))
    except Exception as e:   # noqa: BLE001 - the error's type is the expected outcome
        # its builtin class (ConcretizationTypeError is a TypeError): vkgrad's errors are
        # its own classes, each derived from the builtin one JAX's derive from
        out[name] = {"error": next(c.__name__ for c in type(e).__mro__
                                   if c.__module__ == "builtins")}
(ROOT / "tests" / "golden" / "jax_names.json").write_text(json.dumps(out, indent=0) + "\n")
print(len(out), "cases")
