"""vg.save / vg.load: pytrees round-trip through safetensors files; the `safetensors` package
reads ours and we read its; broken files are CheckpointErrors naming the file and the problem."""

import json
import os
import struct

import numpy as np
import pytest

import vkgrad as vg
from vkgrad.errors import ArgumentError, CheckpointError

RNG = np.random.default_rng(3)


def tree():
    return {"params": {"blocks": [{"w": RNG.standard_normal((3, 5)).astype(np.float32),
                                   "b": np.zeros(5, np.float32)} for _ in range(2)],
                       "emb": RNG.standard_normal((7, 3)).astype(np.float32)},
            "opt": vg.optim.adam(1e-3).init({"x": np.ones((2, 2), np.float32)}),
            "ids": np.arange(6, dtype=np.int32).reshape(2, 3),
            "mask": np.array([True, False]),
            "f64": np.linspace(0, 1, 4),
            "pair": (np.float32(2.5), None),
            "scalar": 1.5}


def assert_same(a, b):
    la, ta = _flat(a)
    lb, tb = _flat(b)
    assert ta == tb
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.shape == y.shape and x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


def _flat(t):
    from vkgrad.tracer.pytree import tree_flatten
    leaves, td = tree_flatten(t)
    return leaves, str(td)


def test_round_trip_keeps_structure_values_and_dtypes(tmp_path):
    t = tree()
    path = tmp_path / "t.safetensors"
    vg.save(path, t, metadata={"step": "7"})
    back = vg.load(path)
    t["scalar"] = np.float32(1.5)   # Python floats are stored as float32
    assert_same(back, t)
    assert type(back["opt"][0]).__name__ == "ScaleByAdamState" and back["opt"][0].count.shape == ()
    assert isinstance(back["pair"], tuple) and isinstance(back["params"]["blocks"], list)
    assert vg.load_metadata(path) == {"step": "7"}
    # like= gives the caller's own classes back
    again = vg.load(path, like=t)
    assert type(again["opt"][0]) is vg.optim.ScaleByAdamState
    assert not list(tmp_path.glob("*.tmp")), "the temporary file was left behind"


def test_device_arrays_save_and_a_bare_array(tmp_path):
    x = vg.device_put(np.arange(12, dtype=np.float32).reshape(3, 4))
    vg.save(tmp_path / "x.safetensors", x)
    np.testing.assert_array_equal(vg.load(tmp_path / "x.safetensors"), np.asarray(x))


def test_the_safetensors_package_reads_ours_and_we_read_its(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    t = tree()
    vg.save(tmp_path / "ours.safetensors", t)
    theirs = st.load_file(str(tmp_path / "ours.safetensors"))
    assert sorted(theirs) == sorted(["params.blocks.0.w", "params.blocks.0.b", "params.blocks.1.w",
                                     "params.blocks.1.b", "params.emb", "opt.0.count", "opt.0.mu.x",
                                     "opt.0.nu.x", "ids", "mask", "f64", "pair.0", "scalar"])
    np.testing.assert_array_equal(theirs["params.blocks.1.w"], t["params"]["blocks"][1]["w"])
    assert theirs["mask"].dtype == np.bool_ and theirs["ids"].dtype == np.int32

    flat = {"a": np.arange(5, dtype=np.int64), "b.c": np.ones((2, 3), np.float16),
            "d": np.array([[1.0, 2.0]], np.float64), "e": np.zeros((0, 4), np.float32)}
    st.save_file(flat, str(tmp_path / "theirs.safetensors"), metadata={"who": "them"})
    back = vg.load(tmp_path / "theirs.safetensors")   # no vkgrad structure: a flat dict
    assert sorted(back) == sorted(flat)
    for k in flat:
        assert back[k].dtype == flat[k].dtype
        np.testing.assert_array_equal(back[k], flat[k])
    assert vg.load_metadata(tmp_path / "theirs.safetensors") == {"who": "them"}


def test_like_names_every_mismatch(tmp_path):
    path = tmp_path / "m.safetensors"
    vg.save(path, {"w": np.zeros((4, 8), np.float32), "b": np.zeros(8, np.float32)})
    with pytest.raises(CheckpointError) as e:
        vg.load(path, like={"w": np.zeros((4, 16), np.float32), "c": np.zeros(8, np.float32)})
    msg = str(e.value)
    assert str(path) in msg and "missing c" in msg and "unexpected b" in msg
    assert "w: float32[4,8] in the file, float32[4,16] expected" in msg


def _write_raw(path, header: bytes, data: bytes = b""):
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)


@pytest.mark.parametrize("case", ["empty", "short", "huge_header", "not_json", "not_object",
                                  "bad_dtype", "bad_span", "truncated", "gap", "bad_tree"])
def test_broken_files_are_checkpoint_errors_naming_the_file(tmp_path, case):
    path = tmp_path / f"{case}.safetensors"
    good = tmp_path / "good.safetensors"
    vg.save(good, {"w": np.arange(6, dtype=np.float32), "v": np.ones(2, np.float32)})
    raw = good.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    if case == "empty":
        path.write_bytes(b"")
    elif case == "short":
        path.write_bytes(raw[:5])
    elif case == "huge_header":
        path.write_bytes(struct.pack("<Q", 10 ** 12) + raw[8:])
    elif case == "not_json":
        _write_raw(path, b"{not json" + b" " * 7)
    elif case == "not_object":
        _write_raw(path, b"[1, 2]  ")
    elif case == "bad_dtype":
        header["w"]["dtype"] = "F8_E4M3"
        _write_raw(path, json.dumps(header).encode(), raw[8 + n:])
    elif case == "bad_span":
        header["w"]["shape"] = [7]
        _write_raw(path, json.dumps(header).encode(), raw[8 + n:])
    elif case == "truncated":
        path.write_bytes(raw[:-3])
    elif case == "gap":
        header["w"]["data_offsets"] = [x + 4 for x in header["w"]["data_offsets"]]
        _write_raw(path, json.dumps(header).encode(), raw[8 + n:] + b"\0" * 4)
    elif case == "bad_tree":
        header["__metadata__"]["vkgrad.tree"] = '{"dict": {"w": "nope"}}'
        _write_raw(path, json.dumps(header).encode(), raw[8 + n:])
    with pytest.raises(CheckpointError) as e:
        vg.load(path)
    assert str(path) in str(e.value)
    assert vg.load(good)["w"].tolist() == list(range(6))


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(CheckpointError, match="cannot read"):
        vg.load(tmp_path / "nope.safetensors")
    with pytest.raises(ArgumentError, match="str to str"):
        vg.save(tmp_path / "x.safetensors", {"a": np.zeros(1)}, metadata={"step": 3})
    with pytest.raises(ArgumentError, match="both named 'a.b'"):
        vg.save(tmp_path / "x.safetensors", {"a.b": np.zeros(1), "a": {"b": np.zeros(1)}})
    assert not os.path.exists(tmp_path / "x.safetensors")


def test_an_interrupted_save_leaves_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "c.safetensors"
    vg.save(path, {"w": np.zeros(3, np.float32)})

    def interrupted(fd):   # Ctrl-C after the data is written, before the rename
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        vg.save(path, {"w": np.ones(3, np.float32)})
    assert vg.load(path)["w"].tolist() == [0, 0, 0]
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]
