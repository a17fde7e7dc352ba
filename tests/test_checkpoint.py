"""vg.save / vg.load: pytrees round-trip through safetensors files; the `safetensors` package
reads ours and we read its; broken files are CheckpointErrors naming the file and the problem."""

import errno
import json
import os
import stat
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vkgrad as vg
from vkgrad.errors import ArgumentError, CheckpointError

RNG = np.random.default_rng(3)
ROOT = Path(__file__).resolve().parent.parent


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
    assert all(isinstance(leaf, vg.Array) for leaf in _flat(back)[0])   # as every result
    t["scalar"] = np.float32(1.5)   # Python floats are stored as float32
    with vg.enable_x64():           # float64 data loads as float64 only with x64 on
        assert_same(vg.load(path), t)
    assert_same(back, {**t, "f64": t["f64"].astype(np.float32)})
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
    policy = {"a": np.int32, "d": np.float32}   # int64 and float64 data, as JAX's with x64 off
    for k in flat:
        assert isinstance(back[k], vg.Array) and back[k].dtype == policy.get(k, flat[k].dtype)
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


# ----------------------------------------------------------------------------- integrity

def _header(path) -> tuple[dict, int]:
    """(the header, the file offset where the tensor data begins)."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), 8 + n


def test_a_damaged_tensor_is_a_checkpoint_error_naming_it(tmp_path):
    path = tmp_path / "c.safetensors"
    t = {"w": np.arange(6, dtype=np.float32), "b": np.ones(3, np.float32)}
    vg.save(path, t, metadata={"step": "3"})
    header, data_at = _header(path)
    crcs = json.loads(header["__metadata__"]["vkgrad.crc32"])
    assert sorted(crcs) == ["b", "w"] and all(len(c) == 8 for c in crcs.values())
    assert vg.load_metadata(path) == {"step": "3"}          # vkgrad's own keys left out
    raw = bytearray(path.read_bytes())
    raw[data_at + header["w"]["data_offsets"][0] + 5] ^= 0x40   # one flipped bit in w's data
    path.write_bytes(bytes(raw))
    for kw in ({}, {"like": t}):
        with pytest.raises(CheckpointError) as e:
            vg.load(path, **kw)
        assert str(path) in str(e.value) and "tensor 'w' is corrupt" in str(e.value)
        assert "checksum" in str(e.value)


def test_a_checkpoint_without_checksums_still_loads(tmp_path):
    """Files written before the checksums (and by other writers) load, unchecked."""
    path = tmp_path / "old.safetensors"
    vg.save(path, {"w": np.arange(4, dtype=np.float32), "n": {"k": np.int32(2)}})
    header, data_at = _header(path)
    del header["__metadata__"]["vkgrad.crc32"]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    _write_raw(path, text, path.read_bytes()[data_at:])
    back = vg.load(path)
    assert back["w"].tolist() == [0, 1, 2, 3] and back["n"]["k"] == 2


def test_a_top_level_metadata_key_is_refused_at_save(tmp_path):
    path = tmp_path / "m.safetensors"
    with pytest.raises(ArgumentError, match="'__metadata__'.*collides"):
        vg.save(path, {"__metadata__": np.zeros(2), "w": np.ones(2)})
    assert not path.exists() and not list(tmp_path.iterdir())
    vg.save(path, {"__metadata__": {"a": np.ones(2, np.float32)}})   # nested: "__metadata__.a"
    assert vg.load(path)["__metadata__"]["a"].tolist() == [1, 1]


@pytest.mark.parametrize("err, words", [
    (OSError(errno.ENOSPC, "No space left on device"), "no space left on the device"),
    (OSError(errno.EROFS, "Read-only file system"), "read-only file system"),
    (PermissionError(errno.EACCES, "Permission denied"), "permission denied")])
def test_os_errors_at_save_are_one_line_checkpoint_errors(tmp_path, monkeypatch, err, words):
    path = tmp_path / "c.safetensors"
    vg.save(path, {"w": np.zeros(3, np.float32)})
    real_open = os.open

    def failing(*a, **k):
        raise err

    if err.errno == errno.ENOSPC:
        monkeypatch.setattr(os, "fsync", failing)       # the disk fills during the write
    else:
        monkeypatch.setattr(os, "open", failing)        # the folder takes no new file
    with pytest.raises(CheckpointError) as e:
        vg.save(path, {"w": np.ones(3, np.float32)})
    monkeypatch.setattr(os, "open", real_open)
    msg = str(e.value)
    assert msg.startswith(f"{path}: cannot write it: ") and words in msg and "\n" not in msg
    assert vg.load(path)["w"].tolist() == [0, 0, 0]    # the old checkpoint is intact
    assert [p.name for p in tmp_path.iterdir()] == ["c.safetensors"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_a_checkpoint_error(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(CheckpointError, match="permission denied"):
            vg.save(folder / "c.safetensors", {"w": np.zeros(2)})
    finally:
        folder.chmod(0o755)


def test_a_killed_writes_temporary_file_is_removed_at_the_next_save(tmp_path):
    """A save killed mid-write (SIGKILL: no cleanup runs) leaves its .tmp; the next save to
    that path removes it, and leaves alone the temporaries of live writers and other files."""
    path = tmp_path / "c.safetensors"
    code = ("import os, sys, time, numpy as np, vkgrad as vg\n"
            "os.fsync = lambda fd: (print('writing', flush=True), time.sleep(60))\n"
            f"vg.save({str(path)!r}, {{'w': np.zeros(1000, np.float32)}})\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "writing"
    finally:
        proc.kill()
        proc.wait()
    stale = [p.name for p in tmp_path.glob("c.safetensors.*.tmp")]
    assert len(stale) == 1 and stale[0].startswith(f"c.safetensors.{proc.pid}-")
    old_style = tmp_path / "c.safetensors.ab1cd_2e.tmp"       # tempfile.mkstemp's names
    live = tmp_path / f"c.safetensors.{os.getpid()}-0123abcd.tmp"
    other = tmp_path / "d.safetensors.1-0123abcd.tmp"
    for p in (old_style, live, other):
        p.write_bytes(b"x")
    vg.save(path, {"w": np.ones(2, np.float32)})
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["c.safetensors", live.name, other.name])
    assert vg.load(path)["w"].tolist() == [1, 1]


def test_saved_files_have_the_usual_mode(tmp_path):
    old = os.umask(0o022)
    try:
        vg.save(tmp_path / "c.safetensors", {"w": np.zeros(2, np.float32)})
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "c.safetensors").st_mode) == 0o644
