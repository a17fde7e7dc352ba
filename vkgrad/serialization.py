"""vg.save / vg.load: pytrees of arrays in the safetensors format (the ecosystem's weight format).

    vg.save("ckpt.safetensors", {"params": params, "opt_state": opt_state},
            metadata={"step": "100"})
    tree = vg.load("ckpt.safetensors")                  # vg.Arrays, the saved structure
    tree = vg.load("ckpt.safetensors", like=template)   # checked against template's structure
    vg.load_metadata("ckpt.safetensors")                 # {"step": "100"}, without the data

The format (read and written here by hand, so the library needs no extra package; the tests
check that the `safetensors` package reads our files and that we read its files):

    8 bytes   N, the header's length, unsigned little-endian
    N bytes   JSON: {name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
                     "__metadata__": {str: str}}, padded with spaces to a multiple of 8
    the rest  every tensor's raw little-endian bytes, C order, back to back; offsets count from
              the end of the header and cover the rest exactly

How a pytree is stored: each leaf is one tensor, named by its key path joined with "."
(dict keys, list and tuple indices, namedtuple field names): {"params": {"blocks": [{"qkv":
{"w": ...}}]}} holds "params.blocks.0.qkv.w". Any safetensors reader sees those flat names. The
structure itself (which nodes are dicts, lists, tuples, namedtuples, None) is JSON in the
metadata key "vkgrad.tree": a leaf is its tensor name, a dict {"dict": {key: node}}, a list
{"list": [node, ...]}, a tuple {"tuple": [...]}, a namedtuple {"namedtuple": class name,
"fields": {field: node}}, None null. `load` rebuilds that structure (a namedtuple as a fresh
namedtuple class of the same name and fields; pass `like=` to get the caller's own classes); a
file without it (written by another program) loads as a flat {name: array} dict.

Each tensor's CRC-32 (of its bytes as stored) is JSON in the metadata key "vkgrad.crc32"
({name: "8 hex digits"}); `load` checks every tensor it reads against it, so a file damaged
after it was written is a CheckpointError naming the tensor. Files without that key (older
ones, other writers') load unchecked.

Leaves are anything numpy can read (vg.Array downloads, numpy arrays); Python scalars are stored
with vkgrad's dtypes (float -> F32, int -> I32). `save` is atomic: it writes a temporary file
beside `path` ("<name>.<pid>-<random>.tmp", created with the usual mode under the umask),
flushes it to disk, then renames it over `path`, so an interrupted save never leaves a torn
file; the temporary files of writes that were killed (their process is gone) are removed by the
next save to the same path. Every problem with a file is a CheckpointError naming the file and
what is wrong (a full disk, a read-only folder, a permission), never an exception from deep
inside json, numpy or the OS.
"""

from __future__ import annotations

import collections
import errno
import json
import math
import os
import re
import secrets
import struct
import zlib

import numpy as np

from vkgrad.dtypes import bfloat16
from vkgrad.errors import ArgumentError, CheckpointError
from vkgrad.tracer.core import user_source
from vkgrad.numpy.dtypes import asarray
from vkgrad.tracer.pytree import TreeDef, tree_flatten, tree_map, tree_unflatten

__all__ = ["save", "load", "load_metadata"]

# safetensors dtype names <-> numpy dtypes (little-endian; BF16 is ml_dtypes's bfloat16, read
# as its 16-bit words, vkgrad/dtypes.py).
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": bfloat16, "I64": "<i8",
           "I32": "<i4", "I16": "<i2", "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2",
           "U8": "u1", "BOOL": "?"}
_NAME_OF = {np.dtype(v): k for k, v in _DTYPES.items()}
TREE_KEY = "vkgrad.tree"
# zlib.crc32 checks 100 MB of float32 in 23 ms (this 2-core machine), against 55 ms for
# SHA-256 and 106 ms for BLAKE2b: enough to catch a damaged file, cheap beside the write.
CRC_KEY = "vkgrad.crc32"
# The safetensors package refuses headers over 100 MB; a length beyond that is a corrupt file.
MAX_HEADER = 100_000_000
ROOT_NAME = "value"   # the tensor name of a tree that is a single array


# ----------------------------------------------------------------------------------- writing

