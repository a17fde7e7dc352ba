"""vg.jit: a traced program compiled to Vulkan kernels, run as ONE submission per call.

    step = vg.jit(fun, static_argnums=(), static_argnames=(), donate_argnums=(), backend=None,
                  disable_passes=None)
    out = step(*args)                      # pytree of vg.Array, resident on the device
    step.lower(*args).as_text(stage="plan")

Pipeline (each stage printable, each executable by the numpy interpreter; the stage table is
vkgrad/pipeline.py):
    trace -> optimize (simplify, transpose folding, CSE, DCE) -> remat -> fuse (loops, then
          into kernels' loads and stores, multi-output, horizontal) -> plan (kernels + memory)
          -> one recorded Kompute sequence, replayed.
`disable_passes` ("fuse,remat" or a list; default VKGRAD_DISABLE_PASSES) switches passes off
by name (vkgrad/passes/__init__.py).

Compiled programs are cached on (argument structure, shapes and dtypes, static values,
donation, backend); VKGRAD_LOG_COMPILES=1 logs each compile and what changed in the key.

A call binds its arguments' device buffers directly (an Array from an earlier call is never
copied or uploaded again), uploads host arrays, and writes outputs into pooled buffers, or, for
a donated argument, into the argument's own buffer when the memory plan shows that is safe
(vkgrad/runtime/runners.py). A program the kernels cannot run falls back WHOLE to the
interpreter (vkgrad/execution/compiled.py).
"""

from __future__ import annotations

import functools
import inspect
import time
import weakref
from dataclasses import dataclass

from vkgrad.config import env_snapshot, switches
from vkgrad.errors import ArgumentError
from vkgrad.execution import fastpath
from vkgrad.execution.array import Array, call
from vkgrad.execution.compiled import BACKENDS, Compiled, default_backend, log
from vkgrad.lru import LRU
from vkgrad.pipeline import disabled_passes
from vkgrad.tracer import core
from vkgrad.tracer.pytree import tree_flatten
from vkgrad.transforms.differentiation import vjp
from vkgrad.transforms.tracing import fun_name, normalize_argnums, trace_function
from vkgrad.traceback_util import api_boundary


# Compiled programs kept per jitted function, least recently called first out: a data loader
# whose last batch is ragged, or a new shape every call, would otherwise keep every program
# (and its kernels, scratch buffers and recorded sequences) for the life of the function. JAX
# keeps them all; set vkgrad.execution.jit.MAX_PROGRAMS to change it (docs/long_runs.md).
MAX_PROGRAMS = 32

live: "weakref.WeakSet[Jitted]" = weakref.WeakSet()   # for vg.runtime_stats

# what a call's backend and disabled passes depend on: a jitted call reads it every time
_env = env_snapshot("VKGRAD_BACKEND", "VKGRAD_DEVICE", "VKGRAD_DISABLE_PASSES")

# argument structures per jitted function with a generated fast lane (a loop needs one or two:
# the first call's numpy parameters, then the Arrays it returned)
MAX_GUARDS = 4


