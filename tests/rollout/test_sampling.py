"""Repetition penalty and min-p (grpo/rollout/sampling.py) by hand."""

import torch

from grpo.rollout.sampling import min_p_filter, penalize_repetition, sample_next_tokens


def test_repetition_penalty_divides_positive_and_multiplies_negative_seen_logits():
    logits = torch.tensor([[2.0, -1.0, 0.5]])
    seen = torch.tensor([[True, True, False]])
    out = penalize_repetition(logits, seen, 2.0)
    torch.testing.assert_close(out, torch.tensor([[1.0, -2.0, 0.5]]))


def test_min_p_drops_tokens_below_min_p_times_the_top_probability():
    scores = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
    kept = min_p_filter(scores, 0.2)  # cut at 0.2 * 0.5 = 0.1: only 0.05 goes
    assert torch.isfinite(kept).tolist() == [[True, True, True, False]]


def test_sampling_never_draws_a_filtered_or_penalised_away_token():
    logits = torch.tensor([[3.0, 2.9, -5.0]]).repeat(200, 1)
    seen = torch.tensor([[True, False, False]]).repeat(200, 1)
    uniforms = torch.linspace(1e-6, 1.0, 200)
    # penalty 100 sends token 0 to 0.03 while token 1 stays at 2.9: min-p 0.5 leaves only 1
    tokens, _ = sample_next_tokens(
        logits, min_p=0.5, repetition_penalty=100.0, seen=seen, uniforms=uniforms
    )
    assert tokens.eq(1).all()


def test_inverse_cdf_maps_each_uniform_to_the_token_whose_mass_holds_it():
    logits = torch.tensor([0.5, 0.3, 0.2, 0.0]).log().expand(6, 4)  # last token impossible
    uniforms = torch.tensor([1e-9, 0.5, 0.51, 0.8, 0.81, 1.0])
    assert sample_next_tokens(logits, uniforms=uniforms)[0].tolist() == [0, 0, 1, 1, 2, 2]


def test_the_entropy_is_of_the_tempered_distribution_before_penalty_and_filters():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0], [0.5, 0.5, 3.0, 0.0]])
    seen = torch.tensor([[True, False, False, False], [False, False, True, False]])
    logp = torch.log_softmax(logits / 1.5, -1)
    expected = -(logp.exp() * logp).sum(-1)  # (2,)
    for filters in ({}, {"top_k": 2, "top_p": 0.5, "min_p": 0.3}, {"repetition_penalty": 3.0}):
        _, entropy = sample_next_tokens(logits, temperature=1.5, seen=seen, **filters)
        torch.testing.assert_close(entropy, expected, atol=1e-6, rtol=0)


def test_top_k_1_is_greedy_and_breaks_ties_by_the_lowest_id_whatever_the_draw():
    logits = torch.tensor([[0.5, 2.0, 2.0, 1.0], [3.0, 0.0, 3.0, 3.0]])  # ties: 1=2, 0=2=3
    for draw in (1e-6, 0.5, 1.0):  # with the draw, the later tied token would win at 1.0
        uniforms = torch.full((2,), draw)
        picked, _ = sample_next_tokens(logits, top_k=1, temperature=0.7, uniforms=uniforms)
        assert picked.tolist() == [1, 0]