def save(path, tree, metadata: dict | None = None) -> None:
    """Write `tree` (a pytree of arrays) to `path` in the safetensors format, atomically.
    metadata: extra str -> str pairs for the header (read back by `load_metadata`)."""
    path = os.fspath(path)
    meta = dict(metadata or {})
    for k, v in meta.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ArgumentError(f"save({path!r}): metadata must map str to str (safetensors "
                                f"stores only strings), got {k!r}: {type(v).__name__}")
    for key in (TREE_KEY, CRC_KEY):
        if key in meta:
            raise ArgumentError(f"save({path!r}): metadata key {key!r} is vkgrad's own")
    leaves, treedef = tree_flatten(tree)
    named: list = []
    meta[TREE_KEY] = json.dumps(_encode(treedef, iter(leaves), (), named),
                                separators=(",", ":"))
    header, chunks, crcs = {}, [], {}
    # Widest dtype first, as the safetensors package orders them: with the header padded to 8
    # bytes, every tensor then starts at an offset its element size divides.
    arrays = [(name, np.require(_host(leaf, name), requirements="C")) for name, leaf in named]
    offset = 0
    for name, a in sorted(arrays, key=lambda na: -na[1].dtype.itemsize):
        header[name] = {"dtype": _NAME_OF[a.dtype], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        crcs[name] = f"{zlib.crc32(_bytes(a)):08x}"
        offset += a.nbytes
        chunks.append(a)
    meta[CRC_KEY] = json.dumps(crcs, separators=(",", ":"), sort_keys=True)
    header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    directory = os.path.dirname(os.path.abspath(path))
    _remove_stale_temporaries(path, directory)
    tmp = None
    try:
        fd, tmp = _create_temporary(path, directory)
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for a in chunks:
                f.write(_bytes(a))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise CheckpointError(f"{path}: cannot write it: {_os_reason(e, directory)}") \
                from None
        raise


def _bytes(a: np.ndarray) -> memoryview:
    """The raw bytes of a C-contiguous array (a 0-d or empty one included)."""
    return memoryview(a.reshape(-1)).cast("B")


def _create_temporary(path: str, directory: str) -> tuple[int, str]:
    """(fd, name) of a new temporary file beside `path`, named after this process so that a
    later save can tell a killed write's leftover from a write in progress. Opened with mode
    0666 under the umask, the mode any new file gets (tempfile.mkstemp's 0600 would leave the
    checkpoint readable by its owner only)."""
    base = os.path.join(directory, os.path.basename(path))
    for _ in range(100):
        tmp = f"{base}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", base)


def _remove_stale_temporaries(path: str, directory: str) -> None:
    """Remove `path`'s temporary files whose writing process is gone (killed mid-write): each
    would otherwise stay beside the checkpoint, as large as it, for good. A name without a
    process id is the older mkstemp form, also a leftover."""
    name = re.escape(os.path.basename(path))
    pattern = re.compile(rf"{name}\.(?:(\d+)-[0-9a-f]+|[A-Za-z0-9_]{{8}})\.tmp")
    try:
        entries = os.listdir(directory)
    except OSError:
        return   # the write below reports the folder's problem
    for entry in entries:
        m = pattern.fullmatch(entry)
        if m is None or (m.group(1) is not None and _alive(int(m.group(1)))):
            continue
        try:
            os.unlink(os.path.join(directory, entry))
        except OSError:
            pass   # gone already, or not ours to remove: the save goes on


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True    # this process: another thread's save may be writing it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True    # another user's live process
    return True


def _os_reason(e: OSError, directory: str) -> str:
    """An OSError in the words of someone saving a checkpoint."""
    if e.errno == errno.ENOSPC:
        return "no space left on the device (free some space, or save elsewhere)"
    if e.errno == errno.EDQUOT:
        return "the disk quota is exceeded"
    if e.errno == errno.EROFS:
        return f"the folder {directory} is on a read-only file system"
    if e.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied (cannot create files in {directory})"
    if e.errno == errno.ENOENT:
        return f"the folder {directory} does not exist"
    return e.strerror or str(e)


