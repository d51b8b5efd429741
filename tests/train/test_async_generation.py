"""Asynchronous GRPO on the native engine (grpo/rollout/async_source.py, grpo/engines/producer.py):
a producer thread samples with its own copy of the weights, at most max_staleness policy
versions behind the trainer.

With max_staleness 0 the producer samples step s only after the weights of update s - 1
reached it, so the run takes exactly the synchronous steps: the same samples, and the same
weights to fp32 noise (the importance correction weighs by the copy's log-probs, which
equal the trainer's to that noise). A trainer slower than the producer meets the bound,
and never passes it. Versions and counts are asserted, never wall-clock times.
"""

import threading

import pytest
import torch

from grpo.data.example import Example
from grpo.rollout.async_source import AsyncSource, split_stale
from grpo.rollout.dynamic_sampling import Batch, Filled
from grpo.rollout.rollout import Rollout
from grpo.training.trainer import TrainingLoop
from tests.training.test_trainer import run, tiny_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ASYNC_KEYS = {
    "async/staleness_mean",
    "async/staleness_max",
    "async/dropped_stale",
    "async/queue_depth",
    "async/generator_busy",
    "async/trainer_busy",
}


def texts(report):
    return [[c.text for c in g.completions] for g in report.groups]


def test_max_staleness_zero_takes_exactly_the_synchronous_steps(tmp_path, grpo_cache_dir):
    knobs = dict(max_steps=3, logging={"max_groups_per_step": 2})
    _, sync_reports, _, sync_trainer = run(tiny_spec(**knobs), tmp_path / "sync", grpo_cache_dir)
    spec = tiny_spec(**knobs, async_generation=True, max_staleness=0)
    _, async_reports, _, async_trainer = run(spec, tmp_path / "async", grpo_cache_dir)

    assert [r.step for r in async_reports] == [1, 2, 3]
    for expected, got in zip(sync_reports, async_reports, strict=True):
        assert texts(got) == texts(expected)  # the same samples, step by step
        assert [g.rewards for g in got.groups] == [g.rewards for g in expected.groups]
        assert ASYNC_KEYS <= got.scalars.keys()
        assert got.scalars["async/staleness_max"] == 0 and got.scalars["async/dropped_stale"] == 0
        assert got.scalars["async/queue_depth"] == 0  # one step ahead at most: none waits
        # the copy's log-probs are the trainer's, to fp32 noise
        assert got.scalars["generation/logprob_diff_max"] < 1e-4
        assert got.scalars["loss"] == pytest.approx(expected.scalars["loss"], rel=1e-4, abs=1e-6)
        # each kept completion carries its sampler's per-token log-probs (the synchronous
        # native engine samples with the policy itself and reports none)
        for group, sync_group in zip(got.groups, expected.groups, strict=True):
            pairs = zip(group.completions or [], sync_group.completions or [], strict=True)
            for c, sync_c in pairs:
                assert sync_c.sampler_logps is None
                assert c.sampler_logps is not None and len(c.sampler_logps) == c.num_tokens
                assert all(-100 < v <= 0 for v in c.sampler_logps)
    sync_weights = dict(sync_trainer.model.named_parameters())
    for name, value in async_trainer.model.named_parameters():
        torch.testing.assert_close(value, sync_weights[name], rtol=1e-5, atol=1e-6)


def test_a_slow_trainer_meets_the_staleness_bound_and_never_passes_it(tmp_path, grpo_cache_dir):
    """Before each step the trainer waits until the producer has queued every batch the
    bound lets it: the producer is as far ahead as it may be, so from step 3 on every
    group is exactly max_staleness versions old, and none is dropped."""
    bound, steps = 2, 6
    spec = tiny_spec(max_steps=steps, async_generation=True, max_staleness=bound)
    trainer = TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir)
    source = trainer.source
    assert isinstance(source, AsyncSource)
    reports = []

    def slow_trainer() -> bool:
        step = len(reports) + 1  # the step about to be taken
        ahead = min(bound + 1, steps - step + 1)  # the batches the bound lets it queue
        with source.changed:
            source.changed.wait_for(lambda: len(source.ready) >= ahead)
        return False

    trainer.fit(reports.append, should_stop=slow_trainer)

    lags = [r.scalars["async/staleness_max"] for r in reports]
    assert lags == [0, 1, 2, 2, 2, 2]  # the bound is met and never passed
    assert [r.scalars["async/staleness_mean"] for r in reports] == lags  # one version a batch
    assert all(r.scalars["async/dropped_stale"] == 0 for r in reports)
    for report, lag in zip(reports, lags, strict=True):  # each kept completion's version
        versions = {c.policy_version for c in report.groups[0].completions}
        assert versions == {report.step - 1 - lag}
    # what still waited when the trainer took each step: all the bound allows, then the tail
    assert [r.scalars["async/queue_depth"] for r in reports] == [2, 2, 2, 2, 1, 0]


