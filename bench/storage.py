"""How much the store keeps per run: bytes for a 1,000-step run of 16 prompts x 16 completions.

    python bench/storage.py [--steps 100]

Writes `--steps` steps through app.store.steps.save_step into a fresh SQLite file and a
fresh PostgreSQL database, with the default logging policy (texts and per-token KL kept for
up to 16 groups per step: here all of them), for two completion lengths, then extrapolates
linearly to 1,000 steps.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.stack import create_pg_database, drop_pg_database, migrate  # noqa: E402

WRITER = r"""
import random, sys
from app.store import db, runs, steps
from grpo.report import CompletionReport, GroupReport, StepReport
from grpo.spec import JobSpec
n_steps, length = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(0)
spec = JobSpec(model="builtin:tiny", max_steps=n_steps)
run, _ = db.call(runs.create_run, spec, package_version="bench")
for step in range(1, n_steps + 1):
    groups = []
    for g in range(16):
        texts = ["".join(rng.choice("0123456789+= <>/abcdefghij") for _ in range(length))
                 for _ in range(16)]
        comps = [CompletionReport(
            text=text, num_tokens=length, is_truncated=False,
            rewards={"accuracy": 1.0, "format": 0.0}, reward=float(rng.randint(0, 1)),
            advantage=rng.gauss(0, 1), kl=rng.random() / 100,
            token_kls=[round(rng.random() / 100, 5) for _ in range(length)], tokens=list(text))
            for text in texts]
        groups.append(GroupReport(index=g, prompt_id=f"p{rng.randint(0, 9999)}", prompt="x" * 60,
            answer="42", rewards=[c.reward for c in comps], advantages=[c.advantage for c in comps],
            completions=comps, passes=[c.reward >= 1 for c in comps]))
    db.call(steps.save_step, run.id, StepReport(step=step, total_steps=n_steps,
        scalars={f"m{i}": rng.random() for i in range(30)}, groups=groups,
        advantage_histogram=[0] * 24, reward_histogram=[0] * 30,
        group_reward_std_histogram=[0] * 30))
"""


def pg_size(url: str) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        size = int(conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one())
    engine.dispose()
    return size


def write(env: dict[str, str], steps: int, length: int) -> None:
    subprocess.run(
        [sys.executable, "-c", WRITER, str(steps), str(length)], cwd=ROOT, env=env, check=True
    )


def measure(steps: int, length: int, tmp: Path) -> tuple[float, float]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    sqlite_env = {**base, "GRPO_DATA_DIR": str(tmp / f"sqlite-{length}")}
    migrate(sqlite_env)
    db = tmp / f"sqlite-{length}" / "grpo.db"
    empty = db.stat().st_size
    write(sqlite_env, steps, length)
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sqlite_bytes = db.stat().st_size - empty
    url = create_pg_database()
    try:
        pg_env = {**base, "GRPO_DATA_DIR": str(tmp / "pg"), "GRPO_DATABASE_URL": url}
        migrate(pg_env)
        before = pg_size(url)
        write(pg_env, steps, length)
        pg_bytes = pg_size(url) - before
    finally:
        drop_pg_database(url)
    scale = 1000 / steps / 2**20
    return sqlite_bytes * scale, pg_bytes * scale


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    random.seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for length in (16, 256):
            sqlite_mb, pg_mb = measure(args.steps, length, Path(tmp))
            print(
                f"1,000 steps x 16 prompts x 16 completions of {length} tokens: "
                f"SQLite {sqlite_mb:,.0f} MiB, PostgreSQL {pg_mb:,.0f} MiB "
                f"(measured over {args.steps} steps, extrapolated)",
                flush=True,
            )


if __name__ == "__main__":
    main()
