"""Lab checkpoints: posembed_model.json + model.safetensors, reloaded by build_model."""

from __future__ import annotations

import json

import pytest
import torch

from posembed.lab.tasks import make_task
from posembed.lab.training.checkpoint import CONFIG_NAME, WEIGHTS_NAME, is_checkpoint, load_checkpoint, save_checkpoint
from posembed.lab.training.train import build_trial_model
from tests.helpers import assert_close
from tests.lab.conftest import tiny_trial


@pytest.mark.parametrize(
    "cfg",
    [
        tiny_trial(task="order", scheme="learned", combine="concat", context=6),
        tiny_trial(task="copy", scheme="learned", untied=True),
        tiny_trial(task="copy", scheme="rope"),
        tiny_trial(task="copy", scheme="alibi", inject="once"),
        tiny_trial(task="copy", scheme="nope"),
    ],
    ids=["encoder-concat", "untied", "rope", "alibi", "nope"],
)
def test_round_trip_gives_the_same_outputs(tmp_path, cfg):
    task = make_task(cfg)
    model = build_trial_model(cfg, task).eval()
    with torch.no_grad():  # make every parameter non-default so a skipped tensor would show
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    folder = save_checkpoint(model, tmp_path / "ckpt", {"task": cfg.task, "trial": cfg.trial_id, "step": 7})
    assert is_checkpoint(folder) and (folder / WEIGHTS_NAME).is_file()
    document = json.loads((folder / CONFIG_NAME).read_text())
    assert document["model"] == model.config_dict() and document["step"] == 7
    loaded, meta = load_checkpoint(folder)
    assert meta == {"task": cfg.task, "trial": cfg.trial_id, "step": 7}
    ids = task.train_batch(torch.Generator().manual_seed(0), 3).input_ids
    with torch.no_grad():
        assert_close(loaded(ids), model(ids))
    for name, tensor in model.state_dict().items():
        assert_close(loaded.state_dict()[name], tensor, msg=name)


def test_bad_checkpoints(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a posembed lab checkpoint"):
        load_checkpoint(tmp_path)
    (tmp_path / CONFIG_NAME).write_text("{}")
    with pytest.raises(FileNotFoundError, match="has no model.safetensors"):
        load_checkpoint(tmp_path)
    (tmp_path / WEIGHTS_NAME).write_bytes(b"")
    (tmp_path / CONFIG_NAME).write_text("{broken")
    with pytest.raises(ValueError, match="is not valid JSON"):
        load_checkpoint(tmp_path)
    model = build_trial_model(tiny_trial(), make_task(tiny_trial()))
    with pytest.raises(ValueError, match="must not contain the key 'model'"):
        save_checkpoint(model, tmp_path / "x", {"model": 1})


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_corrupt_weights_are_a_clear_error(tmp_path, damage):
    cfg = tiny_trial()
    folder = save_checkpoint(build_trial_model(cfg, make_task(cfg)), tmp_path, {"task": "copy"})
    weights = folder / WEIGHTS_NAME
    data = weights.read_bytes()
    weights.write_bytes(b"not safetensors at all" * 10 if damage == "garbage" else data[: len(data) // 2])
    with pytest.raises(ValueError, match=f"'{weights}' is not a readable safetensors file: "):
        load_checkpoint(folder)


def test_concurrent_saves_into_one_folder_all_succeed(tmp_path):
    """Writers of the same checkpoint never share a temporary file: every save succeeds and the
    weights left are one whole save."""
    import threading

    cfg = tiny_trial(task="copy", scheme="learned")
    task = make_task(cfg)
    models = []
    for seed in range(4):
        torch.manual_seed(seed)
        models.append(build_trial_model(cfg, task).eval())
    errors = []

    def writer(model, seed):
        try:
            for step in range(15):
                save_checkpoint(model, tmp_path, {"task": "copy", "trial": str(seed), "step": step})
        except Exception as error:  # noqa: BLE001 - collected for the assertion
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(m, i)) for i, m in enumerate(models)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    loaded, _ = load_checkpoint(tmp_path)
    head = loaded.head.weight
    assert sum(torch.equal(head, m.head.weight) for m in models) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [WEIGHTS_NAME, CONFIG_NAME]


def test_checkpoint_files_follow_the_umask(tmp_path):
    import os
    import stat

    cfg = tiny_trial(task="copy", scheme="learned")
    before = os.umask(0o022)
    try:
        save_checkpoint(build_trial_model(cfg, make_task(cfg)), tmp_path, {"task": "copy"})
    finally:
        os.umask(before)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {WEIGHTS_NAME: 0o644, CONFIG_NAME: 0o644}
