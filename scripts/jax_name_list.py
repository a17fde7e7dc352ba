"""Write tests/golden/jax_public_names.json: the public names of JAX's user-facing modules
(jax, jax.numpy, jax.lax without its primitive objects, jax.nn, jax.random, jax.scipy.*, jax.tree,
jax.tree_util, ...), the list tests/test_jax_coverage.py holds vkgrad's names against.

    JAX_PLATFORMS=cpu python scripts/jax_name_list.py    # a Python with jax (0.10.2 here)
"""
import importlib
import json
import pathlib
import types

import jax

MODULES = ["jax", "jax.numpy", "jax.numpy.linalg", "jax.lax", "jax.nn", "jax.nn.initializers",
           "jax.random", "jax.tree", "jax.tree_util", "jax.scipy.special", "jax.scipy.linalg",
           "jax.scipy.signal", "jax.scipy.stats", "jax.scipy.integrate"]
ROOT = pathlib.Path(__file__).resolve().parent.parent


def public(module) -> list:
    names = [n for n in dir(module) if not n.startswith("_")]
    if module.__name__ == "jax.lax":      # the primitive objects (add_p ...) are JAX's internals
        names = [n for n in names if not n.endswith("_p")]
    return sorted(n for n in names if not isinstance(getattr(module, n), types.ModuleType))


out = {"jax_version": jax.__version__, "modules": {}}
for name in MODULES:
    module = importlib.import_module(name)
    out["modules"][name] = public(module)
    if name == "jax.scipy.stats":         # its distributions are modules of functions
        for sub in sorted(n for n in dir(module) if isinstance(getattr(module, n), types.ModuleType)
                          and not n.startswith("_")):
            out["modules"][f"{name}.{sub}"] = public(getattr(module, sub))
path = ROOT / "tests" / "golden" / "jax_public_names.json"
path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
print(f"wrote {path}: {sum(map(len, out['modules'].values()))} names in {len(out['modules'])} "
      "modules")
