"""One run over several machines with the same launcher: `grpo train --nnodes 2
--rdzv-endpoint host:port` on each node. Here the two "nodes" are two processes of this
machine that share nothing but the rendezvous endpoint and the run's directory, as two
machines with a shared filesystem would."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from grpo.cli import main as cli

SPEC = (
    "model: builtin:tiny\nmax_steps: 1\nprompts_per_step: 2\nnum_generations: 2\n"
    "max_completion_length: 4\nsave_steps: 1\nresources:\n  num_processes: 2\n"
    "rewards:\n  - name: regex\n    pattern: '\\d'\n"
)
PER_NODE = SPEC.replace("num_processes: 2\n", "num_processes: 1\n  num_nodes: 2\n")
"""The same run as SPEC said per node: 1 rank on each of 2 machines."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_two_nodes_meet_at_one_endpoint_and_train_one_run(
    tmp_path: Path, grpo_cache_dir: Path
) -> None:
    # node 0's spec gives the ranks in all (num_processes 2, split by --nnodes), node 1's
    # the ranks per node (num_nodes 2): the same layout, so they meet as one run
    specs = [tmp_path / "spec.yaml", tmp_path / "per-node.yaml"]
    specs[0].write_text(SPEC)
    specs[1].write_text(PER_NODE)
    workdir = tmp_path / "shared" / "run"
    endpoint = f"127.0.0.1:{free_port()}"
    argv = [
        sys.executable, "-m", "grpo.cli", "train", "--workdir", str(workdir),
        "--cache-dir", str(grpo_cache_dir), "--nnodes", "2", "--rdzv-endpoint", endpoint,
    ]  # fmt: skip
    nodes = [
        subprocess.Popen([*argv, str(spec)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for spec in specs
    ]
    # about a minute quiet; the bound is for a hung rendezvous, not a busy machine
    outputs = [node.communicate(timeout=1200)[0].decode(errors="replace") for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    assert all("launching 1 rank here, of 2 on 2 nodes" in out for out in outputs)
    assert sum("finished at step 1" in out for out in outputs) == 1, outputs  # rank 0 alone
    assert os.listdir(workdir / "checkpoints") == ["step-000001"]


def test_nodes_that_cannot_share_the_ranks_are_refused_before_any_launch(
    tmp_path: Path, capsys
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    run = ["train", str(spec), "--workdir", str(tmp_path / "run")]
    assert cli.main([*run, "--nnodes", "3", "--rdzv-endpoint", "h:1"]) == 2
    assert "num_processes is 2, which 3 nodes cannot share equally" in capsys.readouterr().err
    assert cli.main([*run, "--nnodes", "2"]) == 2
    assert "--nnodes > 1 needs --rdzv-endpoint" in capsys.readouterr().err
    assert cli.main(["train", str(spec), "--nnodes", "2", "--rdzv-endpoint", "h:1"]) == 2
    assert "--nnodes > 1 needs --workdir on storage every node shares" in capsys.readouterr().err
    # a spec of num_nodes 2 runs only with --nnodes 2: never on one machine, never split again
    per_node = tmp_path / "per-node.yaml"
    per_node.write_text(PER_NODE)
    run = ["train", str(per_node), "--workdir", str(tmp_path / "run")]
    for nodes in ("1", "4"):
        assert cli.main([*run, "--nnodes", nodes, "--rdzv-endpoint", "h:1"]) == 2
        assert (
            f"resources.num_nodes is 2: run this command on each of the 2 machines with "
            f"--nnodes 2 and the same --rdzv-endpoint (it has --nnodes {nodes})"
        ) in capsys.readouterr().err
