"""Log-probs of sampled tokens: shared prompts, micro-batches of rows, and the LM head in
chunks with no full-vocabulary tensor kept (grpo/training/logprobs.py, grpo/models/lm_head.py)."""

import pytest
import torch
import transformers

from grpo.models import lm_head
from grpo.models.lm_head import token_logps
from grpo.rollout.rollout import Rollout, row_slices, tokenize_prompts
from grpo.training.logprobs import completion_logps
from grpo.training.reference import ReferencePolicy
from tests.tiny_lm import CPU, completion_logits, sample, tiny_causal_lm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_shared_prompt_logps_equal_full_sequence_logps_and_gradients(model, tokenizer):
    rollout = sample(model, tokenizer, ["1+1=", "23+45=", "7="], g=3, max_new=6, temperature=2.0)
    mask = rollout.completion_mask.bool()
    shared = completion_logps(model, rollout, temperature=0.7)
    full = completion_logps(model, rollout, temperature=0.7, share_prompt=False)
    torch.testing.assert_close(shared[mask], full[mask], atol=1e-5, rtol=0)
    assert (shared[mask] < 0).all()
    grads = []
    for logps in (shared, full):
        model.zero_grad()
        (logps * mask).sum().backward()
        grads.append(model.model.embed_tokens.weight.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-4, rtol=1e-4)


def test_logps_do_not_depend_on_other_prompts_padding(model, tokenizer):
    rollout = sample(model, tokenizer, ["1+1=", "123+456="], g=2, max_new=4)
    alone_ids, alone_mask = tokenize_prompts(
        tokenizer, ["1+1="], max_length=32, add_special_tokens=True, device=CPU
    )
    alone = Rollout(
        alone_ids,
        alone_mask,
        rollout.completion_ids[:2],
        rollout.completion_mask[:2],
        rollout.is_truncated[:2],
        rollout.entropy[:2],
    )
    batched = completion_logps(model, rollout)
    single = completion_logps(model, alone)
    mask = rollout.completion_mask[:2].bool()
    torch.testing.assert_close(batched[:2][mask], single[mask], atol=1e-5, rtol=0)


def test_row_slices_cover_every_row_once_in_order():
    assert row_slices(12, 5) == [slice(0, 5), slice(5, 10), slice(10, 12)]
    assert row_slices(12, None) == [slice(0, 12)]
    assert row_slices(3, 8) == [slice(0, 3)]


@pytest.mark.parametrize("share_prompt", [True, False])
def test_rows_scored_in_pieces_equal_the_whole_with_groups_split(model, tokenizer, share_prompt):
    rollout = sample(model, tokenizer, ["1+1=", "23+45=", "7="], g=4, max_new=6, temperature=2)
    mask = rollout.completion_mask.bool()
    kwargs = dict(temperature=0.7, share_prompt=share_prompt)
    whole = completion_logps(model, rollout, **kwargs)
    model.zero_grad()
    (whole * mask).sum().backward()
    expected = model.model.embed_tokens.weight.grad.clone()
    model.zero_grad()
    pieces = []
    for rows in row_slices(12, 5):  # [5:10] holds the end of group 1 and the start of group 2
        logps = completion_logps(model, rollout, rows=rows, **kwargs)
        (logps * mask[rows]).sum().backward()
        pieces.append(logps.detach())
    torch.testing.assert_close(torch.cat(pieces), whole.detach(), atol=1e-5, rtol=0)
    assert (whole[~mask] == 0).all()
    torch.testing.assert_close(model.model.embed_tokens.weight.grad, expected, atol=1e-5, rtol=1e-4)