def jit(fun=None, *, static_argnums=(), static_argnames=(), donate_argnums=(), backend=None,
        disable_passes=None):
    """Compile `fun` for the default (or given) backend; see the module docstring.
    static_argnames: parameter names made static, as JAX's (their positions join
    static_argnums)."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums,
                                 static_argnames=static_argnames, donate_argnums=donate_argnums,
                                 backend=backend, disable_passes=disable_passes)
    if not callable(fun):
        raise ArgumentError(f"vg.jit expects a function, got {type(fun).__name__} {fun!r:.60}",
                            source=core.user_source())
    if static_argnames:
        static_argnums = _with_named(fun, static_argnums, static_argnames)
    return Jitted(fun, static_argnums, donate_argnums, backend, disable_passes)


def _with_named(fun, static_argnums, static_argnames) -> tuple:
    """static_argnums with the positions of the parameters static_argnames names (each a
    parameter that can be passed by position)."""
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    try:
        params = list(inspect.signature(fun).parameters.values())
    except (TypeError, ValueError):
        params = []
    where = {p.name: i for i, p in enumerate(params)
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.POSITIONAL_ONLY)}
    missing = [n for n in names if n not in where]
    if missing:
        raise ArgumentError(f"static_argnames={static_argnames!r}: {fun_name(fun)} has no "
                            f"parameter {missing[0]!r} that can be passed by position "
                            f"(its parameters: {', '.join(p.name for p in params) or 'unknown'})",
                            source=core.user_source())
    nums = tuple(static_argnums) if isinstance(static_argnums, (tuple, list)) else \
        (static_argnums,)
    return nums + tuple(where[n] for n in names if where[n] not in nums)


@dataclass(frozen=True)
class _Key:
    structure: object      # treedefs of the dynamic arguments
    avals: tuple           # TensorType per leaf
    static: tuple          # static argument values
    donated: tuple         # donated leaf indices
    backend: str
    disabled: frozenset = frozenset()   # passes switched off

    def describe_change(self, old: "_Key") -> str:
        if old.backend != self.backend:
            return f"backend {old.backend} -> {self.backend}"
        if old.structure != self.structure:
            return "argument structure changed"
        if old.static != self.static:
            return f"static arguments {old.static!r} -> {self.static!r}"
        if len(old.avals) != len(self.avals):
            return f"{len(old.avals)} -> {len(self.avals)} array arguments"
        diffs = [f"leaf {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(old.avals, self.avals))
                 if a != b]
        if diffs:
            return "shapes/dtypes changed: " + "; ".join(diffs[:4]) + (" ..." if len(diffs) > 4 else "")
        if old.disabled != self.disabled:
            return f"disabled passes {sorted(old.disabled)} -> {sorted(self.disabled)}"
        return "donation changed"


class Jitted:
    def __init__(self, fun, static_argnums, donate_argnums, backend, disable_passes=None):
        if backend is not None and backend not in BACKENDS:
            raise ArgumentError(f"backend={backend!r}: choose one of {', '.join(BACKENDS)}")
        self.disable_passes = None if disable_passes is None else \
            disabled_passes(disable_passes)
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.static_argnums = static_argnums
        self.donate_argnums = donate_argnums
        self.backend = backend
        self._cache = LRU(MAX_PROGRAMS, on_evict=self._evict)
        self._last_key: _Key | None = None
        self._argnums: dict = {}   # number of arguments -> (static, donated) positions
        self._where = f"an argument of {fun_name(fun)}"
        self._fast: list = []       # (guard, entry), newest first (vkgrad/execution/fastpath.py)
        self._settings: dict = {}   # _env() -> (backend, disabled passes) under it
        self.compiles = 0
        live.add(self)

    def __repr__(self):
        return f"<vkgrad.jit of {fun_name(self.fun)}>"

    # --- the cache key and the arguments' leaves
    def _static_list(self) -> list:
        """static_argnums as a list of the ints in it (normalize_argnums reports the rest)."""
        nums = self.static_argnums if isinstance(self.static_argnums, (tuple, list)) else \
            (self.static_argnums,)
        return [n for n in nums if isinstance(n, int) and not isinstance(n, bool)]

    def _static_by_keyword(self, args, kwargs):
        """(args, kwargs, {position: name}) with each keyword argument that names a static
        position moved to it (positions between filled from the parameters' defaults), so a
        static argument passed by keyword is static, as in JAX."""
        last = max((n for n in self._static_list() if n >= 0), default=-1)
        if last < len(args):
            return args, kwargs, {}
        try:
            params = list(inspect.signature(self.fun).parameters.values())[:last + 1]
        except (TypeError, ValueError):   # no signature (a builtin): nothing to match
            params = []
        named = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        if len(named) != last + 1 or not any(p.name in kwargs for p in named[len(args):]):
            return args, kwargs, {}
        kwargs, extra, names = dict(kwargs), [], {}
        for i, p in enumerate(named[len(args):], start=len(args)):
            if p.name in kwargs:
                extra.append(kwargs.pop(p.name))
                names[i] = p.name
            elif p.default is not inspect.Parameter.empty:
                extra.append(p.default)
            else:
                break
        return args + tuple(extra), kwargs, names

    def _prepare(self, args, kwargs):
        fun = self.fun
        by_name = {}
        if kwargs and self.static_argnums != ():
            args, kwargs, by_name = self._static_by_keyword(args, kwargs)
        if kwargs and any(n >= len(args) for n in self._static_list()):
            raise ArgumentError(
                f"static_argnums={self.static_argnums!r} names a position this call of "
                f"{fun_name(self.fun)} does not fill (it passes {len(args)} positional "
                f"argument(s)); keyword argument(s) {', '.join(sorted(kwargs))} are traced, not "
                "static: pass static values positionally", source=core.user_source())
        if kwargs:   # keyword arguments are dynamic too: pass them as one more (pytree) argument
            fun = lambda *a: self.fun(*a[:-1], **a[-1])
            args = args + (kwargs,)
        nums = self._argnums.get(len(args))
        if nums is None:
            static = set(normalize_argnums(self.static_argnums, len(args), "static_argnums")) \
                if self.static_argnums != () else set()
            donate = set(normalize_argnums(self.donate_argnums, len(args), "donate_argnums")) \
                if self.donate_argnums != () else set()
            if static & donate:
                raise ArgumentError("an argument cannot be both static and donated")
            nums = self._argnums[len(args)] = (static, donate)
        static, donate = nums
        leaves, trees, donated, statics = [], [], [], []
        for i, a in enumerate(args):
            if i in static:
                try:
                    hash(a)
                except TypeError:
                    what = f"'{by_name[i]}'" if i in by_name else str(i)
                    raise ArgumentError(f"static argument {what} of {fun_name(self.fun)} is a "
                                        f"{type(a).__name__}, which is not hashable: static "
                                        "values are part of the compile cache key",
                                        source=core.user_source()) from None
                statics.append((i, a))
                continue
            ls, tree = tree_flatten(a)
            if i in donate:
                donated += range(len(leaves), len(leaves) + len(ls))
            trees.append((i, tree))
            leaves += ls
        avals = tuple(x._aval if type(x) is Array else core.abstract_leaf(x, self._where)
                      for x in leaves)
        key = _Key(tuple(trees), avals, tuple(statics), tuple(donated),
                   self.backend or default_backend(),
                   disabled_passes() if self.disable_passes is None else self.disable_passes)
        return fun, args, key, leaves

    def _compiled(self, args, kwargs):
        fun, args, key, leaves = self._prepare(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            why = "first call" if self._last_key is None else key.describe_change(self._last_key)
            log(f"compiling {fun_name(self.fun)} for {key.backend} ({why})")
            t0 = time.perf_counter()
            traced = trace_function(fun, args, self.static_argnums)
            entry = Compiled(traced.program, traced.out_tree, key.backend, set(key.donated),
                             key.disabled, times={"trace": time.perf_counter() - t0})
            log(f"compiled {fun_name(self.fun)}: {entry.describe_times()}")
            self.compiles += 1
            self._cache.put(key, entry)   # the least recently used beyond MAX_PROGRAMS go
        self._last_key = key
        if not kwargs:   # the next call with arguments like these skips the key (fastpath.py)
            self._fast.insert(0, (fastpath.guard(Array, len(args), key.structure, key.static,
                                                 leaves), entry, (key.backend, key.disabled)))
            del self._fast[MAX_GUARDS:]
        return entry, leaves

    def _evict(self, entry) -> None:
        """Forget a compiled program and free its recorded sequences now; its scratch buffers
        and pipelines go when the last reference to it does."""
        log(f"evicting a compiled program of {fun_name(self.fun)} (more than {MAX_PROGRAMS})")
        self._fast = [f for f in self._fast if f[1] is not entry]
        _release(entry)

    @api_boundary
    def __call__(self, *args, **kwargs):
        if core.current_trace() is not None or switches.disable_jit:   # inline; disable_jit
            return self.fun(*args, **kwargs)
        if self._fast and not kwargs:
            env = _env()   # (backend, disabled passes) from the environment, kept per value
            setting = self._settings.get(env)
            if setting is None:
                setting = self._setting(env)
            for guard, entry, entry_setting in self._fast:
                if entry_setting == setting:
                    leaves = guard(args)
                    if leaves is not None:
                        return entry.build_outputs(call(entry, leaves, donated=entry.donated))
        entry, leaves = self._compiled(args, kwargs)
        return entry.build_outputs(call(entry, leaves, donated=entry.donated))

    def _setting(self, env) -> tuple:
        """(backend, disabled passes) of a call under the environment `env` (_env()), kept for
        the next calls under it (an error, an unknown backend or pass, is raised every time)."""
        setting = (self.backend or default_backend(), disabled_passes()
                   if self.disable_passes is None else self.disable_passes)
        if len(self._settings) >= 8:
            self._settings.clear()
        self._settings[env] = setting
        return setting

    def lower(self, *args, **kwargs) -> "Compiled":
        """The compiled program for these arguments (compiling it if needed): .as_text(stage),
        .stats(), .compile()."""
        return self._compiled(args, kwargs)[0]


def _release(entry) -> None:
    release = getattr(entry.runner, "release", None)
    if release is not None:
        release()


def clear_caches() -> None:
    """Forget every jitted function's compiled programs (jax.clear_caches): the next call of
    each compiles again."""
    for jitted in list(live):
        for entry in list(jitted._cache.values()):
            _release(entry)
        jitted._cache.clear()
        jitted._fast = []
        jitted._last_key = None


def fwd_and_bwd(fun, argnums, has_aux: bool = False, jitted: bool = True):
    """(fwd, bwd) of `fun` (jax.fwd_and_bwd): `fwd(*args) -> (out, residuals)` (`(out,
    residuals, aux)` with has_aux) and `bwd(residuals, cotangent)` -> the cotangents of the
    arguments `argnums` names (one, not a tuple, for an int argnums), both jitted by default
    so each compiles once. Differs from JAX: the residuals are the arguments themselves and
    bwd recomputes the forward pass inside its own program (JAX's are its vjp's saved values),
    so that both are jittable programs of arrays."""
    if not callable(fun):
        raise ArgumentError(f"fwd_and_bwd expects a function, got {type(fun).__name__}",
                            source=core.user_source())
    one = isinstance(argnums, int)

    def fwd(*args):
        out = fun(*args)
        if has_aux:
            return out[0], args, out[1]
        return out, args

    def bwd(residuals, cotangent):
        nums = normalize_argnums(argnums, len(residuals))

        def of_dyn(*dyn):
            full = list(residuals)
            for i, d in zip(nums, dyn):
                full[i] = d
            out = fun(*full)
            return out[0] if has_aux else out

        cts = vjp(of_dyn, *(residuals[i] for i in nums))[1](cotangent)
        return cts[0] if one else cts

    return (jit(fwd), jit(bwd)) if jitted else (fwd, bwd)
