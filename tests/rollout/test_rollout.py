"""Sampling and batched generation with a shared-prompt KV cache (grpo/rollout/rollout.py,
grpo/rollout/sampling.py)."""

import pytest
import torch

from grpo.rollout.rollout import Rollout, decode_completions, prompt_positions, tokenize_prompts
from grpo.rollout.sampling import sample_next_tokens
from tests.tiny_lm import CPU, completion_logits, sample

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_top_k_one_is_greedy():
    logits = torch.tensor([[0.1, 2.0, 0.3], [5.0, 0.0, 4.9]])
    assert sample_next_tokens(logits, top_k=1)[0].tolist() == [1, 0]


def test_top_p_keeps_the_smallest_set_reaching_the_mass():
    probs = torch.tensor([[0.5, 0.3, 0.2]])  # mass before token 3 is 0.8 >= 0.7: dropped
    uniforms = torch.linspace(0.001, 1.0, 200)
    drawn = {int(sample_next_tokens(probs.log(), top_p=0.7, uniforms=u[None])[0]) for u in uniforms}
    assert drawn == {0, 1}


def test_low_temperature_concentrates_on_the_mode():
    logits = torch.tensor([[1.0, 0.5, 0.0]])
    uniforms = torch.linspace(0.001, 1.0, 50)
    drawn = [
        int(sample_next_tokens(logits, temperature=0.01, uniforms=u[None])[0]) for u in uniforms
    ]
    assert set(drawn) == {0}


def test_tokenize_prompts_pads_left_and_cuts_long_prompts_from_the_start(tokenizer):
    ids, mask = tokenize_prompts(
        tokenizer, ["1+1=", "123+456="], max_length=6, add_special_tokens=True, device=CPU
    )
    assert mask.tolist() == [[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]
    assert tokenizer.decode(ids[1]) == "3+456="  # BOS and "12" cut from the left
    assert prompt_positions(mask).tolist()[0] == [0, 0, 1, 2, 3, 4]


def test_generate_samples_g_completions_per_prompt_with_masks_and_truncation(model, tokenizer):
    rollout = sample(model, tokenizer, ["1+1=", "23+45="], g=3, max_new=5)
    assert rollout.completion_ids.shape[0] == 6 and rollout.num_generations == 3
    assert rollout.completion_ids.shape[1] <= 5
    for row, length, truncated in zip(
        rollout.completion_ids, rollout.lengths, rollout.is_truncated, strict=True
    ):
        ended_with_eos = int(row[length - 1]) == tokenizer.eos_token_id
        assert bool(truncated) == (not ended_with_eos)
        assert (row[length:] == tokenizer.pad_token_id).all()
        assert (row[: length - 1] != tokenizer.eos_token_id).all()


def test_generation_is_deterministic_per_seed(model, tokenizer):
    a = sample(model, tokenizer, ["1+1=", "9-3="], seed=5)
    b = sample(model, tokenizer, ["1+1=", "9-3="], seed=5)
    c = sample(model, tokenizer, ["1+1=", "9-3="], seed=6)
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert not torch.equal(a.completion_ids, c.completion_ids)


def test_rows_stop_at_eos_while_others_continue(model, tokenizer):
    # make "1" an extra end token: rows that draw it stop, the rest run to the limit
    one = tokenizer.convert_tokens_to_ids("1")
    rollout = sample(
        model, tokenizer, ["5+5=", "12+3="], g=8, max_new=12, eos=[one], temperature=3.0
    )
    lengths = rollout.lengths.tolist()
    assert min(lengths) < 12 and (~rollout.is_truncated).any()
    for row, n in zip(rollout.completion_ids.tolist(), lengths, strict=True):
        assert (row[n - 1] == one) or n == 12


def test_greedy_generation_matches_argmax_of_the_full_forward(model, tokenizer):
    """The decode loop (shared prompt cache, left padding, finished rows dropped) computes
    the same next-token distribution as one plain forward over prompt + completion."""
    one = tokenizer.convert_tokens_to_ids("1")
    rollout = sample(
        model,
        tokenizer,
        ["1+1=", "23+45=", "7="],
        g=2,
        max_new=8,
        top_k=1,
        eos=[tokenizer.eos_token_id, one],
    )
    best = completion_logits(model, rollout).argmax(-1) == rollout.completion_ids
    assert best[rollout.completion_mask.bool()].all()


def test_decode_drops_padding_and_eos(tokenizer):
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    two, three = tokenizer.convert_tokens_to_ids(["2", "3"])
    rollout = Rollout(
        torch.zeros(1, 1, dtype=torch.long),
        torch.ones(1, 1, dtype=torch.long),
        torch.tensor([[two, eos, pad], [three, two, three]]),
        torch.tensor([[1, 1, 0], [1, 1, 1]]),
        torch.tensor([False, True]),
        torch.zeros(2, 3),
    )
    assert decode_completions(tokenizer, rollout) == ["2", "323"]


def test_generation_reports_the_sampling_distributions_entropy(model, tokenizer):
    rollout = sample(model, tokenizer, ["1+1=", "23+45="], g=2, max_new=5, temperature=1.5)
    logp = torch.log_softmax(completion_logits(model, rollout).float() / 1.5, -1)  # (N, T, V)
    expected = -(logp.exp() * logp).sum(-1)  # (N, T)
    real = rollout.completion_mask.bool()
    torch.testing.assert_close(rollout.entropy[real], expected[real], atol=1e-4, rtol=0)
    assert (rollout.entropy[~real] == 0).all()


def test_select_groups_keeps_prompts_with_their_rows(model, tokenizer):
    rollout = sample(model, tokenizer, ["1+1=", "23+45=", "7="], g=2, max_new=3)
    picked = rollout.select_groups(torch.tensor([2, 0]))
    assert torch.equal(picked.prompt_ids, rollout.prompt_ids[[2, 0]])
    assert torch.equal(picked.completion_ids, rollout.completion_ids[[4, 5, 0, 1]])
    assert picked.num_generations == 2


def test_a_groups_samples_do_not_depend_on_the_groups_decoded_with_it(model, tokenizer):
    prompts = ["1+1=", "23+45=", "7=", "100-1="]
    knobs = dict(g=3, max_new=8, temperature=2.0, seeds=[11, 12, 13, 14])
    together = sample(model, tokenizer, prompts, **knobs)
    for size in (3, 6):  # one group at a time, two at a time
        batched = sample(model, tokenizer, prompts, generation_batch_size=size, **knobs)
        assert torch.equal(batched.completion_ids, together.completion_ids)
        assert torch.equal(batched.completion_mask, together.completion_mask)
        torch.testing.assert_close(batched.entropy, together.entropy, atol=1e-6, rtol=0)
    alone = sample(model, tokenizer, ["23+45="], g=3, max_new=8, temperature=2.0, seeds=[12])
    width = alone.completion_ids.shape[1]
    assert torch.equal(alone.completion_ids, together.completion_ids[3:6, :width])
    other_seed = sample(model, tokenizer, ["23+45="], g=3, max_new=8, temperature=2.0, seeds=[5])
    assert not torch.equal(other_seed.completion_ids, alone.completion_ids)
