"""Held-out evaluation during training (grpo/eval/heldout.py): when it runs, that its accuracy
is the greedy accuracy grpo.eval.greedy computes on the same examples, and pass@k."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from grpo.data.loading import load_examples
from grpo.eval.greedy import greedy_accuracy
from grpo.eval.heldout import is_eval_step
from grpo.report import EvalReport, StepReport
from grpo.spec import JobSpec
from grpo.training.trainer import TrainingLoop

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def spec(**eval_knobs: object) -> JobSpec:
    return JobSpec(
        model="builtin:tiny-arith",
        max_steps=4,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=6,
        learning_rate=3e-4,
        save_steps=0,
        eval={"every_steps": 2, "max_examples": 12, **eval_knobs},
    )


@pytest.mark.parametrize(
    ("every", "max_steps", "evaluated"),
    [(2, 5, [0, 2, 4, 5]), (0, 3, [0, 3]), (3, 3, [0, 3]), (1, 2, [0, 1, 2])],
)
def test_eval_runs_at_step_0_every_k_and_at_the_end(
    every: int, max_steps: int, evaluated: list[int]
) -> None:
    s = JobSpec(max_steps=max_steps, eval={"every_steps": every})
    assert [step for step in range(max_steps + 1) if is_eval_step(s, step)] == evaluated
    assert not is_eval_step(JobSpec(max_steps=3), 0)


def test_eval_data_defaults_to_the_runs_source_split_test() -> None:
    data = JobSpec(data={"source": "builtin:arith", "prompt_field": "q"}, eval={}).eval_data
    assert (data.source, data.split, data.prompt_field) == ("builtin:arith", "test", "q")
    with pytest.raises(ValueError, match="num_samples > 1 needs temperature > 0"):
        JobSpec(eval={"num_samples": 4})


def fit(
    s: JobSpec,
    tmp_path: Path,
    cache_dir: Path,
    *,
    log: Callable[[str], object] = lambda message: None,
) -> tuple[TrainingLoop, list[EvalReport], list[StepReport]]:
    evals: list[EvalReport] = []
    steps: list[StepReport] = []
    trainer = TrainingLoop(s, workdir=tmp_path, cache_dir=cache_dir,
                      log=lambda level, message: log(message))  # fmt: skip
    trainer.fit(steps.append, on_eval=evals.append)
    return trainer, evals, steps


def test_eval_accuracy_is_the_greedy_accuracy_of_the_model_at_that_step(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    s = spec()
    trainer, evals, steps = fit(s, tmp_path, grpo_cache_dir)
    assert [e.step for e in evals] == [0, 2, 4]
    assert steps[1].scalars["eval/accuracy"] == evals[1].scalars["eval/accuracy"]
    assert "eval/accuracy" not in steps[0].scalars
    final = evals[-1]
    assert set(final.scalars) == {"eval/accuracy", "eval/reward", "eval/accuracy/mean"}

    examples = load_examples(s.eval_data)[:12]
    assert [row["prompt_id"] for row in final.examples] == [e.id for e in examples]
    passes = [
        greedy_accuracy(trainer.model, trainer.tokenizer, [e], s.data, max_new_tokens=6)
        for e in examples
    ]
    assert [row["passes"] for row in final.examples] == [[p == 1.0] for p in passes]
    assert 0 < sum(passes) < len(passes)  # a mix: the comparison can fail
    assert final.scalars["eval/accuracy"] == pytest.approx(sum(passes) / len(passes))


def test_sampled_eval_gives_pass_at_k(tmp_path: Path, grpo_cache_dir: Path) -> None:
    s = spec(num_samples=4, temperature=1.0, every_steps=0).model_copy(update={"max_steps": 1})
    logs: list[str] = []
    _, evals, _ = fit(s, tmp_path, grpo_cache_dir, log=logs.append)
    for report in evals:
        # the eval's log line says what it found, not only that it got through the examples
        scalars = report.scalars
        found = (
            f"eval at step {report.step}: 12/12 examples, accuracy {scalars['eval/accuracy']:.3f}, "
            f"pass@4 {scalars['eval/pass@4']:.3f}, reward {scalars['eval/reward']:.3f}"
        )
        assert found in logs, [m for m in logs if m.startswith("eval at")]
        passes = [row["passes"] for row in report.examples]
        assert all(len(p) == 4 for p in passes)  # type: ignore[arg-type]
        solved = sum(any(p) for p in passes) / len(passes)  # type: ignore[arg-type]
        assert report.scalars["eval/pass@4"] == pytest.approx(solved)
        share = sum(sum(p) for p in passes) / (4 * len(passes))  # type: ignore[arg-type]
        assert report.scalars["eval/accuracy"] == pytest.approx(share)


def test_eval_rewards_replace_the_runs_for_scoring_and_passing(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    regex = {"name": "regex", "pattern": r"^\d\d$"}  # two digits, nothing else
    s = spec(every_steps=0, rewards=[regex]).model_copy(update={"max_steps": 1})
    _, evals, steps = fit(s, tmp_path, grpo_cache_dir)
    final = evals[-1]
    assert set(final.scalars) == {"eval/accuracy", "eval/reward", "eval/regex/mean"}
    assert "rewards/accuracy/mean" in steps[0].scalars  # training kept its own rewards
    texts = [row["completions"][0] for row in final.examples]  # type: ignore[index]
    matches = [bool(re.fullmatch(r"\d\d", t)) for t in texts]
    assert 0 < sum(matches) < len(matches)
    # no accuracy-like reward: a pass is a total reward of logging.pass_threshold (1.0)
    assert [row["passes"] for row in final.examples] == [[m] for m in matches]
    assert final.scalars["eval/regex/mean"] == pytest.approx(sum(matches) / len(matches))


def test_holdout_fraction_evaluates_on_the_share_of_the_file_it_never_trains_on(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    data = tmp_path / "sums.jsonl"
    data.write_text("".join(f'{{"prompt": "{a}+{a}=", "answer": "{2 * a}"}}\n' for a in range(40)))
    base = spec(holdout_fraction=0.25).model_dump(exclude={"data"})
    s = JobSpec.model_validate({**base, "data": {"source": str(data)}})
    logs: list[str] = []
    trainer = TrainingLoop(s, workdir=tmp_path / "run", cache_dir=grpo_cache_dir,
                      log=lambda level, message: logs.append(message))  # fmt: skip
    evals: list[EvalReport] = []
    trainer.fit(lambda report: None, on_eval=evals.append)
    trained = {str(e.prompt) for e in trainer.examples}
    held = [str(e.prompt) for e in trainer.eval_examples or []]
    assert (len(trained), len(held)) == (30, 10)
    assert not trained & set(held)
    assert "eval: 10 examples, 0 of them also training prompts" in logs
    assert [e.step for e in evals] == [0, 2, 4]