def test_a_fast_trainer_stays_within_the_bound(tmp_path, grpo_cache_dir):
    """A trainer that never waits on purpose: whatever the threads' timing, no group it
    trains is older than the bound, and every step's prompts are trained once."""
    bound = 1
    spec = tiny_spec(max_steps=5, async_generation=True, max_staleness=bound)
    started = threading.active_count()
    _, reports, _, _ = run(spec, tmp_path, grpo_cache_dir)
    assert [r.step for r in reports] == [1, 2, 3, 4, 5]
    for report in reports:
        assert report.scalars["async/staleness_max"] <= bound
        assert report.scalars["async/dropped_stale"] == 0
        assert report.scalars["async/queue_depth"] <= bound + 1
        assert 0 <= report.scalars["async/generator_busy"] <= 1
        assert 0 <= report.scalars["async/trainer_busy"] <= 1
        assert len(report.groups) == spec.prompts_per_step
    assert threading.active_count() <= started  # the producer ended with the run


def test_groups_staler_than_the_bound_are_dropped_and_shown_as_dropped() -> None:
    """Three groups of G=2 sampled by versions 3, 1 and 2, trained at step 5 (version 4)
    with max_staleness 2: lags 1, 3, 2, so the middle group leaves the batch for its
    dropped groups, and the staleness of the two kept is [1, 2]."""
    ids = torch.zeros((6, 1), dtype=torch.long)
    rollout = Rollout(
        torch.zeros((3, 1), dtype=torch.long), torch.ones((3, 1), dtype=torch.long), ids,
        torch.ones_like(ids), torch.zeros(6, dtype=torch.bool), None,
        policy_version=torch.tensor([3, 3, 1, 1, 2, 2]),
    )  # fmt: skip
    examples = [Example(id=f"p{i}", prompt=f"q{i}", answer="") for i in range(3)]
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    batch = Batch(examples, ["q0", "q1", "q2"], rollout, ["a"] * 6, {"r": [1.0] * 6},
                  rewards, rewards - 0.5)  # fmt: skip

    filled, lag, dropped = split_stale(Filled(batch, None, 1), 5, max_staleness=2)

    assert dropped == 1 and lag.tolist() == [1, 2]
    assert [e.id for e in filled.kept.examples] == ["p0", "p2"]
    assert filled.kept.rollout.policy_version.tolist() == [3, 3, 2, 2]
    assert filled.dropped is not None and [e.id for e in filled.dropped.examples] == ["p1"]
    assert filled.dropped.rewards.tolist() == [[0.0, 1.0]]
    same, lag, dropped = split_stale(Filled(batch, None, 1), 5, max_staleness=3)
    assert same.kept is batch and same.dropped is None and dropped == 0
    assert lag.tolist() == [1, 3, 2]


def test_a_stop_with_a_full_queue_resumes_every_prompt_once(tmp_path, grpo_cache_dir):
    """Stopped after step 2 with later steps already queued, a resumed run samples those
    steps again (the queue is not kept) from the checkpoint's weights: the steps' prompts
    are the uninterrupted run's, none skipped, none twice."""
    spec = tiny_spec(max_steps=4, save_steps=2, async_generation=True, max_staleness=2)
    _, straight, _, _ = run(spec, tmp_path / "straight", grpo_cache_dir)
    first, logs = [], []
    trainer = TrainingLoop(spec, workdir=tmp_path / "resumed", cache_dir=grpo_cache_dir)
    trainer.fit(first.append, should_stop=lambda: len(first) >= 2)
    second = []
    TrainingLoop(
        spec, workdir=tmp_path / "resumed", cache_dir=grpo_cache_dir,
        log=lambda level, message: logs.append(message),
    ).fit(second.append)  # fmt: skip

    assert any("resumed from checkpoint at step 2" in m for m in logs)
    assert [r.step for r in first + second] == [1, 2, 3, 4]

    def prompts(reports):
        return [[g.prompt_id for g in r.groups] for r in reports]

    assert prompts(first + second) == prompts(straight)
    assert all(r.scalars["async/staleness_max"] <= 2 for r in second)


def test_the_producer_takes_the_weights_every_weight_sync_steps_updates(tmp_path, grpo_cache_dir):
    """weight_sync_steps 2: the producer's copy takes the trainer's weights after updates 2
    and 4 only, so every completion was sampled by version 0, 2 or 4, at most
    max_staleness (1, the least the spec allows) behind."""
    spec = tiny_spec(max_steps=5, async_generation=True, max_staleness=1, weight_sync_steps=2,
                     logging={"max_groups_per_step": 2})  # fmt: skip
    _, reports, _, _ = run(spec, tmp_path, grpo_cache_dir)
    assert [r.step for r in reports] == [1, 2, 3, 4, 5]
    for report in reports:
        versions = {c.policy_version for g in report.groups for c in g.completions}
        assert versions <= {0, 2, 4} and len(versions) == 1
        (version,) = versions
        assert report.scalars["async/staleness_max"] == report.step - 1 - version <= 1
        assert report.scalars["async/dropped_stale"] == 0
