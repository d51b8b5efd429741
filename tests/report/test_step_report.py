"""The step report (grpo/report/, grpo/report/build.py): the group reward spread histogram
against numbers worked by hand, and kept completions carrying their tokens' pieces."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo.report import GROUP_REWARD_STD_BIN_EDGES, GroupReport
from grpo.report.build import build_step_report, finish_fields
from grpo.spec import JobSpec
from grpo.training.trainer import TrainingLoop


def group(index: int, rewards: list[float], *, is_kept: bool = False) -> GroupReport:
    return GroupReport(
        index=index,
        prompt_id=f"p{index}",
        prompt="1+1=",
        answer="2",
        rewards=rewards,
        advantages=[0.0] * len(rewards),
        completions=[] if is_kept else None,
        passes=[r >= 1 for r in rewards],
    )


def test_spread_histogram_counts_every_group_by_its_population_reward_std() -> None:
    groups = [
        group(0, [1, 0, 1, 0], is_kept=True),  # mean .5, std .5 -> bin [0.5, 0.55) = 10
        group(1, [1, 1, 1, 1]),  # std 0 -> bin [0, 0.05) = 0: no gradient
        group(2, [0, 0, 0, 0]),  # std 0 -> bin 0
        group(3, [1, 0, 0, 0]),  # mean .25, var (.5625 + 3 * .0625) / 4 = .1875, std .433 -> 8
        group(4, [0, 0, 0.5, 0.5]),  # mean .25, std .25 -> bin [0.25, 0.3) = 5
        group(5, [2, -1, 2, -1]),  # std 1.5, the top edge -> last bin, 29
        group(6, [3, -3, 3, -3]),  # std 3, out of range -> last bin
    ]
    report = build_step_report(1, 1, {}, groups)

    expected = [0] * 30
    expected[0], expected[5], expected[8], expected[10], expected[29] = 2, 1, 1, 1, 2
    assert len(GROUP_REWARD_STD_BIN_EDGES) == 31
    assert report.group_reward_std_histogram == expected
    assert sum(report.group_reward_std_histogram) == len(groups)  # kept texts or not


@pytest.mark.usefixtures("one_torch_thread")
def test_trainer_keeps_token_pieces_that_join_back_to_each_kept_text(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    spec = JobSpec(
        model="builtin:tiny",
        max_steps=1,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=6,
        save_steps=0,
        logging={"max_groups_per_step": 1},
    )
    trainer = TrainingLoop(spec, workdir=tmp_path, cache_dir=grpo_cache_dir, log=lambda *_: None)
    report = trainer.step(1)

    kept, bare = report.groups
    assert kept.completions and bare.completions is None
    for c in kept.completions:
        assert c.tokens is not None and c.token_kls is not None
        assert len(c.tokens) == len(c.token_kls) == c.num_tokens
        assert "".join(c.tokens) == c.text
    assert sum(report.group_reward_std_histogram) == 2


def test_finish_reason_names_which_of_several_eos_ids_ended_a_completion(
    small_tokenizer,
) -> None:
    im_end, endoftext = small_tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|endoftext|>"])
    eos = [im_end, endoftext]
    assert finish_fields([5, 6, im_end], eos_token_ids=eos, tokenizer=small_tokenizer) == {
        "finish_reason": "eos",
        "stop": "<|im_end|>",
        "stop_token_id": im_end,
    }
    assert finish_fields([endoftext], eos_token_ids=eos, tokenizer=small_tokenizer) == {
        "finish_reason": "eos",
        "stop": "<|endoftext|>",
        "stop_token_id": endoftext,
    }
    assert finish_fields([5, 6, 7], eos_token_ids=eos, tokenizer=small_tokenizer) == {
        "finish_reason": "length",
        "stop": None,
        "stop_token_id": None,
    }
