"""grpo/rollout/scored_groups.py: training's rounds and held-out evaluation go one path from
prompts to scored groups, and differ only by their GroupPass (engine, rewards, sampling,
G, the seeds of their streams)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.engines.engine import GenerationRequest
from grpo.report.timing import StepClock
from grpo.rollout.rollout import Rollout
from grpo.rollout.sampling import eval_seed, group_seed
from grpo.spec import JobSpec
from grpo.spec.generation import GREEDY
from grpo.training.trainer import TrainingLoop

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def record_requests(engine: object, monkeypatch: pytest.MonkeyPatch) -> list[GenerationRequest]:
    """The requests `engine` is asked from now on (it still answers them)."""
    requests: list[GenerationRequest] = []
    generate = engine.generate  # type: ignore[attr-defined]

    def recording(request: GenerationRequest) -> Rollout:
        requests.append(request)
        return generate(request)

    monkeypatch.setattr(engine, "generate", recording)
    return requests


def test_a_round_and_an_eval_differ_by_their_pass_only(
    tmp_path: Path, grpo_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = JobSpec(
        model="builtin:tiny-arith", max_steps=2, prompts_per_step=2, num_generations=3,
        max_completion_length=4, save_steps=0, seed=5, eval={"max_examples": 3},
    )  # fmt: skip
    trainer = TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir)
    assert trainer.engine is trainer.eval_engine  # native, no tools: one engine
    requests = record_requests(trainer.engine, monkeypatch)

    batch = trainer.rounds.sample_round(3, 1, StepClock())
    (trained,) = requests
    assert list(trained.seeds) == [group_seed(5, 3, 0, 1), group_seed(5, 3, 1, 1)]
    assert trained.num_generations == 3 and trained.sampling == spec.sampling
    assert [r["answer"] for r in trained.records] == [e.answer for e in batch.examples]
    assert batch.rewards.shape == (2, 3) and len(batch.texts) == 6

    report = trainer._evaluate(1)  # loads the eval split, then heldout.evaluate
    (_, evaluated) = requests
    assert list(evaluated.seeds) == [eval_seed(5, 0), eval_seed(5, 1), eval_seed(5, 2)]
    assert evaluated.num_generations == 1 and evaluated.sampling == GREEDY
    assert [row["prompt_id"] for row in report.examples] == [e.id for e in trainer.eval_examples]
