"""`grpo rescore RUN REWARDS`: replay a run's stored completions under other rewards through
the server (POST /api/runs/{id}/rescore), wait for a worker to run it, and print what
changed: the distributions before and after, and each completion whose advantage changed
sign."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli_client import CLIENT_ERRORS, said_client_error
from grpo.client import GrpoClient
from grpo.spec.yaml_input import load_yaml

FINAL = ("succeeded", "failed")


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id")
    parser.add_argument(
        "rewards", help="a YAML or JSON file: a list of reward entries, or a spec with `rewards`"
    )
    parser.add_argument(
        "--steps", default=None, help="comma-separated steps (default: every stored step)"
    )
    parser.add_argument(
        "--wait", type=float, default=600.0, help="seconds to wait for a worker (default 600)"
    )


def rescore(args: Any, client: GrpoClient, *, poll_s: float = 1.0) -> int:
    """0 when the replay succeeded, 1 when it failed or was not run in time, 2 when the
    server refused it or could not be reached."""
    try:
        body = {"rewards": reward_entries(Path(args.rewards)), "steps": steps_of(args.steps)}
        asked = client.rescore(args.run_id, body)
        print(f"replay {asked['id']} of run {args.run_id} queued: steps {asked['steps']}")
        done = wait_for(lambda: client.replay(args.run_id, asked["id"]), args.wait, poll_s)
    except CLIENT_ERRORS as exc:
        return said_client_error(exc, client)
    if done["status"] != "succeeded":
        why = done["error"] or f"still {done['status']} after {args.wait:g} s"
        print(f"replay {done['id']}: {why}", file=sys.stderr)
        return 1
    print_replay(done)
    return 0


def reward_entries(path: Path) -> list[Any]:
    loaded = load_yaml(path.read_text(encoding="utf-8"), source=str(path))
    entries = loaded.get("rewards") if isinstance(loaded, dict) else loaded
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of reward entries, or a spec with `rewards`")
    return entries


def steps_of(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(step) for step in text.split(",") if step.strip()]
    except ValueError:
        raise ValueError(f"--steps: expected comma-separated step numbers, got {text!r}") from None


def wait_for(read: Callable[[], dict[str, Any]], seconds: float, poll_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + seconds
    while True:
        replay = read()
        if replay["status"] in FINAL or time.monotonic() >= deadline:
            return replay
        time.sleep(poll_s)


def print_replay(replay: dict[str, Any]) -> None:
    summary = replay["summary"]
    print(
        f"{summary['groups']} groups, {summary['completions']} completions: "
        f"{summary['flipped_groups']} groups with {summary['flipped_completions']} advantages "
        "that changed sign"
    )
    for key in ("reward", "advantage"):
        before, after = summary[f"{key}_before"], summary[key]
        print(
            f"{key:9}  mean {number(before['mean'])} -> {number(after['mean'])}  "
            f"std {number(before['std'])} -> {number(after['std'])}"
        )
    for group in replay["groups"]:
        for flip in group["flips"]:
            print(
                f"step {group['step']} group {group['group_index']} ({group['prompt_id']}) "
                f"completion {flip['completion']}: advantage {flip['advantage_before']:+.3f} -> "
                f"{flip['advantage']:+.3f} ({flip['change']:+.3f})"
            )
    for note in summary.get("notes") or []:
        print(f"note: {note}")


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"
