"""The environment a test gives the processes it starts."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(**extra) -> dict:
    """This process's environment with this checkout first on PYTHONPATH; what PYTHONPATH
    already held stays after it (the GPU machine finds Kompute's `kp` through it)."""
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}
