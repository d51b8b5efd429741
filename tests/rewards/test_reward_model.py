"""`model` rewards with a small sequence classifier built here (grpo/rewards/model.py)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForSequenceClassification, LlamaConfig

from grpo.data.example import Example
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.rewards.batch import RewardBatch
from grpo.rewards.classifier import RewardModel
from grpo.rewards.scoring import Rewarder
from grpo.spec import ModelReward


def build_classifier(path):
    """A 2-label Llama classifier with the built-in character tokenizer, saved to `path`."""
    tokenizer = build_char_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_labels=2,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    AutoModelForSequenceClassification.from_config(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def test_batched_scores_equal_one_at_a_time_and_the_model_is_frozen(tmp_path):
    path = build_classifier(tmp_path / "rm")
    entry = ModelReward(model=str(path), batch_size=3, label_index=1)
    model = RewardModel(entry, device="cpu", cache_dir=tmp_path, roots=None)
    texts = ["12+3=15", "7", "a much longer completion text", "", "99-9=90"]
    batched = model.score_texts(texts)
    single = [model.score_texts([t])[0] for t in texts]
    assert len(batched) == 5 and len(set(batched)) > 1
    torch.testing.assert_close(torch.tensor(batched), torch.tensor(single), atol=1e-5, rtol=0)
    assert not model.model.training
    assert not any(p.requires_grad for p in model.model.parameters())
    chat = [{"role": "user", "content": "12+3="}]  # chat-message prompts read as their turns
    assert model.text(chat, "15") == model.text("12+3=", "15") == "12+3=15"


def test_rewarder_scores_prompt_plus_completion_per_label(tmp_path):
    path = build_classifier(tmp_path / "rm")
    rewarder = Rewarder([ModelReward(model=str(path), label="rm")], cache_dir=tmp_path)
    batch = RewardBatch(
        run_id="r",
        step=1,
        examples=[Example(id="q", prompt="1+1=", answer="2")],
        prompts=["1+1="],
        completions=["2", "3"],
        num_tokens=[1, 1],
    )
    scores = rewarder.score(batch).scores["rm"]
    direct = RewardModel(ModelReward(model=str(path)), device="cpu", cache_dir=tmp_path, roots=None)
    assert scores == direct.score_texts([direct.text("1+1=", "2"), direct.text("1+1=", "3")])


def test_a_reward_model_that_is_neither_a_hub_id_nor_a_path_is_refused_in_the_spec() -> None:
    """Schemathesis found `"model": "\\u0002\\u00fa"` a 500 at submit: the spec refuses it."""
    from pydantic import ValidationError

    from grpo.spec import JobSpec

    with pytest.raises(ValidationError, match="neither a Hugging Face model id") as caught:
        JobSpec(model="builtin:tiny", rewards=[{"name": "model", "model": "\x02\xfa"}])
    assert caught.value.errors()[0]["loc"][:3] == ("rewards", 0, "model")
