"""The jitted call's fast lane (vkgrad/execution/fastpath.py): a repeated call skips the cache
key; any difference in structure, type or static value takes the general path and is right."""

import collections

import numpy as np
import pytest

import vkgrad as vg
import vkgrad.numpy as vnp
from vkgrad.execution import fastpath
from vkgrad.ir.core import TensorType
from vkgrad.tracer.pytree import tree_flatten

Pair = collections.namedtuple("Pair", "a b")


def fn(tree, x, scale):
    (p, q), d, nt = tree
    return {"sum": p + q * d["k"] + nt.a * scale, "pair": Pair(x * 2.0, None), "n": [x]}


def expected(tree, x, scale):
    (p, q), d, nt = tree
    return p + q * d["k"] + nt.a * scale, np.asarray(x) * 2.0


def args(n=4, key="k", dtype=np.float32):
    v = np.arange(n, dtype=dtype)
    return ((v, v + 1), {key: v * 3}, Pair(v, 1.0)), vg.device_put(np.ones(2, np.float32))


def check(out, tree, x, scale):
    s, x2 = expected(tree, x, scale)
    np.testing.assert_allclose(np.asarray(out["sum"]), s, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out["pair"].a), x2)
    assert out["pair"].b is None and isinstance(out["n"], list)


def test_repeated_calls_take_the_fast_lane_and_misses_stay_correct(monkeypatch):
    f = vg.jit(fn, static_argnums=2)
    slow = []
    general = f._compiled
    monkeypatch.setattr(f, "_compiled", lambda a, k: (slow.append(1), general(a, k))[1])
    tree, x = args()
    check(f(tree, x, 2.0), tree, x, 2.0)
    check(f(tree, x, 2.0), tree, x, 2.0)
    assert len(slow) == 1                                   # the second call hit the guard
    out = f(tree, x, 2.0)
    check(f(tree, out["pair"].a, 2.0), tree, out["pair"].a, 2.0)   # an Array of the same type
    assert len(slow) == 1
    variants = [(args(5), 2.0), (args(key="j"), 2.0), (args(dtype=np.int32), 2.0), (args(), 3.0)]
    for (t, xx), scale in variants:
        if "j" in t[1]:
            t = (t[0], {"k": t[1]["j"], "j": t[1]["j"]}, t[2])   # one more dict key
        n = len(slow)
        check(f(t, xx, scale), t, xx, scale)
        assert len(slow) == n + 1, "a different call must take the general path"
    assert f.compiles == 5


def test_scalars_of_another_type_miss():
    f = vg.jit(lambda a, s: a * s)
    a = vg.device_put(np.ones(3, np.float32))
    assert np.asarray(f(a, 2)).tolist() == [2.0] * 3
    assert np.asarray(f(a, 2.5)).tolist() == [2.5] * 3     # float, not int: another entry
    assert f.compiles == 2


def test_builder_rebuilds_every_container():
    tree = {"a": [1, (2, 3)], "b": Pair(4, None), "c": (5,)}
    leaves, td = tree_flatten(tree)
    assert fastpath.builder(td)(leaves) == tree
    a, b = TensorType((2, 3), "f32"), TensorType((2, 3), "f32")
    assert a is not b and fastpath.intern(a) is fastpath.intern(b)


def test_guard_misses_on_a_swapped_key_or_container_and_stays_correct(monkeypatch):
    """The guard takes a dict's values by one itemgetter and a tuple's by unpacking: a dict of
    the same size with another key, a list where a tuple was, a tuple of another length, a
    subclass of dict, each take the general path and compute right."""
    g = vg.jit(lambda t: sum(vg.tree_util.tree_leaves(t)))
    slow = []
    general = g._compiled
    monkeypatch.setattr(g, "_compiled", lambda a, k: (slow.append(1), general(a, k))[1])
    x = np.arange(3, dtype=np.float32)
    cases = [({"a": x}, x), ({"a": x + 1}, x), ({"b": x}, x), [{"a": x}, x], ({"a": x}, x, x),
             (collections.OrderedDict(a=x), x)]
    for case in cases:
        want = sum(np.asarray(v) for v in vg.tree_util.tree_leaves(case))
        assert np.asarray(g(case)).tolist() == want.tolist()
    assert len(slow) == len(cases) - 1   # only the second call, like the first, hit the guard


def _slot_writer():
    """kp's slot writers (kp patch 0014), once a device is open."""
    import pytest
    from vkgrad.runtime import get_device
    from vkgrad.tracer import array
    get_device()
    if array._slots[0] is None:
        pytest.skip("this kp build has no slot writers (kp patch 0014)")
    return array


def test_views_made_by_kp_are_the_arrays_array_init_makes():
    """A jitted call's result Arrays (array.views, through kp.new_slotted) hold what
    Array(aval, owned) holds, count their buffer's users the same way, and count a second view
    of one buffer (shares) as __init__ does."""
    array = _slot_writer()
    a, b = vg.device_put(np.arange(3, dtype=np.float32)), vg.device_put(np.ones(2, np.float32))
    oa, ob = a._owned, b._owned
    shares = array.shares[0]
    made = array.views([a.aval, b.aval, a.aval], [oa, ob, oa])
    assert [type(x) for x in made] == [vg.Array] * 3
    assert [(x._aval, x._owned, x._host, x._future, x._deleted) for x in made] == \
        [(a.aval, oa, None, None, False), (b.aval, ob, None, None, False),
         (a.aval, oa, None, None, False)]
    assert (oa.users, ob.users) == (3, 2)
    assert array.shares[0] == shares + 3   # each view made while another Array viewed it
    np.testing.assert_array_equal(np.asarray(made[2]), np.arange(3))
    del made
    assert (oa.users, ob.users) == (1, 1)


