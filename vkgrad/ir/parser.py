"""Reads the printer's text format back into a Program (for golden-text pass tests).

`parse_program(text)`; value names may be anything of the form %name (the printer renumbers).
Params missing from an eqn take the printer's elided defaults. Consts printed as `const ...`
(too large to print) need their arrays passed in `consts={"%5": array}`.
"""

from __future__ import annotations

import ast
import re

import numpy as np

from vkgrad.errors import IRError
from vkgrad.ir.core import (BACKWARD_MARKER, DTYPES, PRIMITIVES, Eqn, Literal, Params, Program,
                            Var, np_dtype, param_defaults)

_TYPE = re.compile(r"^(f16|bf16|f32|f64|i32|bool)\[([0-9,\s]*)\]$")
_HEADER = re.compile(r"^program\s+([\w.]+)\s*\((.*)\)\s*->\s*(.*?)\s*\{$")
_BINDING = re.compile(r"^(%\w+)\s*:\s*(.+)$")
_LITERAL = re.compile(r"^(.+):(f16|bf16|f32|f64|i32|bool)$")
_PRIM = re.compile(r"^([A-Za-z_]\w*)")
_CLOSED = re.compile(r"^([A-Za-z_]\w*)(?:\[(\d+)\])?\((.*)\)\s*\{$")


def split_top(s: str, sep: str = ",", opening: str = "([", closing: str = ")]") -> list[str]:
    """Split on `sep` outside (), [] (or the brackets given)."""
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    tail = "".join(cur).strip()
    if tail or parts:
        parts.append(tail)
    return [p for p in parts if p != ""]


def parse_type(s: str) -> tuple[tuple, str]:
    m = _TYPE.match(s.strip())
    if not m:
        raise IRError(f"bad type {s!r} (expected e.g. f32[3,4] or f32[])")
    dims = tuple(int(d) for d in m.group(2).replace(" ", "").split(",") if d)
    return dims, m.group(1)


def _parse_scalar(text: str, dtype: str):
    if dtype == "bool":
        if text not in ("True", "False"):
            raise IRError(f"bad bool literal {text!r}")
        return text == "True"
    if dtype == "i32":
        return int(text)
    return float(text)


def _parse_param_value(text: str):
    if text in DTYPES or text.isidentifier() and text not in ("True", "False", "None"):
        return text          # dtype names and words (fused[kind=output]) are strings
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if text.startswith("(") and text.endswith(")"):   # a tuple holding words: psum's axes
            return tuple(_parse_param_value(t) for t in _split_top(text[1:-1]) if t)
        raise IRError(f"bad parameter value {text!r}") from None


