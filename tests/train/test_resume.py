"""Exact resume (grpo/training/trainer.py, grpo/checkpoints/files.py): run 4 steps straight, or
run 2, checkpoint, build a new TrainingLoop and resume; steps 3 and 4 must match. The spec
exercises every piece of saved state: AdamW moments, a warmup + linear schedule, adaptive beta
and a reference synced at step 2; dynamic sampling's extra rounds must resume the same too."""

import pytest

from grpo.checkpoints.files import KEEP_CHECKPOINTS, latest_checkpoint
from grpo.spec import RegexReward
from grpo.spec.optimization import LoraSpec
from grpo.training.trainer import FitResult, TrainingLoop
from tests.training.test_trainer import comparable, tiny_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")

RESUME_KNOBS = dict(
    max_steps=4,
    warmup_steps=1,
    lr_scheduler_type="linear",
    kl_target=0.01,
    kl_horizon=5,
    sync_ref_model=True,
    ref_model_sync_steps=2,
    ref_model_mixup_alpha=1.0,
    save_steps=2,
    # extra rounds draw from reserve prompt streams and seeds of (seed, step, round)
    dynamic_sampling={"enabled": True, "max_rounds": 3},
    rewards=(RegexReward(pattern=r"[5-9]"),),  # rarer than tiny_spec's: some groups are flat
)


@pytest.mark.parametrize("lora", [None, LoraSpec(r=4)], ids=["full", "lora"])
def test_resuming_from_step_two_continues_exactly(tmp_path, grpo_cache_dir, lora):
    spec = tiny_spec(**RESUME_KNOBS, lora=lora, learning_rate=1e-2 if lora else 1e-3)
    straight = []
    TrainingLoop(spec, workdir=tmp_path / "straight", cache_dir=grpo_cache_dir).fit(straight.append)

    first = []
    stopped = TrainingLoop(spec, workdir=tmp_path / "resumed", cache_dir=grpo_cache_dir).fit(
        first.append, should_stop=lambda: len(first) >= 2
    )
    assert stopped == FitResult(last_step=2, is_stopped=True)
    logs, second = [], []
    resumed = TrainingLoop(
        spec,
        workdir=tmp_path / "resumed",
        cache_dir=grpo_cache_dir,
        log=lambda level, message: logs.append(message),
    ).fit(second.append)

    assert resumed == FitResult(last_step=4, is_stopped=False)
    assert any("resumed from checkpoint at step 2" in m for m in logs)
    assert [r.step for r in second] == [3, 4]
    assert any(r.scalars["dynamic_sampling/rounds"] > 1 for r in straight[2:])
    for expected, got in zip(straight[2:], second, strict=True):
        assert comparable(got).keys() == comparable(expected).keys()
        for key, value in comparable(expected).items():
            assert got.scalars[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
        assert [g.rewards for g in got.groups] == [g.rewards for g in expected.groups]


def test_a_finished_run_resumes_to_nothing(tmp_path, grpo_cache_dir):
    spec = tiny_spec(max_steps=1)
    TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir).fit(lambda report: None)
    reports = []
    result = TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir).fit(reports.append)
    assert result == FitResult(last_step=1, is_stopped=False) and reports == []


def test_only_the_latest_checkpoints_are_kept_and_each_is_announced(tmp_path, grpo_cache_dir):
    saved = []
    TrainingLoop(
        tiny_spec(max_steps=5, save_steps=1), workdir=tmp_path, cache_dir=grpo_cache_dir
    ).fit(lambda report: None, on_checkpoint=saved.append)
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == [f"step-{s:06d}" for s in range(6 - KEEP_CHECKPOINTS, 6)]
    assert latest_checkpoint(tmp_path).name == "step-000005"
    assert [(c.step, c.is_final) for c in saved] == [(s, s == 5) for s in range(1, 6)]
    assert saved[-1].kept_steps == tuple(range(6 - KEEP_CHECKPOINTS, 6))
    assert saved[-1].path == str(latest_checkpoint(tmp_path))
    on_disk = sum(f.stat().st_size for f in latest_checkpoint(tmp_path).rglob("*") if f.is_file())
    assert saved[-1].num_bytes == on_disk > 0


def test_the_final_model_outlives_the_rotation_of_a_run_resumed_longer(tmp_path, grpo_cache_dir):
    TrainingLoop(
        tiny_spec(max_steps=2, save_steps=1), workdir=tmp_path, cache_dir=grpo_cache_dir
    ).fit(lambda report: None)
    saved = []
    longer = tiny_spec(max_steps=2 + KEEP_CHECKPOINTS + 1, save_steps=1)
    TrainingLoop(longer, workdir=tmp_path, cache_dir=grpo_cache_dir).fit(
        lambda report: None, on_checkpoint=saved.append
    )
    newest = list(range(longer.max_steps - KEEP_CHECKPOINTS + 1, longer.max_steps + 1))
    assert saved[-1].kept_steps == (2, *newest)  # 1 and 3 rotated out; the first final stays
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == [f"step-{s:06d}" for s in (2, *newest)]


