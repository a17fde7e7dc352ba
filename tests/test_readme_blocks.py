"""README.md and docs/*.md run as pasted and print what they show (tests/doc_blocks.py), and
every relative link of theirs names a file that exists.

The README's outputs are Vulkan's: the blocks run with VKGRAD_BACKEND=vulkan, here on lavapipe,
as the README says. Of docs/, the pages below are meant to run as a whole; the python blocks of
the others are excerpts (a signature, a fragment of a loop, the runtime's low-level API) that
name values the page does not define.
"""

import glob
import os

import pytest

import doc_blocks
from child_env import ROOT
from vkgrad.runtime import get_device
from vkgrad.target import Target

VULKAN = {"VKGRAD_BACKEND": "vulkan"}
# The outputs shown were made on lavapipe. On a device whose Target plans otherwise (the H200
# splits K, takes fewer fused loads, binds more buffers per kernel), what the plan decides is
# that device's own: its plan texts, and these keys of stats(), are not compared there.
PLAN_KEYS = frozenset({"dispatches", "kernels", "buffers", "peak_bytes", "scratch_bytes"})
PLAN_FIELDS = ("split_k", "matmul_tiles", "prefetch", "unroll_loops", "matmul_hook_max_flops",
               "matmul_load_hook_max_flops", "max_storage_buffers", "max_shared_memory")


def plans_as_shown() -> bool:
    here, shown = get_device().target, Target.lavapipe()
    return all(getattr(here, f) == getattr(shown, f) for f in PLAN_FIELDS)


def _is_plan(text: str) -> bool:
    return text.startswith("plan ")
RUNNABLE_DOCS = ["docs/compiler.md", "docs/optim.md", "docs/random.md", "docs/reliability.md",
                 "docs/vmap.md"]
PAGES = ["README.md", "BENCHMARKS.md"] + sorted(
    os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def _check(path, env):
    shown, same = 0, plans_as_shown()
    for block, printed in doc_blocks.run_python_blocks(path, env):
        if block.output is not None:
            shown += 1
            if not same and _is_plan(block.output):
                assert _is_plan(printed), printed
                continue
            bad = doc_blocks.mismatches(printed, block.output,
                                        ignore_keys=frozenset() if same else PLAN_KEYS)
            assert not bad, f"{path}:{block.line} prints otherwise than shown:\n" + "\n".join(bad)
    return shown


def test_readme_python_blocks_print_what_it_shows():
    assert _check("README.md", VULKAN) >= 5


@pytest.mark.parametrize("path", RUNNABLE_DOCS)
def test_docs_python_blocks_run_as_pasted(path):
    _check(path, VULKAN)


@pytest.mark.parametrize("path", ["README.md", "docs/compiler.md"])
def test_dump_commands_print_what_the_page_shows(path):
    commands = doc_blocks.dump_commands(path)
    assert commands
    for block, argv, shown in commands:
        printed = doc_blocks.run_command(argv, VULKAN)
        if not plans_as_shown() and _is_plan(shown):
            assert _is_plan(printed), printed
            continue
        bad = doc_blocks.mismatches(printed, shown)
        assert not bad, f"{path}:{block.line}: {' '.join(argv[1:])}\n" + "\n".join(bad)


def test_every_relative_link_and_path_names_a_file():
    broken = {p: doc_blocks.relative_links(p) + doc_blocks.missing_paths(p) for p in PAGES}
    assert not {p: b for p, b in broken.items() if b}
    assert "DESIGN.md" not in "".join(open(os.path.join(ROOT, p)).read() for p in PAGES)


def test_the_comparison():
    assert not doc_blocks.mismatches("0 2.44275903\n{'a': 1.0, 'b': 'x'}",
                                     "0 2.4427590370\n{'a': 1.00001, 'b': 'x'}")
    assert doc_blocks.mismatches("{'a': 1.0, 'b': 'y'}", "{'a': 1.0, 'b': 'x'}")
    assert doc_blocks.mismatches("{'a': 1.0}", "{'a': 1.0, 'b': 'x'}")
    assert doc_blocks.mismatches("k1  matmul", "k1  fused")
    assert doc_blocks.mismatches("[ 0.5 1.2 ]", "[ 0.5 1.3 ]")
    assert doc_blocks.mismatches("a\nb", "a")