def _encode(td: TreeDef, leaves, path: tuple, named: list):
    """The structure JSON of `td`, appending (name, leaf) for each leaf in order."""
    if td.kind == "leaf":
        name = ".".join(path) if path else ROOT_NAME
        if name == "__metadata__":
            raise ArgumentError("save: a leaf named '__metadata__' (a top-level dict key) "
                                "collides with the safetensors header's metadata entry; "
                                "rename the key, or pass strings through metadata=",
                                source=user_source())
        if any(name == n for n, _ in named):
            raise ArgumentError(f"save: two leaves are both named {name!r} (a dict key with a "
                                "'.' in it collides with a nested path)")
        named.append((name, next(leaves)))
        return name
    if td.kind == "none":
        return None
    if td.kind in ("list", "tuple"):
        return {td.kind: [_encode(c, leaves, path + (str(i),), named)
                          for i, c in enumerate(td.children)]}
    if td.kind == "namedtuple":
        fields = td.meta._fields
        return {"namedtuple": td.meta.__name__,
                "fields": {f: _encode(c, leaves, path + (f,), named)
                           for f, c in zip(fields, td.children)}}
    bad = [k for k in td.meta if not isinstance(k, str)]
    if bad:
        raise ArgumentError(f"save: dict keys must be strings to name tensors, got {bad[0]!r} "
                            f"at {'.'.join(path) or 'the root'}")
    return {"dict": {k: _encode(c, leaves, path + (k,), named)
                     for k, c in zip(td.meta, td.children)}}


def _host(leaf, name: str) -> np.ndarray:
    if isinstance(leaf, bool):
        return np.asarray(leaf)
    if isinstance(leaf, int):
        return np.asarray(leaf, np.int32)
    if isinstance(leaf, float):
        return np.asarray(leaf, np.float32)
    a = np.asarray(leaf)
    if a.dtype.newbyteorder("<") in _NAME_OF:
        return a.astype(a.dtype.newbyteorder("<"), copy=False)
    raise ArgumentError(f"save: {name} has dtype {a.dtype}, which safetensors cannot hold")


# ----------------------------------------------------------------------------------- reading

def load(path, like=None):
    """The pytree saved at `path`, its leaves host-backed vg.Arrays (as every vkgrad result;
    by the dtype policy: int64 data is int32, float64 float32 unless x64 is on). With `like` (a pytree whose leaves have
    .shape and .dtype, e.g. freshly initialised params), the file must hold exactly like's
    names, shapes and dtypes, and the result has like's structure; a mismatch is a
    CheckpointError listing the differences."""
    path = os.fspath(path)
    header, data = _read(path)
    meta = header.pop("__metadata__", {})
    _verify(path, header, data, meta)
    arrays = {name: _tensor(path, name, info, data) for name, info in header.items()}
    if like is not None:
        return tree_map(asarray, _like(path, arrays, like))
    if TREE_KEY not in meta:
        return {name: asarray(a) for name, a in arrays.items()}
    try:
        structure = json.loads(meta[TREE_KEY])
        used: set = set()
        tree = _decode(structure, arrays, used)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{path}: the tree structure in its metadata is corrupt "
                              f"({type(e).__name__}: {e})") from None
    if used != set(arrays):
        raise CheckpointError(f"{path}: the tree structure in its metadata does not name every "
                              f"tensor (e.g. {sorted(set(arrays) - used)[:3]})")
    return tree_map(asarray, tree)


def load_metadata(path) -> dict:
    """The str -> str metadata saved with the tree (vkgrad's own structure key left out)."""
    path = os.fspath(path)
    header, _ = _read(path, header_only=True)
    meta = dict(header.get("__metadata__", {}))
    meta.pop(TREE_KEY, None)
    meta.pop(CRC_KEY, None)
    return meta


def _verify(path: str, header: dict, data: bytes, meta: dict) -> None:
    """Check each tensor's bytes against the CRC-32 saved with it (files without checksums,
    older ones and other writers', pass unchecked)."""
    if CRC_KEY not in meta:
        return
    try:
        crcs = json.loads(meta[CRC_KEY])
        if not isinstance(crcs, dict) or set(crcs) != set(header):
            raise ValueError("they do not name exactly the file's tensors")
        want = {name: int(c, 16) for name, c in crcs.items()}
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{path}: the checksums in its metadata are corrupt ({e})") \
            from None
    view = memoryview(data)
    for name, info in header.items():
        begin, end = info["data_offsets"]
        got = zlib.crc32(view[begin:end])
        if got != want[name]:
            raise CheckpointError(
                f"{path}: tensor {name!r} is corrupt: its bytes do not match the checksum "
                f"saved with it (CRC-32 {got:08x}, saved {want[name]:08x}); the file was "
                "damaged after it was written")


