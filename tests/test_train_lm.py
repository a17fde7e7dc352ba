"""examples/train_lm.py: the tiny models learn (transformer, Mamba, GRU), checkpoints
round-trip, --resume continues the uninterrupted run's curve, bad checkpoints are refused with
clear messages, --help works.

The runs here use the tiny models with small batches (8 x 32 bytes) to keep the suite quick;
until the flash-attention and selective-scan kernels are merged they run on the numpy
interpreter (the whole step falls back), afterwards on Vulkan: the same code either way.
"""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vkgrad as vg
from vkgrad.tracer.pytree import tree_leaves

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import train_lm  # noqa: E402

SMALL = dict(batch=8, seq=32, warmup=5, val_batches=1)


@pytest.fixture(scope="module")
def data():
    train, val = train_lm.load_text(max_bytes=1_000_000)
    assert len(train) == len(val) == 1_000_000
    return train, val


def quiet(*a, **k):
    pass


@pytest.mark.parametrize("model", ["transformer", "mamba", "gru"])
def test_tiny_models_learn(model, data, tmp_path):
    cfg = train_lm.make_config(model, "tiny", steps=30, lr=1e-2, **SMALL)
    res = train_lm.train(cfg, tmp_path, eval_every=15, data=data, progress=False, log=quiet)
    losses = [r["loss"] for r in res["records"]]
    assert len(losses) == 30 and losses[0] > 5.0            # ~ln 256 at the start
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 1.0, losses
    vals = [r["val_loss"] for r in res["records"] if "val_loss" in r]
    assert len(vals) == 2 and vals[1] < vals[0]
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == list(range(1, 31))
    assert set(log[14]) == {"step", "loss", "lr", "tokens_per_s", "grad_norm", "val_loss"}
    # optax's warm-up: from 0 at step 1 to the peak after `warmup` (5) steps
    assert log[0]["lr"] == 0.0 and log[2]["lr"] == pytest.approx(1e-2 * 2 / 5)
    assert log[5]["lr"] == pytest.approx(1e-2)
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    # the checkpoint holds exactly the final state, and the run's config and step
    ckpt = vg.load(tmp_path / train_lm.CHECKPOINT)
    for a, b in zip(tree_leaves(ckpt["params"]),
                    tree_leaves(res["params"])):
        np.testing.assert_array_equal(a, np.asarray(b))
    meta = vg.load_metadata(tmp_path / train_lm.CHECKPOINT)
    assert meta["step"] == "30" and json.loads(meta["config"]) == cfg
    # and the jitted sampler continues a prompt with bytes
    texts = train_lm.sample(cfg, res["params"], [b"def ", b"import os"], 5, 0.8, seed=0)
    assert [t[:4] for t in texts] == [b"def ", b"impo"] and [len(t) for t in texts] == [9, 14]


def test_resume_continues_the_uninterrupted_curve(data, tmp_path):
    cfg = train_lm.make_config("transformer", "tiny", steps=8, **SMALL)
    full = train_lm.train(cfg, tmp_path / "full", eval_every=4, data=data, progress=False,
                          log=quiet)
    part = tmp_path / "part"
    train_lm.train(cfg, part, eval_every=4, data=data, stop_after=6, progress=False, log=quiet)
    # interrupted at step 6: the checkpoint is step 4's, the log (torn line and all) runs to 6
    assert vg.load_metadata(part / train_lm.CHECKPOINT)["step"] == "4"
    with open(part / "log.jsonl", "a") as f:
        f.write('{"step": 7, "lo')
    resumed = train_lm.train(cfg, part, eval_every=4, data=data, resume=True, progress=False,
                             log=quiet)
    want = [(r["step"], r["loss"]) for r in full["records"]]
    got = [(r["step"], r["loss"]) for r in resumed["records"]]
    assert [s for s, _ in got] == list(range(1, 9))
    np.testing.assert_allclose([l for _, l in got], [l for _, l in want], rtol=1e-5)
    for a, b in zip(tree_leaves(resumed["params"]),
                    tree_leaves(full["params"])):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-6)


