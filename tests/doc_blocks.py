"""The code blocks of README.md and docs/*.md, run as a reader would paste them, and compared
with the output the page shows.

A page's ```python blocks run in order in ONE namespace (one session, pasted one after another),
in a child process started at the repository root with child_env(), so `from examples import
...` works as it does in a session started there. What a block prints is compared with the
block right after it (a bare ``` block with no prose in between), if there is one: numbers to a
tolerance, dict literals (a `stats()` line) key by key, everything else as text (runs of spaces
count as one). A bare block whose first line is `$ python -m vkgrad dump ...` is a command and
its output: the command runs and its output is compared the same way.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass

from child_env import ROOT, child_env

_FENCE = re.compile(r"^```([A-Za-z]*)\n(.*?)^```\n", re.S | re.M)
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_MARK = "\x1e-- vkgrad doc block --\x1e"


@dataclass
class Block:
    lang: str           # "python", or "" for a bare block
    text: str
    line: int           # the line of its opening fence, 1-based
    output: str | None  # the bare block right after it, if any


def blocks(path: str) -> list[Block]:
    """The fenced blocks of the Markdown file at `path` (relative to the repository root)."""
    src = open(os.path.join(ROOT, path)).read()
    found = [(m.group(1), m.group(2), src.count("\n", 0, m.start()) + 1, m.start(), m.end())
             for m in _FENCE.finditer(src)]
    out = []
    for i, (lang, text, line, _, end) in enumerate(found):
        nxt = found[i + 1] if i + 1 < len(found) else None
        right_after = nxt is not None and nxt[0] == "" and src[end:nxt[3]].strip() == ""
        out.append(Block(lang, text, line, nxt[1] if right_after else None))
    return out


_RUNNER = f"""
import sys, json, traceback
blocks = json.load(sys.stdin)
scope = {{"__name__": "__main__"}}
for name, code in blocks:
    sys.stdout.write({_MARK!r} + "\\n")
    sys.stdout.flush()
    try:
        exec(compile(code, name, "exec"), scope)
    except BaseException:
        sys.stdout.flush()
        traceback.print_exc()
        sys.stderr.write("failed in " + name + "\\n")
        sys.exit(1)
    sys.stdout.flush()
"""


def run_python_blocks(path: str, env: dict, timeout: int = 600) -> list[tuple[Block, str]]:
    """Every python block of `path`, run in one namespace; (block, what it printed) each.
    Fails the test, with the traceback, if a block raises."""
    py = [b for b in blocks(path) if b.lang == "python"]
    code = [(f"{path}:{b.line}", b.text) for b in py]
    r = subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(code),
                       capture_output=True, text=True, cwd=ROOT, env=child_env(**env),
                       timeout=timeout)
    assert r.returncode == 0, f"{path}: a block failed as pasted:\n{r.stderr[-4000:]}"
    printed = r.stdout.split(_MARK + "\n")[1:]
    assert len(printed) == len(py), r.stdout[-2000:]
    return list(zip(py, printed))


def dump_commands(path: str) -> list[tuple[Block, list[str], str]]:
    """The bare blocks of `path` that are a `python -m vkgrad dump` command and its output:
    (block, argv, the output shown)."""
    found = []
    for b in blocks(path):
        first, _, rest = b.text.partition("\n")
        if b.lang == "" and first.startswith("$ python -m vkgrad dump "):
            found.append((b, [sys.executable] + shlex.split(first[2:])[1:], rest))
    return found


def run_command(argv: list[str], env: dict, timeout: int = 300) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=child_env(**env),
                       timeout=timeout)
    assert r.returncode == 0, r.stderr
    return r.stdout


def _close(a: float, b: float, rtol: float, atol: float) -> bool:
    return a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= atol + rtol * abs(b))


def _same_value(got, want, rtol, atol) -> bool:
    if isinstance(want, dict):
        return isinstance(got, dict) and got.keys() == want.keys() and all(
            _same_value(got[k], want[k], rtol, atol) for k in want)
    if isinstance(want, (list, tuple)):
        return type(got) is type(want) and len(got) == len(want) and all(
            _same_value(g, w, rtol, atol) for g, w in zip(got, want))
    if isinstance(want, (int, float)) and not isinstance(want, bool) and \
            isinstance(got, (int, float)) and not isinstance(got, bool):
        return _close(float(got), float(want), rtol, atol)
    return got == want


def _literal(line: str):
    s = line.strip()
    if not s.startswith("{"):
        return None
    try:
        v = ast.literal_eval(s)
    except (ValueError, SyntaxError):
        return None
    return v if isinstance(v, dict) else None


def mismatches(got: str, want: str, rtol: float = 1e-4, atol: float = 1e-6,
               ignore_keys=frozenset()) -> list[str]:
    """How `got` differs from `want`, line by line (empty when they agree): numbers within
    rtol/atol, dicts key by key (same keys; values as numbers or exactly; `ignore_keys` not
    compared), other text exactly up to runs of spaces."""
    g, w = got.rstrip("\n").split("\n"), want.rstrip("\n").split("\n")
    if len(g) != len(w):
        return [f"{len(g)} lines printed, {len(w)} shown:\n{got}"]
    bad = []
    for i, (gl, wl) in enumerate(zip(g, w)):
        gd, wd = _literal(gl), _literal(wl)
        if wd is not None and ignore_keys:
            wd = {k: v for k, v in wd.items() if k not in ignore_keys}
            gd = gd if gd is None else {k: v for k, v in gd.items() if k not in ignore_keys}
        if wd is not None:
            if gd is None or not _same_value(gd, wd, rtol, atol):
                diff = sorted(k for k in set(wd) | set(gd or {})
                              if not _same_value((gd or {}).get(k), wd.get(k), rtol, atol))
                bad.append(f"line {i + 1}: keys {diff} differ:\n  printed {gl}\n  shown   {wl}")
            continue
        gt, wt = _NUMBER.split(gl), _NUMBER.split(wl)
        gn, wn = _NUMBER.findall(gl), _NUMBER.findall(wl)
        same_text = [" ".join(t.split()) for t in gt] == [" ".join(t.split()) for t in wt]
        if not same_text or len(gn) != len(wn) or not all(
                _close(float(a), float(b), rtol, atol) for a, b in zip(gn, wn)):
            bad.append(f"line {i + 1}:\n  printed {gl}\n  shown   {wl}")
    return bad


_PATH = re.compile(r"(?<![\w/.<-])(?:docs|examples|vkgrad|tests|bench|scripts|third_party)/"
                   r"[\w/.-]*\.(?:md|py|comp|sh|patch|toml|json)\b")


def missing_paths(path: str) -> list[str]:
    """Repository paths the page names in its text (docs/jit.md, vkgrad/random.py, ...) that
    do not exist (from the repository root, or from the page's folder)."""
    src = open(os.path.join(ROOT, path)).read()
    here = os.path.dirname(os.path.join(ROOT, path))
    return sorted({p for p in _PATH.findall(src) if not os.path.exists(os.path.join(ROOT, p))
                   and not os.path.exists(os.path.join(here, p))})


def relative_links(path: str) -> list[tuple[str, str]]:
    """(link, the file it names) for each relative Markdown link of `path` whose file does not
    exist."""
    src = open(os.path.join(ROOT, path)).read()
    src = re.sub(r"^```.*?^```", "", src, flags=re.S | re.M)      # not inside code blocks
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", src):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = os.path.normpath(os.path.join(ROOT, os.path.dirname(path),
                                             target.split("#")[0]))
        if not os.path.exists(file):
            broken.append((target, os.path.relpath(file, ROOT)))
    return broken
