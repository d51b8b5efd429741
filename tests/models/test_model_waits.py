"""No silent waits: building a built-in model on first use and loading a model are log lines
(the trainer's log: the run page and `grpo submit --follow` show them), with what the build
costs here, and a warm-up that takes minutes says how far it is every few seconds."""

import dataclasses
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo.models.build_progress import BuildProgress
from grpo.models.loading import builtin_dir, load_policy
from grpo.models.warmup import TINY_ARITH, train_until_target

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_first_use_build_and_each_load_are_said(tmp_path: Path) -> None:
    said: list[tuple[str, str]] = []
    load_policy("builtin:tiny", cache_dir=tmp_path, progress=False, log=lambda *m: said.append(m))
    (built,) = tmp_path.glob("builtin-tiny-*[!k]")  # the model's directory, not its lock
    assert said[0] == (
        "info",
        f"building builtin:tiny on first use, about a second here (kept in {built})",
    )
    assert said[1][1].startswith("built builtin:tiny in ") and said[1][1].endswith(" s")
    assert said[2] == ("info", f"loading model builtin:tiny from {built}")
    assert len(said) == 3

    said.clear()  # built already: only the loading
    load_policy("builtin:tiny", cache_dir=tmp_path, progress=False, log=lambda *m: said.append(m))
    assert said == [("info", f"loading model builtin:tiny from {built}")]


def test_a_build_says_how_far_it_is_every_ten_seconds_and_at_its_end() -> None:
    now = [0.0]
    said: list[tuple[str, str]] = []
    progress = BuildProgress("builtin:small-arith", lambda *m: said.append(m), clock=lambda: now[0])
    for phase in range(1, 46):  # 45 phases of 1.5 s each
        now[0] += 1.5
        progress(phase, 45, f"phase {phase} of 45")
    lines = [message for _, message in said]
    assert lines[0] == (
        "building builtin:small-arith (first use, about 4 min here): 15%, phase 7 of 45;"
        " 10 s so far"
    )
    assert len(lines) == 7  # at 10.5, 21, 31.5, 42, 52.5, 63 s and the last phase at 67.5 s
    assert lines[-1].endswith(": 100%, phase 45 of 45; 1 min 08 s so far")


def test_the_warm_up_reports_through_the_runs_log(tmp_path: Path) -> None:
    """The real warm-up loop, cut to 12 steps: its last step is always said."""
    tiny = builtin_dir("builtin:tiny", tmp_path, progress=False)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    said: list[tuple[str, str]] = []
    short = dataclasses.replace(TINY_ARITH, max_steps=12, target_accuracy=1.1)
    train_until_target(
        model,
        AutoTokenizer.from_pretrained(tiny),
        progress=False,
        log=lambda *m: said.append(m),
        recipe=short,
    )
    assert said[-1][0] == "info"
    assert said[-1][1].startswith(
        "building builtin:tiny-arith (first use, about 1 min here): 100%, warm-up done at step"
        " 12, held-out accuracy "
    )
