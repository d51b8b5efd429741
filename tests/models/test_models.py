"""grpo/models/loading.py and grpo/models/char_tokenizer.py: the built-in model loads like any
hub model."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from grpo.models.builtin_names import TINY_VERSION
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.models.loading import load_policy, materialise, pick_device, supports_bf16


def test_char_tokenizer_round_trips_text_through_save_and_reload(tmp_path: Path) -> None:
    text = "12+34=46\n  a b~{prompt}"
    tokenizer = build_char_tokenizer()
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    ids = reloaded(text)["input_ids"]
    assert ids == tokenizer(text)["input_ids"]
    assert ids[0] == reloaded.bos_token_id and len(ids) == len(text) + 1  # one id per char
    assert reloaded.decode(ids, skip_special_tokens=True) == text
    assert reloaded.padding_side == "left"
    assert not reloaded.chat_template


def test_char_tokenizer_pads_on_the_left() -> None:
    batch = build_char_tokenizer()(["1+1=", "10+10="], padding=True)
    assert batch["attention_mask"][0] == [0, 0, 1, 1, 1, 1, 1]
    assert batch["input_ids"][0][:2] == [0, 0]  # pad id 0


def test_builtin_tiny_loads_through_auto_classes_and_generates(tmp_path: Path) -> None:
    model, tokenizer = load_policy("builtin:tiny", cache_dir=tmp_path, progress=False)
    assert (tmp_path / f"builtin-tiny-{TINY_VERSION}" / "config.json").is_file()
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.tie_word_embeddings
    batch = tokenizer(["12+3=", "1+1="], return_tensors="pt", padding=True)
    out = model.generate(**batch, max_new_tokens=4, do_sample=True)
    assert out.shape[0] == 2
    assert batch["input_ids"].shape[1] < out.shape[1] <= batch["input_ids"].shape[1] + 4
    local_dir = str(tmp_path / f"builtin-tiny-{TINY_VERSION}")
    again, _ = load_policy(local_dir, cache_dir=tmp_path, progress=False)
    torch.testing.assert_close(again.lm_head.weight, model.lm_head.weight, rtol=0, atol=0)


def test_builtin_tiny_is_seeded(tmp_path: Path) -> None:
    first, _ = load_policy("builtin:tiny", cache_dir=tmp_path / "a", progress=False)
    second, _ = load_policy("builtin:tiny", cache_dir=tmp_path / "b", progress=False)
    torch.testing.assert_close(first.lm_head.weight, second.lm_head.weight, rtol=0, atol=0)


def test_missing_local_path_is_a_value_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nope"):
        load_policy(str(tmp_path / "nope"), cache_dir=tmp_path)


def test_local_dir_without_config_is_a_value_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="config.json"):
        load_policy(str(tmp_path / "empty"), cache_dir=tmp_path)


def _build_slowly(target: Path) -> None:
    (target / "config.json").write_text("{}")
    count = target.parent / "builds"
    with open(count, "a") as handle:
        handle.write("x")


def _materialise_in_child(target: str) -> None:
    materialise(Path(target), _build_slowly)


def test_materialise_builds_once_under_concurrency(tmp_path: Path) -> None:
    target = tmp_path / "model"
    ctx = multiprocessing.get_context("fork")
    children = [ctx.Process(target=_materialise_in_child, args=(str(target),)) for _ in range(3)]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    assert (target / "config.json").is_file()
    assert (tmp_path / "builds").read_text() == "x"
    assert not list(tmp_path.glob("model.tmp-*"))


def test_pick_device_resolves_auto_and_rejects_missing_gpus() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device("auto").type == expected
    assert pick_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError):
        pick_device(f"cuda:{torch.cuda.device_count()}")


def test_supports_bf16_answers_for_cpu() -> None:
    assert isinstance(supports_bf16("cpu"), bool)
