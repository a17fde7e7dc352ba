"""examples/train_cnn.py: a short run of the digits ResNet learns (test accuracy well above
chance after 60 steps), writes its log, plot and checkpoint; --resume continues the
uninterrupted run's curve exactly; the same steps on Vulkan give the interpreter's losses."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import vkgrad as vg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import train_cnn  # noqa: E402


def quiet(*a, **k):
    pass


def test_a_short_run_learns_and_writes_its_files(tmp_path):
    cfg = train_cnn.make_config(steps=60, warmup=5)
    res = train_cnn.train(cfg, tmp_path, eval_every=30, progress=False, log=quiet)
    recs = res["records"]
    assert [r["step"] for r in recs] == list(range(1, 61))
    assert recs[0]["loss"] > 2.0 and np.mean([r["loss"] for r in recs[-5:]]) < 0.8
    tests = [r for r in recs if "test_acc" in r]
    assert [r["step"] for r in tests] == [30, 60] and tests[-1]["test_acc"] > 0.8, tests
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert set(log[29]) == {"step", "loss", "acc", "lr", "images_per_s", "test_loss",
                            "test_acc"}
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    meta = vg.load_metadata(tmp_path / train_cnn.CHECKPOINT)
    assert meta["step"] == "60" and json.loads(meta["config"]) == cfg


def test_resume_continues_the_uninterrupted_curve(tmp_path):
    cfg = train_cnn.make_config(steps=8, warmup=2)
    full = train_cnn.train(cfg, tmp_path / "full", eval_every=4, progress=False, log=quiet)
    part = tmp_path / "part"
    train_cnn.train(cfg, part, eval_every=4, stop_after=6, progress=False, log=quiet)
    assert vg.load_metadata(part / train_cnn.CHECKPOINT)["step"] == "4"
    resumed = train_cnn.train(cfg, part, eval_every=4, resume=True, progress=False, log=quiet)
    assert [(r["step"], r["loss"]) for r in resumed["records"]] == \
        [(r["step"], r["loss"]) for r in full["records"]]
    with pytest.raises(train_cnn.RunError, match="already holds a run"):
        train_cnn.train(cfg, part, progress=False, log=quiet)
    other = train_cnn.make_config(steps=8, warmup=2, lr=1e-2)
    with pytest.raises(train_cnn.RunError, match="lr: 0.003 in the checkpoint, 0.01 now"):
        train_cnn.train(other, part, resume=True, progress=False, log=quiet)


def test_the_step_on_vulkan_matches_the_interpreter(tmp_path, monkeypatch):
    """Convolutions, batch norm and both gradients in one jitted step on the Vulkan kernels."""
    cfg = train_cnn.make_config(steps=3, warmup=1)
    monkeypatch.setenv("VKGRAD_BACKEND", "vulkan")
    on_gpu = train_cnn.train(cfg, tmp_path / "vk", eval_every=3, progress=False, log=quiet)
    monkeypatch.setenv("VKGRAD_BACKEND", "numpy")
    on_cpu = train_cnn.train(cfg, tmp_path / "np", eval_every=3, progress=False, log=quiet)
    assert on_gpu["backend"] == "vulkan" and on_gpu["fallback"] is None
    np.testing.assert_allclose([r["loss"] for r in on_gpu["records"]],
                               [r["loss"] for r in on_cpu["records"]], rtol=1e-4)
