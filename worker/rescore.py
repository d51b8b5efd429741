"""One replay of a run under other rewards (app/store/rescores.py, grpo/eval/replay.py): claim
it, load the run's records and the replay's reward entries as a worker loads a run's (its
environment, worker/training.py: hosts, token variables, plugin folders, roots), re-score
each chosen step's stored groups and write them, then the summary. A failure (a reward function that
raises, a host refused, records that no longer load) fails the replay with the message a
run would get; the run itself is never written. A duplicate delivery does nothing.
"""

from __future__ import annotations

import logging

from app.store import db, rescores, runs
from grpo.eval.replay import (
    ReplayedGroup,
    StoredGroup,
    replay_examples,
    replay_step,
    replay_summary,
)
from grpo.failures import user_message
from grpo.scrub import scrub
from grpo.spec import JobSpec
from worker.training import environment

log = logging.getLogger(__name__)


def rescore_job(rescore_id: int) -> None:
    rescore = db.call(rescores.claim_rescore, rescore_id)
    if rescore is None:
        return
    run = db.call(runs.get_run, rescore.run_id)
    if run is None:  # deleted since: its replays went with it
        return
    try:
        spec = JobSpec.model_validate({**run.spec, "rewards": rescore.rewards})
        summary = replay_steps(spec, run.id, rescore_id, list(rescore.steps))
    except Exception as exc:  # noqa: BLE001 - any failure is the replay's, worded for its user
        log.warning("replay %s of run %s failed: %s", rescore_id, run.id, exc)
        db.call(rescores.finish_rescore, rescore_id, error=scrub(user_message(exc)))
        return
    db.call(rescores.finish_rescore, rescore_id, summary=summary)


def replay_steps(
    spec: JobSpec, run_id: str, rescore_id: int, steps: list[int]
) -> dict[str, object]:
    env = environment(run_id)  # the run's own: data, model roots, hosts, tokens, plugins
    reach = env.reach
    examples, num_examples = replay_examples(
        spec, datasets_dir=reach.datasets_dir, roots=reach.data_roots
    )
    rewarder = reach.rewarder(spec.rewards, cache_dir=env.cache_dir)
    done: list[ReplayedGroup] = []
    for step in steps:
        rows = db.call(rescores.stored_groups, run_id, step)
        if not rows:
            continue
        groups = [StoredGroup(step=step, **row) for row in rows]
        replayed = replay_step(
            spec, rewarder, groups, examples, run_id=run_id, num_examples=num_examples
        )
        db.call(rescores.save_rescore_groups, rescore_id, [row_of(g) for g in replayed])
        done.extend(replayed)
    return {**replay_summary(done), "notes": basis_notes(spec)}


def row_of(group: ReplayedGroup) -> dict[str, object]:
    return {
        "step": group.step,
        "group_index": group.index,
        "prompt_id": group.prompt_id,
        "completions": group.completions,
        "flips": group.flips,
    }


def basis_notes(spec: JobSpec) -> list[str]:
    """Where the recomputed advantages can differ from training's for reasons other than
    the rewards: a batch-wide std is taken over the stored groups of a step only."""
    if spec.scale_rewards != "batch" and spec.multi_objective_aggregation != "normalize_then_sum":
        return []
    return [
        "advantages here are normalized by a batch-wide std (scale_rewards=batch or "
        "normalize_then_sum), taken over each step's stored groups: training took it over "
        "all of the step's groups (of its round, on every rank), so with groups left "
        "unstored or dynamic sampling's rounds they can differ even under the same rewards"
    ]
