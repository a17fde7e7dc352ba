"""JAX's public names against vkgrad's: every name of JAX 0.10.2's user-facing modules
(tests/golden/jax_public_names.json, written by scripts/jax_name_list.py; jax.lax without its
primitive objects) exists under the same path in vkgrad (jax -> vkgrad, jax.numpy ->
vkgrad.numpy), or is one of NOT_HERE below, each with the reason. The list is exact both ways:
a name that vkgrad gains must leave it, so docs/numpy.md's coverage line stays true.

A name that exists may still refuse some arguments by name (docs/numpy.md, "What it refuses"):
this test is about what a JAX user finds under JAX's names, tests elsewhere about what they do.
"""

import json
import pathlib

import vkgrad as vg

GOLDEN = json.loads((pathlib.Path(__file__).parent / "golden" / "jax_public_names.json")
                    .read_text())

# name -> why vkgrad has no such name (module-qualified where the name alone is ambiguous)
REASONS = {
    "complex numbers (no complex dtype: docs/numpy.md)": [
        "jax.numpy.linalg.eig", "jax.numpy.linalg.eigvals", "jax.lax.complex", "jax.lax.conj",
        "jax.lax.real", "jax.lax.imag", "jax.lax.fft", "jax.lax.FftType"],
    "sharding and multiple devices in one process (vkgrad runs one device a process; data "
    "parallel is vg.distributed over MPI: docs/distributed.md)": [
        "jax.Device", "jax.NamedSharding", "jax.P", "jax.Shard", "jax.make_mesh",
        "jax.set_mesh", "jax.shard_map", "jax.smap", "jax.pmap", "jax.reshard",
        "jax.make_array_from_callback", "jax.make_array_from_process_local_data",
        "jax.make_array_from_single_device_arrays", "jax.host_count", "jax.host_id",
        "jax.host_ids", "jax.process_indices", "jax.remove_size_one_mesh_axis_from_type",
        "jax.auto_pcast", "jax.thread_guard", "jax.memory", "jax.make_user_context",
        "jax.lax.with_sharding_constraint", "jax.lax.pcast", "jax.lax.pbroadcast",
        "jax.lax.all_gather", "jax.lax.all_to_all", "jax.lax.axis_index", "jax.lax.ppermute",
        "jax.lax.precv", "jax.lax.psend", "jax.lax.pshuffle", "jax.lax.psum_scatter",
        "jax.lax.pswapaxes", "jax.lax.ragged_all_to_all"],
    "JAX's internals, experiments and XLA's switches (no meaning in vkgrad)": [
        "jax.ad", "jax.ds", "jax.Ref", "jax.empty_ref", "jax.free_ref", "jax.new_ref",
        "jax.freeze", "jax.allow_f16_reductions", "jax.array_garbage_collection_guard",
        "jax.debug_key_reuse", "jax.default_prng_impl", "jax.enable_checks",
        "jax.enable_custom_prng", "jax.explain_cache_misses",
        "jax.jax2tf_associative_scan_reductions", "jax.legacy_prng_key", "jax.no_execution",
        "jax.no_tracing", "jax.softmax_custom_jvp", "jax.threefry_partitionable",
        "jax.lax.after_all", "jax.lax.create_token", "jax.lax.dce_sink", "jax.lax.stage",
        "jax.lax.random_gamma_grad", "jax.lax.igamma_grad_a", "jax.random.random_gamma_p",
        "jax.lax.AccuracyMode", "jax.lax.DotAlgorithm", "jax.lax.DotAlgorithmPreset",
        "jax.lax.PrecisionLike", "jax.lax.Tolerance"],
    "ragged and scaled (microscaling) dots: not written": [
        "jax.lax.RaggedDotDimensionNumbers", "jax.lax.ragged_dot_general", "jax.lax.scaled_dot",
        "jax.nn.get_scaled_dot_general_config",
        "jax.nn.scaled_dot_general", "jax.nn.scaled_matmul"],
}
NOT_HERE = {name for names in REASONS.values() for name in names}


def _vkgrad_module(jax_name: str):
    path = jax_name.replace("jax.numpy", "vkgrad.numpy").replace("jax", "vkgrad", 1).split(".")
    module = vg
    for part in path[1:]:
        module = getattr(module, part)
    return module


def missing() -> set:
    out = set()
    for module, names in GOLDEN["modules"].items():
        mine = _vkgrad_module(module)
        out |= {f"{module}.{n}" for n in names if not hasattr(mine, n)}
    return out


def test_every_jax_name_is_here_or_says_why_not():
    gone = missing()
    assert not gone - NOT_HERE, f"JAX names vkgrad lacks, no reason given: {sorted(gone - NOT_HERE)}"
    assert not NOT_HERE - gone, f"names vkgrad has now, in REASONS: {sorted(NOT_HERE - gone)}"


def test_the_golden_list_is_jax_0_10_2():
    assert GOLDEN["jax_version"] == "0.10.2"
    total = sum(map(len, GOLDEN["modules"].values()))
    assert total > 1000 and "jax.numpy" in GOLDEN["modules"] and "jax.scipy.stats.norm" in \
        GOLDEN["modules"]