def test_delete_all_by_kp_deletes_each_array_once():
    """delete_all through kp's set_slots and add_to_slots: an Array listed twice is deleted
    once (its buffer's users drop by one), and reading it raises the deleted-Array error."""
    import pytest
    array = _slot_writer()
    a = vg.device_put(np.arange(3, dtype=np.float32))
    owned = a._owned
    (b,) = array.views([a.aval], [owned])
    array.delete_all(x for x in (b, b))
    assert owned.users == 1 and b.is_deleted() and b._owned is None
    with pytest.raises(vg.DeletedArrayError if hasattr(vg, "DeletedArrayError") else
                       array.DeletedArrayError, match="donated"):
        np.asarray(b)
    np.testing.assert_array_equal(np.asarray(a), np.arange(3))


def test_kp_slot_writers_refuse_what_is_not_a_slot():
    """kp.new_slotted writes only writable __slots__ entries."""
    import pytest
    array = _slot_writer()
    kp = array._slots[0]
    with pytest.raises(TypeError, match="not a writable __slots__ entry"):
        kp.new_slotted(vg.Array, 1, {}, {"aval": None})   # a property, not a slot
    with pytest.raises(ValueError, match="length"):
        kp.new_slotted(vg.Array, 2, {"_aval": [None]}, {})


def test_builder_keeps_keys_of_any_type_and_their_order():
    """Result dicts are built with literal keys where every key is a str or int, and from the
    tree's own keys otherwise (a tuple key, a float key, an empty tree, a single leaf)."""
    for tree in ({"b": 1, "a": {"y": 2, "x": [4]}}, {(3, 4): 5, (1, 2): 6}, {2.5: 1, 1: 2},
                 {3: 1, 1: 2}, {}, [], 8, {"it's": 1, "a\n\"b": (2, None)}):
        leaves, td = tree_flatten(tree)
        out = fastpath.builder(td)(leaves)
        assert out == tree and (not isinstance(tree, dict) or list(out) == sorted(tree))


def test_a_changed_environment_changes_the_fast_lanes_program(monkeypatch):
    """What a fast call reads of the environment (VKGRAD_DISABLE_PASSES, VKGRAD_BACKEND) is kept
    per value (jit.py, `_setting`): changing a variable between calls still takes its
    program, changing it back the first one again, and a bad value still raises."""
    monkeypatch.delenv("VKGRAD_DISABLE_PASSES", raising=False)
    f = vg.jit(lambda a: a * 2.0 + 1.0)
    a = vg.device_put(np.ones(3, np.float32))
    for _ in range(2):
        assert np.asarray(f(a)).tolist() == [3.0] * 3
    assert f.compiles == 1
    monkeypatch.setenv("VKGRAD_DISABLE_PASSES", "fuse")
    for _ in range(2):
        assert np.asarray(f(a)).tolist() == [3.0] * 3
    assert f.compiles == 2 and f.lower(a).options.disabled == {"fuse"}
    monkeypatch.delenv("VKGRAD_DISABLE_PASSES")
    assert np.asarray(f(a)).tolist() == [3.0] * 3 and f.compiles == 2
    monkeypatch.setenv("VKGRAD_BACKEND", "numpy")
    out = f(a)
    assert out.buffer is None and np.asarray(out).tolist() == [3.0] * 3 and f.compiles == 3
    monkeypatch.setenv("VKGRAD_DISABLE_PASSES", "no_such_pass")
    for _ in range(2):
        with pytest.raises(vg.VkgradError, match="no_such_pass"):
            f(a)


def test_results_of_every_kind_made_at_once():
    """A call's results made by one kp.new_slotted (fastpath.results): device results, small
    ones that come back as host data, a constant and a literal, in the outputs' order, each
    holding what Array(aval, ...) would; a device result's buffer counts its users."""
    f = vg.jit(lambda w: (w * 2.0, vnp.sum(w), np.float32(1.5) * np.ones(2, np.float32), 7.0,
                          w + 1.0), backend="vulkan")
    w = vg.device_put(np.arange(6000, dtype=np.float32))
    for _ in range(3):
        a, s, c, lit, b = f(w)
    runner = f.lower(w).runner
    assert runner.owned_results and runner.future_results and runner._values   # the cases
    np.testing.assert_allclose(np.asarray(a), np.arange(6000) * 2.0)
    np.testing.assert_allclose(float(s), np.arange(6000, dtype=np.float32).sum(), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(c), [1.5, 1.5])
    assert float(lit) == 7.0 and lit.shape == ()
    np.testing.assert_allclose(np.asarray(b), np.arange(6000) + 1.0)
    assert all(type(x) is vg.Array and not x.is_deleted() for x in (a, s, c, lit, b))
    assert a._owned is not None and a._owned.users == 1 and s._owned is None
    owned = b._owned
    b2 = vg.jit(lambda x: x, backend="vulkan")(b)   # a second view of b's buffer
    assert owned.users == 2
    del b2
    assert owned.users == 1