def test_without_save_final_only_the_save_steps_grid_is_saved(tmp_path, grpo_cache_dir):
    saved = []
    spec = tiny_spec(max_steps=3, save_steps=2, save_final=False)
    TrainingLoop(spec, workdir=tmp_path / "grid", cache_dir=grpo_cache_dir).fit(
        lambda report: None, on_checkpoint=saved.append
    )
    assert [(c.step, c.is_final) for c in saved] == [(2, False)]  # no step 3 off the grid
    stopped = []
    sweep = tiny_spec(max_steps=3, save_steps=0, save_final=False)
    TrainingLoop(sweep, workdir=tmp_path / "sweep", cache_dir=grpo_cache_dir).fit(
        stopped.append, should_stop=lambda: len(stopped) >= 1
    )
    assert latest_checkpoint(tmp_path / "sweep").name == "step-000001"  # stopped: resumable
    TrainingLoop(sweep, workdir=tmp_path / "sweep", cache_dir=grpo_cache_dir).fit(lambda r: None)
    assert latest_checkpoint(tmp_path / "sweep").name == "step-000001"  # completed: no weights


def test_starting_fresh_removes_old_checkpoints(tmp_path, grpo_cache_dir):
    TrainingLoop(
        tiny_spec(max_steps=3, save_steps=1), workdir=tmp_path, cache_dir=grpo_cache_dir
    ).fit(lambda report: None)
    logs, reports = [], []
    TrainingLoop(
        tiny_spec(max_steps=1),
        workdir=tmp_path,
        cache_dir=grpo_cache_dir,
        log=lambda level, message: logs.append((level, message)),
    ).fit(reports.append, resume=False)
    assert [r.step for r in reports] == [1]
    assert latest_checkpoint(tmp_path).name == "step-000001"
    assert any(level == "warning" and "removed 3 old checkpoint" in m for level, m in logs)


def test_a_resume_that_changes_model_shapes_or_data_order_is_refused_naming_the_fields(
    tmp_path, grpo_cache_dir
):
    spec = tiny_spec(max_steps=1, save_steps=1)
    TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir).fit(lambda report: None)
    edited = tiny_spec(max_steps=2, save_steps=1, num_generations=2, seed=7)
    with pytest.raises(ValueError) as refused:
        TrainingLoop(edited, workdir=tmp_path, cache_dir=grpo_cache_dir).fit(lambda report: None)
    message = str(refused.value)
    assert "seed (checkpoint 0, now 7)" in message
    assert "num_generations (checkpoint 4, now 2)" in message
    assert "learning_rate" not in message and "max_steps" not in message
    # knobs that set none of them may change: a longer run at another learning rate resumes
    longer = tiny_spec(max_steps=2, save_steps=1, learning_rate=5e-4)
    reports = []
    TrainingLoop(longer, workdir=tmp_path, cache_dir=grpo_cache_dir).fit(reports.append)
    assert [r.step for r in reports] == [2]


def test_the_cli_refuses_an_edited_spec_on_resume(tmp_path, grpo_cache_dir, capsys):
    from grpo.cli import main as cli

    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "model: builtin:tiny\nmax_steps: 1\nprompts_per_step: 2\nnum_generations: 2\n"
        "max_completion_length: 4\nsave_steps: 1\n"
    )
    common = ["--workdir", str(tmp_path / "run"), "--cache-dir", str(grpo_cache_dir)]
    assert cli.main(["train", str(spec), *common]) == 0
    spec.write_text(spec.read_text().replace("prompts_per_step: 2", "prompts_per_step: 3"))
    assert cli.main(["train", str(spec), *common, "--resume"]) == 1
    assert "prompts_per_step (checkpoint 2, now 3)" in capsys.readouterr().err


def test_a_checkpoint_whose_fence_refuses_never_replaces_the_one_in_place(tmp_path, grpo_cache_dir):
    """A worker that lost its run must not rename over the new owner's checkpoint."""
    from grpo.checkpoints.files import save_checkpoint
    from grpo.models.loading import load_policy

    model, tokenizer = load_policy("builtin:tiny", cache_dir=grpo_cache_dir, progress=False)
    owners = save_checkpoint(tmp_path, 2, model=model, tokenizer=tokenizer, state={"owner": 2})
    before = (owners / "trainer_state.pt").read_bytes()

    def lease_lost() -> None:
        raise RuntimeError("lease lost")

    with pytest.raises(RuntimeError, match="lease lost"):
        save_checkpoint(
            tmp_path, 2, model=model, tokenizer=tokenizer, state={"owner": 1},
            before_rename=lease_lost,
        )  # fmt: skip
    assert (owners / "trainer_state.pt").read_bytes() == before
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == ["step-000002"]