def test_bad_checkpoints_are_refused_with_clear_messages(data, tmp_path, capsys):
    cfg = train_lm.make_config("mamba", "tiny", steps=2, **SMALL)
    train_lm.train(cfg, tmp_path, eval_every=2, data=data, progress=False, log=quiet)
    other = train_lm.make_config("transformer", "tiny", steps=2, **SMALL)
    with pytest.raises(train_lm.ResumeError) as e:
        train_lm.train(other, tmp_path, eval_every=2, data=data, resume=True, progress=False,
                       log=quiet)
    assert "model: mamba in the checkpoint, transformer now" in str(e.value)
    wider = train_lm.make_config("mamba", "tiny", steps=2, d_model=32, **SMALL)
    with pytest.raises(train_lm.ResumeError, match="d_model: 64 in the checkpoint, 32 now"):
        train_lm.train(wider, tmp_path, eval_every=2, data=data, resume=True, progress=False,
                       log=quiet)

    # through the command line: a truncated file is one clear line and exit status 2
    ckpt = tmp_path / train_lm.CHECKPOINT
    ckpt.write_bytes(ckpt.read_bytes()[:-100])
    args = ["--model", "mamba", "--steps", "2", "--batch", "8", "--seq", "32", "--resume",
            "--out", str(tmp_path)]
    assert train_lm.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(ckpt) in err and "truncated" in err
    ckpt.write_bytes(b"PK\x03\x04 this is a zip file, not a checkpoint")
    assert train_lm.main(args) == 2
    assert "not a safetensors file" in capsys.readouterr().err
    ckpt.unlink()
    assert train_lm.main(args) == 2
    assert "does not exist" in capsys.readouterr().err


def test_help():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "train_lm.py"), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for flag in ("--model", "--preset", "--steps", "--batch", "--seq", "--lr", "--out",
                 "--resume", "--sample", "--seed"):
        assert flag in out.stdout


def test_a_folder_holding_a_run_needs_resume_or_overwrite(data, tmp_path, capsys):
    cfg = train_lm.make_config("transformer", "tiny", steps=2, **SMALL)
    train_lm.train(cfg, tmp_path, eval_every=2, data=data, progress=False, log=quiet)
    log_before = (tmp_path / "log.jsonl").read_text()
    with pytest.raises(train_lm.RunError, match="already holds a run.*--resume.*--overwrite"):
        train_lm.train(cfg, tmp_path, eval_every=2, data=data, progress=False, log=quiet)
    assert (tmp_path / "log.jsonl").read_text() == log_before        # not truncated
    (tmp_path / train_lm.CHECKPOINT).unlink()                         # a log alone is a run too
    args = ["--steps", "2", "--batch", "8", "--seq", "32", "--sample", "0", "--out", str(tmp_path)]
    assert train_lm.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "log.jsonl" in err and "--overwrite" in err
    assert (tmp_path / "log.jsonl").read_text() == log_before
    res = train_lm.train(cfg, tmp_path, eval_every=2, data=data, overwrite=True,
                         progress=False, log=quiet)
    assert [r["step"] for r in res["records"]] == [1, 2]
    with pytest.raises(SystemExit):
        train_lm.parse_args(["--resume", "--overwrite"])