def _split_top(text: str) -> list:
    """text split at its commas outside parentheses, each part stripped."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    return parts + [text[start:].strip()]


def parse_program(text: str, consts: dict | None = None) -> Program:
    consts = consts or {}
    lines = [ln.strip() for ln in text.strip().splitlines()]
    lines = [ln for ln in lines if ln]
    m = _HEADER.match(lines[0]) if lines else None
    if not m:
        raise IRError(f"expected 'program NAME(...) -> TYPES {{', got {lines[:1]}")
    name, ins_text, _ = m.groups()
    env: dict[str, Var] = {}
    inputs = [_define(env, b) for b in split_top(ins_text)]
    start, arg_names = 1, ()
    if len(lines) > 1 and lines[1].startswith("# inputs: "):   # the input leaves' names
        arg_names = tuple(re.sub(r"^%\d+ ", "", part)
                          for part in re.split(r", (?=%\d+ )", lines[1][len("# inputs: "):]))
        start = 2
    pos, eqns, const_pairs, outputs = _parse_block(lines, start, env, consts, None)
    if outputs is None:
        raise IRError("program has no return line")
    return Program(name, inputs, outputs, eqns, const_pairs, arg_names)


def _define(env: dict, binding: str, pending: dict | None = None, local: set | None = None) -> Var:
    """Bind `%name: type` in `env`. A name in `pending` (the results of the eqn whose body is
    being read) is bound to that Var: the body defines the eqn's outputs. Inside a body a name
    may shadow an outer one (`local` holds the names the body itself defined)."""
    bm = _BINDING.match(binding.strip())
    if not bm:
        raise IRError(f"bad binding {binding!r} (expected %name: type)")
    key = bm.group(1)
    shape, dtype = parse_type(bm.group(2))
    if pending and key in pending:
        v = pending.pop(key)
        if v.shape != shape or v.dtype != dtype:
            raise IRError(f"{key} is typed {bm.group(2)} in the body, {v.type} outside")
        env[key] = v
        return v
    if key in (env if local is None else local):
        raise IRError(f"{key} is defined twice")
    if local is not None:
        local.add(key)
    env[key] = v = Var(shape, dtype)
    return v


def _atom(env: dict, tok: str):
    tok = tok.strip()
    if tok.startswith("%"):
        if tok not in env:
            raise IRError(f"{tok} is used before it is defined")
        return env[tok]
    lm = _LITERAL.match(tok)
    if not lm:
        raise IRError(f"bad operand {tok!r}")
    return Literal(_parse_scalar(lm.group(1), lm.group(2)), lm.group(2))


def _parse_block(lines, pos, env, consts, pending):
    """Eqns from lines[pos] up to the closing `}`: (position after it, eqns, consts, outputs).

    A line ending in `{` is an eqn with a body (a `fused` eqn): the indented eqns up to its `}`
    are the body, whose inputs are the eqn's operands and whose results are the eqn's outputs.
    Names defined inside a body are local to it (two bodies may recompute the same value)."""
    eqns, const_pairs, outputs, phase = [], [], None, "fwd"
    local = None if pending is None else set()
    while pos < len(lines):
        ln = lines[pos]
        pos += 1
        if ln == "}":
            return pos, eqns, const_pairs, outputs
        if ln.startswith("#"):
            if ln == BACKWARD_MARKER:
                phase = "bwd"
            elif ln == "# ---- forward ----":
                phase = "fwd"
            continue
        src = None
        if " #" in ln:
            ln, src = ln.split(" #", 1)
            ln, src = ln.strip(), src.strip()
            if src.endswith("{"):      # `... # file:line {`: the eqn has a body
                ln, src = ln + " {", src[:-1].strip()
            src = src or None
        if ln.startswith("return"):
            outputs = [_atom(env, t) for t in split_top(ln[len("return"):])]
            continue
        if "=" not in ln:
            raise IRError(f"cannot parse line {ln!r}")
        lhs, rhs = ln.split("=", 1)
        rhs = rhs.strip()
        if rhs.startswith("const"):
            v = _define(env, lhs, pending, local)
            body = rhs[len("const"):].strip()
            if body == "...":
                key = lhs.split(":")[0].strip()
                if key not in consts:
                    raise IRError(f"const {key} was elided when printed; pass consts={{'{key}': "
                                  "array}")
                arr = np.asarray(consts[key], dtype=np_dtype(v.dtype))
            else:
                vals = [_parse_scalar(t, v.dtype) for t in split_top(body.strip("[]"))]
                arr = np.array(vals, dtype=np_dtype(v.dtype)).reshape(v.shape)
            const_pairs.append((v, arr))
            continue
        has_body = rhs.endswith("{")
        if has_body:
            rhs = rhs[:-1].rstrip()
        pm = _PRIM.match(rhs)
        if not pm or pm.group(1) not in PRIMITIVES:
            raise IRError(f"unknown primitive in {rhs!r}")
        prim = PRIMITIVES[pm.group(1)]
        rest = rhs[pm.end():]
        params = dict(param_defaults.get(prim, {}))
        if rest.startswith("["):
            depth = 0
            for i, ch in enumerate(rest):
                depth += ch == "["
                depth -= ch == "]"
                if depth == 0:
                    break
            for kv in split_top(rest[1:i]):
                k, v = kv.split("=", 1)
                params[k.strip()] = _parse_param_value(v.strip())
            rest = rest[i + 1:]
        args = [_atom(env, t) for t in split_top(rest)]
        outs = [_define(env, b, pending, local) for b in split_top(lhs)]
        if has_body and prim.control:
            pos = _parse_closed(lines, pos, prim, consts, params)
        elif has_body:
            inner = dict(env)
            pend = {k: v for k, v in inner.items() if any(v is o for o in outs)}
            for k in pend:
                del inner[k]
            pos, body_eqns, _, _ = _parse_block(lines, pos, inner, consts, pend)
            if pend:
                raise IRError(f"the body of {prim.name} does not define {', '.join(sorted(pend))}")
            params["body"] = Program(f"{prim.name}_body", [a for a in args if isinstance(a, Var)],
                                     outs, body_eqns)
        eqns.append(Eqn(prim, args, Params(params), outs, src, phase))
    if pending is not None:
        raise IRError("a body ends without its closing '}'")
    return pos, eqns, const_pairs, outputs


def _parse_closed(lines, pos, prim, consts, params) -> int:
    """A control eqn's closed sub-programs, `key(inputs) { ... return ... }` (or
    `key[i](...)`, gathered into a tuple), up to the eqn's closing `}`: into `params`."""
    tuples: dict = {}
    while pos < len(lines) and lines[pos] != "}":
        m = _CLOSED.match(lines[pos])
        if not m:
            raise IRError(f"expected a sub-program `name(...) {{` of {prim.name}, got "
                          f"{lines[pos]!r}")
        key, index, ins_text = m.groups()
        env: dict = {}
        inputs = [_define(env, b) for b in split_top(ins_text)]
        pos, eqns, const_pairs, outputs = _parse_block(lines, pos + 1, env, consts, None)
        if outputs is None:
            raise IRError(f"the sub-program {key} of {prim.name} has no return line")
        body = Program(f"{prim.name}_{key}", inputs, outputs, eqns, const_pairs)
        if index is None:
            params[key] = body
        else:
            tuples.setdefault(key, []).append(body)
    if pos >= len(lines):
        raise IRError(f"the eqn {prim.name} ends without its closing '}}'")
    params.update((k, tuple(v)) for k, v in tuples.items())
    return pos + 1