def _read(path: str, header_only: bool = False):
    """(header dict, data bytes) of a safetensors file, validated."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise CheckpointError(f"{path}: truncated or empty ({size} bytes): a safetensors "
                                      "file starts with an 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > min(MAX_HEADER, size - 8):
                raise CheckpointError(f"{path}: not a safetensors file, or truncated: its header "
                                      f"length says {n} bytes but {size - 8} follow")
            text = f.read(n)
            data = b"" if header_only else f.read()
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read it ({e.strerror or e})") from None
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{path}: corrupt header, not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt header, a JSON {type(header).__name__} where "
                              "an object of tensors belongs")
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{path}: corrupt header: __metadata__ must map str to str")
    spans = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        ok = (isinstance(info, dict) and isinstance(info.get("shape"), list)
              and all(type(d) is int and d >= 0 for d in info["shape"])
              and isinstance(info.get("data_offsets"), list) and len(info["data_offsets"]) == 2
              and all(type(o) is int for o in info["data_offsets"]))
        if not ok:
            raise CheckpointError(f"{path}: corrupt header entry for tensor {name!r}: {info!r}")
        if info.get("dtype") not in _DTYPES:
            raise CheckpointError(f"{path}: tensor {name!r} has dtype {info.get('dtype')!r}, "
                                  f"which vkgrad cannot read (it reads {', '.join(_DTYPES)})")
        begin, end = info["data_offsets"]
        itemsize = np.dtype(_DTYPES[info["dtype"]]).itemsize
        if end - begin != math.prod(info["shape"]) * itemsize:
            raise CheckpointError(f"{path}: corrupt header: tensor {name!r} of shape "
                                  f"{info['shape']} {info['dtype']} spans {end - begin} bytes")
        spans.append((begin, end, name))
    expected = size - 8 - n
    at = 0
    for begin, end, name in sorted(spans):
        if begin != at:
            raise CheckpointError(f"{path}: corrupt header: tensor {name!r} starts at byte "
                                  f"{begin} of the data, where {at} was expected")
        at = end
    if at != expected:
        what = "truncated" if at > expected else "corrupt"
        raise CheckpointError(f"{path}: {what}: its header describes {at} bytes of tensor data "
                              f"but the file holds {expected}")
    return header, data


def _tensor(path: str, name: str, info: dict, data: bytes) -> np.ndarray:
    begin, end = info["data_offsets"]
    if info["dtype"] == "BF16":
        bits = np.frombuffer(data, "<u2", (end - begin) // 2, begin).astype("=u2")
        return bits.view(bfloat16).reshape(info["shape"])
    a = np.frombuffer(data, _DTYPES[info["dtype"]], math.prod(info["shape"]), begin)
    return a.astype(a.dtype.newbyteorder("="), copy=True).reshape(info["shape"])


def _decode(node, arrays: dict, used: set):
    if node is None:
        return None
    if isinstance(node, str):
        used.add(node)
        return arrays[node]
    if "dict" in node:
        return {k: _decode(v, arrays, used) for k, v in node["dict"].items()}
    if "list" in node:
        return [_decode(v, arrays, used) for v in node["list"]]
    if "tuple" in node:
        return tuple(_decode(v, arrays, used) for v in node["tuple"])
    fields = node["fields"]
    cls = collections.namedtuple(node["namedtuple"], list(fields))
    return cls(*(_decode(v, arrays, used) for v in fields.values()))


def _like(path: str, arrays: dict, like):
    leaves, treedef = tree_flatten(like)
    named: list = []
    _encode(treedef, iter(leaves), (), named)
    want = {name: leaf for name, leaf in named}
    problems = []
    missing = [n for n in want if n not in arrays]
    extra = [n for n in arrays if n not in want]
    if missing:
        problems.append(f"missing {_some(missing)}")
    if extra:
        problems.append(f"unexpected {_some(extra)}")
    for name, leaf in named:
        if name in arrays:
            got = arrays[name]
            shape, dtype = ((), _host(leaf, name).dtype) if isinstance(leaf, (bool, int, float)) \
                else (tuple(leaf.shape), np.dtype(leaf.dtype))
            if got.shape != shape or got.dtype != dtype:
                problems.append(f"{name}: {_type(got.shape, got.dtype)} in the file, "
                                f"{_type(shape, dtype)} expected")
    if problems:
        shown = problems[:6] + ([f"... {len(problems) - 6} more"] if len(problems) > 6 else [])
        raise CheckpointError(f"{path} does not hold the expected tree:\n  " + "\n  ".join(shown))
    return tree_unflatten(treedef, [arrays[n] for n, _ in named])


def _some(names: list) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _type(shape, dtype) -> str:
    return f"{np.dtype(dtype).name}[{','.join(map(str, shape))}]"
