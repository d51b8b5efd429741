"""Score samples with reward entries as a worker scores a step, each function on its own.

Each entry is prepared by its kind once, in a Rewarder of its own (grpo/rewards/scoring.py,
the worker's code: same kinds, sandbox, allowed hosts, TRL call); then each sample is a
batch of one completion, scored by each function in turn within a time limit per call. A
failure is kept with its kind (grpo/rewards/failure_kinds.py) and leaves the other
functions' scores. What TRL hands a function that a sample cannot give: `completion_ids`
are empty, `trainer_state` is step 0 of 1. Knows nothing of HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

from grpo.data.example import Example
from grpo.data.records import Prompt
from grpo.failures import RewardFunctionError
from grpo.rewards.batch import RewardBatch, TrainerState
from grpo.rewards.failure_kinds import ScoreTimeout, failure_kind
from grpo.rewards.scoring import Rewarder
from grpo.rewards.trial_report import Failure, SampleResult, ServerPaths
from grpo.scrub import scrub
from grpo.spec.rewards import MultiReward, RewardSpec
from grpo.spec.sources import LocalRoots

CHARS_PER_TOKEN = 4
"""A sample's token count when it gives none (`length` rewards read it): about 4 characters
a token, as English text in most tokenizers."""


@dataclass(frozen=True)
class Sample:
    """A completion to score, with the record it answers."""

    example: Example
    completion: str
    num_tokens: int


class Trial:
    """The entries of a test, each prepared once (or the failure that kept it from it)."""

    def __init__(
        self,
        labels: Sequence[str],
        rewarders: dict[str, Rewarder],
        unprepared: dict[str, Failure] | None = None,
    ) -> None:
        """`rewarders`: the Rewarder that scores each label (one may score several)."""
        self.labels = list(labels)
        self.rewarders = rewarders
        self.unprepared = unprepared or {}
        self.combined = {
            entry.label
            for rewarder in rewarders.values()
            for entry in rewarder.rewards
            if isinstance(entry, MultiReward)
        }

    @classmethod
    def of_entries(cls, rewards: Sequence[RewardSpec], server: ServerPaths) -> Trial:
        """Each entry prepared on its own, as a worker prepares it, with what the server
        allows: one that cannot be is a failure of every sample."""
        rewarders: dict[str, Rewarder] = {}
        unprepared: dict[str, Failure] = {}
        for entry in rewards:
            try:
                rewarders[entry.label] = worker_rewarder(entry, server)
            except Exception as exc:  # noqa: BLE001 - every failure is answered with its kind
                kind = failure_kind(exc)
                kind = "cannot_load" if kind == "runtime_error" else kind
                message = scrub(str(exc))
                unprepared[entry.label] = Failure(label=entry.label, kind=kind, message=message)
        return cls([entry.label for entry in rewards], rewarders, unprepared)

    @classmethod
    def of_rewarder(cls, rewarder: Rewarder) -> Trial:
        """A run's own entries, as its Rewarder prepared them (a run's preflight)."""
        labels = [entry.label for entry in rewarder.rewards]
        return cls(labels, {label: rewarder for label in labels})

    def score(
        self, sample: Sample, *, answer_field: str | None, call_seconds: float
    ) -> SampleResult:
        """Every function's score of one sample, each within `call_seconds`; a `multi`
        entry's last, from the others' (null where one failed)."""
        batch = sample_batch(sample, answer_field=answer_field)
        scores: dict[str, float | None] = dict.fromkeys(self.labels)
        result = SampleResult(scores=scores, seconds={}, failures=[], notes={})
        for label in (label for label in self.labels if label not in self.combined):
            self.score_label(label, batch, result, call_seconds)
        combined = replace(batch, scores={label: [s] for label, s in result.scores.items()})
        for label in (label for label in self.labels if label in self.combined):
            self.score_label(label, combined, result, call_seconds)
        return result

    def score_label(
        self, label: str, batch: RewardBatch, result: SampleResult, call_seconds: float
    ) -> None:
        """One function's score of the batch's one sample into `result`, or its failure."""
        if label in self.unprepared:
            result.failures.append(self.unprepared[label])
            return
        try:
            with time_limit(call_seconds):
                outcome = self.rewarders[label].score_one(label, batch)
        except Exception as exc:  # noqa: BLE001 - every failure is answered with its kind
            result.failures.append(failure_of(label, exc))
            return
        result.scores[label] = outcome.scores[label][0]
        result.seconds[label] = round(outcome.seconds[label], 6)
        if 0 in outcome.notes:
            result.notes[label] = outcome.notes[0].removeprefix(f"{label}: ")


def worker_rewarder(entry: RewardSpec, server: ServerPaths) -> Rewarder:
    """One entry prepared as a worker prepares it, with what the server allows."""
    base = Path(server.local_path_base)
    return Rewarder(
        [entry],
        reward_hosts=server.reward_hosts,
        token_envs=server.token_envs,
        cache_dir=Path(server.cache_dir),
        model_roots=LocalRoots(base, tuple(Path(p) for p in server.model_roots)),
        plugin_dirs=[Path(p) for p in server.plugin_dirs],
    )


def sample_batch(sample: Sample, *, answer_field: str | None) -> RewardBatch:
    return RewardBatch(
        run_id="reward-test",
        step=1,
        examples=[sample.example],
        prompts=[prompt_text(sample.example.prompt)],
        completions=[sample.completion],
        num_tokens=[sample.num_tokens],
        completion_ids=[()],
        trainer_state=TrainerState(global_step=0, max_steps=1, epoch=0.0),
        answer_field=answer_field,
    )


def prompt_text(prompt: Prompt) -> str:
    """A prompt as text: chat messages' contents one after the other."""
    return prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)


def estimated_tokens(completion: str) -> int:
    return max(1, -(-len(completion) // CHARS_PER_TOKEN))


def failure_of(label: str, exc: BaseException) -> Failure:
    """The failure of `label`, worded by what went wrong (not where in a run it would be),
    without the secrets of this process's environment (grpo/scrub.py): it reaches the run's
    log, its doctor findings and a reward test's answer."""
    cause = exc.cause if isinstance(exc, RewardFunctionError) else exc
    message = scrub(f"{type(cause).__name__}: {cause}")
    return Failure(label=label, kind=failure_kind(exc), message=message[:2000])


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """ScoreTimeout raised in the code running past `seconds` (SIGALRM: the main thread only,
    as in the scoring process; elsewhere no limit)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise ScoreTimeout(f"ran past the test's limit of {seconds:g} s per call")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
