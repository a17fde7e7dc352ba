"""Shared test set-up: import vkgrad from this checkout, verify every program vkgrad produces,
and keep hypothesis runs small and deterministic (the core suite must stay fast)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# The suite runs on Vulkan (lavapipe on CI machines), where vkgrad's own default would pick the
# numpy interpreter (vkgrad/execution/compiled.py: default_backend); tests of that default
# remove this with monkeypatch.
os.environ.setdefault("VKGRAD_BACKEND", "vulkan")

import vkgrad.ir.verifier as _verifier  # noqa: E402

# Every trace, autodiff result and pass output is run through the verifier (verifier.checked).
_verifier.VERIFY_ALL = True

try:
    from hypothesis import settings

    settings.register_profile("vkgrad", max_examples=30, deadline=None, derandomize=True,
                              print_blob=True)
    settings.load_profile("vkgrad")
except ImportError:  # pragma: no cover
    pass


import pytest  # noqa: E402

import vkgrad as _vg  # noqa: E402


@pytest.fixture
def x64():
    """float64 computed in float64 (vg.config's x64 on, in this thread) for the test: JAX's
    policy truncates float64 data to float32 otherwise."""
    with _vg.enable_x64(True):
        yield