def test_resume_refuses_a_checkpoint_with_nonfinite_values(data, tmp_path):
    cfg = train_lm.make_config("mamba", "tiny", steps=2, **SMALL)
    train_lm.train(cfg, tmp_path, eval_every=2, data=data, progress=False, log=quiet)
    path = tmp_path / train_lm.CHECKPOINT
    meta = vg.load_metadata(path)
    state = vg.load(path)
    name, leaf = next((k, v) for k, v in state["params"].items() if isinstance(v, vg.Array))
    leaf = np.array(leaf)   # a vg.Array is immutable: change a numpy copy
    leaf.flat[:3] = [np.nan, np.inf, np.nan]
    state["params"][name] = leaf
    vg.save(path, state, metadata=meta)
    with pytest.raises(train_lm.ResumeError) as e:
        train_lm.train(cfg, tmp_path, eval_every=2, data=data, resume=True, progress=False,
                       log=quiet)
    assert f"params.{name} (3 of {leaf.size:,} values)" in str(e.value)
    assert "--allow-nonfinite" in str(e.value)
    res = train_lm.train(cfg, tmp_path, eval_every=2, data=data, resume=True,
                         allow_nonfinite=True, progress=False, log=quiet)
    assert np.isnan(np.asarray(res["params"][name]).flat[0])          # taken as it is


def test_a_full_disk_at_a_checkpoint_is_one_line_and_exit_status_2(tmp_path, monkeypatch,
                                                                    capsys):
    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    args = ["--model", "mamba", "--steps", "2", "--batch", "8", "--seq", "32", "--sample", "0",
            "--out", str(tmp_path)]
    assert train_lm.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {tmp_path / train_lm.CHECKPOINT}: cannot write it: no space")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("option", [["--batch", "0"], ["--steps", "-1"], ["--seq", "x"],
                                    ["--lr", "nan"], ["--eval-every", "0"]])
def test_options_that_count_must_be_positive(option, capsys):
    """--batch 0 trained 200 steps of NaN and wrote a checkpoint; --steps -1 printed nan
    tokens/s: such options are argparse errors naming the option."""
    with pytest.raises(SystemExit) as e:
        train_lm.parse_args(option)
    assert e.value.code == 2
    assert f"argument {option[0]}" in capsys.readouterr().err


def test_resume_extends_the_run_and_says_how_the_schedule_changes(data, tmp_path):
    short = train_lm.make_config("mamba", "tiny", steps=4, **SMALL)
    train_lm.train(short, tmp_path, eval_every=2, data=data, progress=False, log=quiet)
    said = []
    longer = train_lm.make_config("mamba", "tiny", steps=6, **SMALL)
    res = train_lm.train(longer, tmp_path, eval_every=2, data=data, resume=True, progress=False,
                         log=said.append)
    assert [r["step"] for r in res["records"]] == list(range(1, 7))
    change = next(s for s in said if s.startswith("--steps 6 extends the run of 4 steps"))
    assert "now decays to step 6 instead of 4" in change and "at step 4 it is" in change
    meta = vg.load_metadata(tmp_path / train_lm.CHECKPOINT)
    assert meta["step"] == "6" and json.loads(meta["config"])["steps"] == 6   # its length
    past = train_lm.make_config("mamba", "tiny", steps=3, **SMALL)
    with pytest.raises(train_lm.ResumeError, match="at step 6, past --steps 3"):
        train_lm.train(past, tmp_path, eval_every=2, data=data, resume=True, progress=False,
                       log=quiet)


def test_a_run_far_too_big_for_the_backend_warns_with_an_estimate(data, tmp_path, monkeypatch):
    cfg = train_lm.make_config("transformer", "tiny", steps=2, **SMALL)
    assert train_lm.slow_run_warning(cfg, 53.0, 2000, "llvmpipe").startswith(
        "warning: at 53.00 s/step on llvmpipe, the 2000 remaining steps take about 29.4 h")
    assert train_lm.slow_run_warning(cfg, 0.01, 2000, "llvmpipe") is None
    monkeypatch.setattr(train_lm, "SLOW_RUN_S", 0.0)   # this machine's step, as if far too slow
    said = []
    train_lm.train(cfg, tmp_path, eval_every=2, data=data, progress=False, log=said.append)
    assert sum(s.startswith("warning: at ") and "tiny preset is too big" in s for s in said) == 1

