"""Stop strings (grpo/rollout/stopping.py): the decode loop's tail check stops exactly where a
full decode of the completion would first contain a stop string."""

from __future__ import annotations

import pytest
import torch

from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.rollout.rollout import decode_completions
from grpo.rollout.stopping import StopStrings, first_stop
from tests.tiny_lm import sample


def first_hit_step(stopper: StopStrings, ids: list[int]) -> int | None:
    """The 1-based step at which the decode loop would stop this completion."""
    for t in range(1, len(ids) + 1):
        if bool(stopper.hits(torch.tensor([ids[:t]]))[0]):
            return t
    return None


def full_decode_step(tokenizer, ids: list[int], stops: list[str]) -> int | None:
    for t in range(1, len(ids) + 1):
        if any(s in tokenizer.decode(ids[:t], skip_special_tokens=True) for s in stops):
            return t
    return None


def test_character_tokens_stop_on_the_token_that_completes_the_string():
    tokenizer = build_char_tokenizer()
    ids = tokenizer("x=12</answer> more", add_special_tokens=False)["input_ids"]
    stopper = StopStrings(tokenizer, ["</answer>", "\n\n"])
    assert first_hit_step(stopper, ids) == len("x=12</answer>")
    # the full stop string, and one character short then padding (a special token: skipped)
    rows = torch.tensor([ids[:13], ids[:12] + [tokenizer.pad_token_id]])
    assert stopper.hits(rows).tolist() == [True, False]


@pytest.mark.parametrize(
    "text",
    ["The sum is 1234.\n\nUser: next", "naïve café → done. Human: hi", "<think>ok</think> Human:"],
)
def test_byte_level_bpe_stops_where_a_full_decode_first_contains_the_string(small_tokenizer, text):
    tokenizer = small_tokenizer
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    stops = ["\n\nUser:", " Human:", "→"]
    expected = full_decode_step(tokenizer, ids, stops)
    assert expected is not None
    assert first_hit_step(StopStrings(tokenizer, stops), ids) == expected


def test_first_stop_names_the_string_that_ended_the_text():
    assert first_stop("a</b>c\n\n", ["\n\n", "</b>"]) == "</b>"
    assert first_stop("no stop here", ["</b>"]) is None
    with pytest.raises(ValueError):
        StopStrings(build_char_tokenizer(), [""])


@pytest.mark.usefixtures("one_torch_thread")
def test_generation_ends_at_the_first_stop_string_and_keeps_it(model, tokenizer):
    # the same per-group streams with and without stop strings: a stopped completion is the
    # unstopped one cut right after its first stop string, and is not truncated
    prompts = ["5+5=", "12+3="]
    kwargs = dict(g=8, max_new=12, temperature=3.0)
    free = sample(model, tokenizer, prompts, **kwargs)
    stops = ["5", "J", "?J"]  # "?J" ends where its "J" does: the cut is the same
    cut = sample(model, tokenizer, prompts, stop=StopStrings(tokenizer, stops), **kwargs)
    free_texts = decode_completions(tokenizer, free)
    cut_texts = decode_completions(tokenizer, cut)
    stopped = 0
    for i, (whole, text) in enumerate(zip(free_texts, cut_texts, strict=True)):
        hit = first_stop(whole, stops)
        if hit is None:
            assert text == whole and bool(cut.is_truncated[i]) == bool(free.is_truncated[i])
            continue
        stopped += 1
        assert text == whole[: whole.find(hit) + len(hit)] and text.endswith(hit)
        assert not bool(cut.is_truncated[i])
    assert stopped > 0


@pytest.mark.usefixtures("one_torch_thread")
def test_a_run_reports_stop_as_the_finish_reason_with_the_string(tmp_path, grpo_cache_dir):
    from tests.training.test_trainer import run, tiny_spec

    stops = list("aeiou0123456")  # a random model's text meets one within a few characters
    spec = tiny_spec(stop=stops, logging={"max_groups_per_step": 2}, max_steps=1)
    _, reports, _, _ = run(spec, tmp_path, grpo_cache_dir)
    completions = [c for g in reports[0].groups for c in g.completions]
    stopped = [c for c in completions if c.finish_reason == "stop"]
    assert stopped, [c.text for c in completions]
    for c in stopped:
        assert c.stop in stops and c.text.endswith(c.stop) and not c.is_truncated
        assert not any(s in c.text[:-1] for s in stops)  # the first one ended it
    for c in completions:
        if c.finish_reason == "length":
            assert not any(s in c.text for s in stops) and c.is_truncated
