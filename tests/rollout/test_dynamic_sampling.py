"""Dynamic sampling (grpo/rollout/dynamic_sampling.py, DAPO): rounds until the step has signal."""

import pytest
import torch

from grpo.data.example import Example
from grpo.rollout.dynamic_sampling import Batch, fill_with_signal
from grpo.rollout.rollout import Rollout, concat_rollouts
from tests.training.test_trainer import run, tiny_spec

PAD = 0


def fake_batch(name: str, advantages: list[list[float]], *, prompt_width: int, width: int) -> Batch:
    """B groups of G completions; completion ids encode (round, group) for tracing."""
    b, g = len(advantages), len(advantages[0])
    rollout = Rollout(
        prompt_ids=torch.ones(b, prompt_width, dtype=torch.long),
        prompt_mask=torch.ones(b, prompt_width, dtype=torch.long),
        completion_ids=torch.arange(b * g).repeat_interleave(width).view(b * g, width) + 1,
        completion_mask=torch.ones(b * g, width, dtype=torch.long),
        is_truncated=torch.zeros(b * g, dtype=torch.bool),
        entropy=torch.ones(b * g, width),
    )
    examples = [Example(id=f"{name}{i}", prompt=f"{name}{i}", answer="") for i in range(b)]
    return Batch(
        examples,
        [e.prompt for e in examples],
        rollout,
        [f"{name}{i // g}" for i in range(b * g)],
        {"f": [0.0] * (b * g)},
        torch.tensor(advantages),
        torch.tensor(advantages),
    )


def test_rounds_run_until_the_target_has_signal_and_flat_groups_are_dropped():
    rounds = [
        fake_batch("a", [[0, 0], [1, -1], [0, 0]], prompt_width=2, width=3),
        fake_batch("b", [[1, -1], [0, 0], [2, -2]], prompt_width=4, width=1),
        fake_batch("c", [[1, -1], [1, -1], [1, -1]], prompt_width=1, width=1),
    ]
    asked = []
    filled = fill_with_signal(
        lambda r: asked.append(r) or rounds[r], target=3, max_rounds=3, pad_token_id=PAD
    )
    assert asked == [0, 1] and filled.rounds == 2
    assert [e.id for e in filled.kept.examples] == ["a1", "b0", "b2"]
    assert [e.id for e in filled.dropped.examples] == ["a0", "a2", "b1"]
    assert filled.kept.texts == ["a1", "a1", "b0", "b0", "b2", "b2"]
    # widths padded to the widest: prompts on the left, completions on the right, masked
    kept = filled.kept.rollout
    assert kept.prompt_ids.shape == (3, 4) and kept.prompt_mask[0].tolist() == [0, 0, 1, 1]
    assert kept.completion_ids.shape == (6, 3) and kept.completion_mask[2].tolist() == [1, 0, 0]
    assert kept.completion_ids[2].tolist() == [1, PAD, PAD]
    assert filled.kept.advantages.tolist() == [[1, -1], [1, -1], [2, -2]]


def test_reward_notes_follow_their_completions_into_kept_and_dropped():
    import dataclasses

    a = fake_batch("a", [[0, 0], [1, -1]], prompt_width=1, width=1)
    b = fake_batch("b", [[1, -1], [0, 0]], prompt_width=1, width=1)
    # completion 1 of a0 (dropped), completion 2 of a1 and completion 0 of b0 (kept)
    rounds = [
        dataclasses.replace(a, notes={1: "code: a0.1", 2: "code: a1.0"}),
        dataclasses.replace(b, notes={0: "code: b0.0"}),
    ]
    filled = fill_with_signal(lambda r: rounds[r], target=2, max_rounds=2, pad_token_id=PAD)
    assert [e.id for e in filled.kept.examples] == ["a1", "b0"]
    assert filled.kept.notes == {0: "code: a1.0", 2: "code: b0.0"}
    assert filled.dropped.notes == {1: "code: a0.1"}


def test_without_any_signal_the_first_round_trains_as_it_is():
    flat = fake_batch("a", [[0, 0], [0, 0]], prompt_width=1, width=1)
    filled = fill_with_signal(lambda r: flat, target=2, max_rounds=3, pad_token_id=PAD)
    assert filled.rounds == 3 and filled.kept is flat and filled.dropped is None


def test_concat_of_one_rollout_is_that_rollout():
    batch = fake_batch("a", [[1, -1]], prompt_width=2, width=2)
    joined = concat_rollouts([batch.rollout], pad_token_id=PAD)
    assert torch.equal(joined.completion_ids, batch.rollout.completion_ids)


@pytest.mark.usefixtures("one_torch_thread")
def test_the_trainer_trains_only_on_groups_with_signal_and_reports_the_dropped(
    tmp_path, grpo_cache_dir
):
    spec = tiny_spec(  # seed 2 samples flat groups at step 1, so some are dropped
        prompts_per_step=4,
        max_steps=2,
        seed=2,
        dynamic_sampling={"enabled": True, "max_rounds": 4},
    )
    _, reports, logs, _ = run(spec, tmp_path, grpo_cache_dir)
    for report in reports:
        trained = [g for g in report.groups if not g.is_dropped]
        dropped = [g for g in report.groups if g.is_dropped]
        scalars = report.scalars
        assert scalars["dynamic_sampling/dropped_groups"] == len(dropped)
        assert scalars["dynamic_sampling/signal_groups"] == sum(
            len(set(g.rewards)) > 1 for g in trained
        )
        assert all(len(set(g.rewards)) == 1 for g in dropped)
        assert [g.index for g in report.groups] == list(range(len(report.groups)))
        extra = (scalars["dynamic_sampling/rounds"] - 1) * 16
        assert scalars["dynamic_sampling/extra_completions"] == extra
        assert sum(report.reward_histogram) == 4 * len(trained)
        if scalars["dynamic_sampling/signal_groups"] == 4:
            assert len(trained) == 4
    assert any(r.scalars["dynamic_sampling/dropped_groups"] > 0 for r in reports)