def test_chunked_lm_head_gives_the_log_softmax_entropy_and_their_gradients():
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 11, bias=False)  # V = 11
    hidden = torch.randn(10, 8, requires_grad=True)  # (K, H)
    tokens = torch.randint(0, 11, (10,))
    weights = torch.randn(2, 10)
    logp_all = torch.log_softmax(head(hidden) / 0.7, -1)  # (K, V)
    direct = logp_all.gather(-1, tokens[:, None]).squeeze(-1)
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    (direct * weights[0] + entropy * weights[1]).sum().backward()
    expected = (hidden.grad.clone(), head.weight.grad.clone())
    hidden.grad, head.weight.grad = None, None
    chunked, chunked_entropy = token_logps(
        hidden, head, tokens, temperature=0.7, with_entropy=True, chunk_tokens=3
    )  # 4 chunks, each recomputed in backward
    (chunked * weights[0] + chunked_entropy * weights[1]).sum().backward()
    torch.testing.assert_close(chunked, direct, atol=1e-6, rtol=0)
    torch.testing.assert_close(chunked_entropy, entropy, atol=1e-6, rtol=0)
    torch.testing.assert_close(hidden.grad, expected[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(head.weight.grad, expected[1], atol=1e-6, rtol=1e-5)


def saved_logits_rows(model, rollout, vocab):
    """The most rows of any (rows, V) tensor autograd keeps for backward."""
    most = 0

    def pack(t):
        nonlocal most
        if t.dim() >= 2 and t.shape[-1] == vocab:
            most = max(most, t.numel() // vocab)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logps = completion_logps(model, rollout)
    logps.sum().backward()
    return most


def test_no_full_vocabulary_logits_are_kept_for_backward(model, tokenizer, monkeypatch):
    rollout = sample(model, tokenizer, ["1+1=", "23+45="], g=4, max_new=6, temperature=2)
    tokens = int(rollout.completion_mask.sum())
    vocab = model.config.vocab_size
    assert saved_logits_rows(model, rollout, vocab) >= tokens  # one chunk: kept whole
    monkeypatch.setattr(lm_head, "LOGITS_BUDGET", 5 * vocab)  # 5 tokens' logits at once
    assert saved_logits_rows(model, rollout, vocab) == 0  # recomputed chunk by chunk
    model.zero_grad()


def test_the_reference_pass_in_micro_batches_equals_one_pass(model, tokenizer):
    rollout = sample(model, tokenizer, ["1+1=", "23+45=", "7="], g=4, max_new=6, temperature=2)
    reference = ReferencePolicy(model)
    whole = reference.logps(model, rollout, temperature=0.7, micro_batch_size=None)
    pieces = reference.logps(model, rollout, temperature=0.7, micro_batch_size=5)
    torch.testing.assert_close(pieces, whole, atol=1e-5, rtol=0)
    assert whole.shape == rollout.completion_ids.shape and not whole.requires_grad


HEAD_TRANSFORMS = {
    "llama": ("LlamaConfig", {}),
    "cohere_logit_scale": ("CohereConfig", {"logit_scale": 3.0}),  # logits * 3
    "granite_logits_scaling": ("GraniteConfig", {"logits_scaling": 0.25}),  # logits / 0.25
    "gemma2_softcapping": ("Gemma2Config", {"final_logit_softcapping": 1.0, "head_dim": 8}),
}


@pytest.mark.parametrize("name", list(HEAD_TRANSFORMS))
def test_logps_are_those_of_the_models_own_logits_whatever_follows_its_head(tokenizer, name):
    """Cohere and Granite scale the head's logits and Gemma 2 caps them in their forward:
    the chunked head must do the same, or the ratio compares the wrong distributions."""
    config_class, knobs = HEAD_TRANSFORMS[name]
    model = tiny_causal_lm(tokenizer, getattr(transformers, config_class), **knobs)
    rollout = sample(model, tokenizer, ["1+1=", "23+45="], g=2, max_new=5, temperature=1.3)
    expected = torch.log_softmax(completion_logits(model, rollout).float() / 1.3, -1)
    expected = expected.gather(-1, rollout.completion_ids[..., None]).squeeze(-1)  # (N, T)
    with torch.no_grad():
        logps = completion_logps(model, rollout, temperature=1.3)
    real = rollout.completion_mask.bool()
    torch.testing.assert_close(logps[real], expected[real], atol=1e-5, rtol=0)
