"""Lowering: fused programs to launch descriptions, for a Target (docs/architecture.md).

Each hand-written kernel family's module registers its contract when it is imported
(contracts.py), so the package imports every module in it: a new family is one new module
here, with no list of families to edit.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
