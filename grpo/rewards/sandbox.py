"""Run an untrusted Python program in a bubblewrap sandbox with resource limits.

The sandbox (Debian's `bubblewrap`) sees a read-only /usr and nothing else of the host: no
network (its own empty network namespace), no data directory, no home; a fresh size-capped
tmpfs is its working directory; the environment is cleared; it gets new user, pid, IPC and
UTS namespaces and no capabilities. Resource limits cap CPU seconds, address space,
processes, file size and (through the file size of its output file) output. The process
limit is set inside the sandbox's own user namespace, where only its processes count; a
worker running as root starts the sandbox as `nobody`, as root is exempt from that limit.
Knows nothing of rewards, HTTP servers, SQL or Celery.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

NOBODY = 65534
MAX_PROCESSES = 32
"""Processes (and threads) the sandbox may hold at once: a fork bomb stops here."""
MAX_OUTPUT_BYTES = 1_000_000
"""Bytes of stdout (and, separately, stderr) a program may write; more kills it."""
TMPFS_BYTES = 16_000_000
"""Size of the sandbox's writable working directory."""


@dataclass(frozen=True)
class SandboxResult:
    """What came back: exit status, captured output, and a note when a limit was hit."""

    returncode: int
    stdout: str
    stderr: str
    note: str | None = None


def bubblewrap() -> str | None:
    """Path of the `bwrap` executable, or None when bubblewrap is not installed."""
    return shutil.which("bwrap")


def require_bubblewrap() -> str:
    """The `bwrap` path; ValueError naming the package when it is missing."""
    path = bubblewrap()
    if path is None:
        raise ValueError(
            "code rewards need bubblewrap on the worker (Debian/Ubuntu: apt-get install "
            "bubblewrap); it is not installed here"
        )
    return path


def check_sandbox() -> None:
    """Run `print('ok')` in the sandbox once; ValueError with bwrap's words when it cannot."""
    require_bubblewrap()
    result = run_sandboxed("print('ok')", stdin="", timeout_s=5, memory_mb=256)
    if result.stdout.strip() != "ok":
        raise ValueError(
            f"the code-reward sandbox does not start on this worker (exit {result.returncode}): "
            f"{result.stderr.strip()[:500]}"
        )


def sandbox_python() -> str:
    """A Python interpreter under /usr, the only host tree the sandbox sees."""
    for candidate in ("/usr/local/bin/python3", "/usr/bin/python3"):
        if os.path.exists(candidate):
            return candidate
    raise ValueError("code rewards need a python3 under /usr on the worker")


def run_sandboxed(code: str, *, stdin: str, timeout_s: float, memory_mb: int) -> SandboxResult:
    """Run the Python source `code` in the sandbox, feeding `stdin`; never raises on the
    program's behaviour (a limit hit is a note)."""
    command = [
        *_limits(timeout_s=timeout_s, memory_mb=memory_mb),
        *_bwrap_command(),
        sandbox_python(),
        "-I",
        "-S",
        "-c",
        _NPROC_PRELUDE + code,
    ]
    is_root = os.getuid() == 0  # root's processes are exempt from RLIMIT_NPROC; nobody's are not
    with tempfile.TemporaryDirectory(prefix="grpo-sandbox-") as scratch:
        out_path, err_path = Path(scratch, "out"), Path(scratch, "err")
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                start_new_session=True,
                env={},
                user=NOBODY if is_root else None,
                group=NOBODY if is_root else None,
                extra_groups=[] if is_root else None,
            )
            returncode, timed_out = _wait(process, stdin, wall_s=2 * timeout_s + 1)
        stdout = out_path.read_bytes()[:MAX_OUTPUT_BYTES].decode(errors="replace")
        stderr = err_path.read_bytes()[:MAX_OUTPUT_BYTES].decode(errors="replace")
    note = _note(returncode, stderr, timed_out=timed_out, timeout_s=timeout_s, memory_mb=memory_mb)
    return SandboxResult(returncode=returncode, stdout=stdout, stderr=stderr, note=note)


def _bwrap_command() -> list[str]:
    return [
        require_bubblewrap(),
        "--unshare-all",  # pid, network, IPC, UTS, cgroup namespaces
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(TMPFS_BYTES), "--tmpfs", "/box",
        "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
        "--remount-ro", "/",
        "--chdir", "/box",
        "--clearenv",
        "--setenv", "PATH", "/usr/bin:/bin",
        "--setenv", "HOME", "/box",
        "--",
    ]  # fmt: skip


# RLIMIT_NPROC is set inside the sandbox's user namespace, where the kernel counts only the
# sandbox's own processes against it; set outside, it would count every process of the
# worker's user (an unprivileged worker's threads alone can exceed it)
_NPROC_PRELUDE = (
    "import resource\n"
    f"resource.setrlimit(resource.RLIMIT_NPROC, ({MAX_PROCESSES}, {MAX_PROCESSES}))\n"
    "del resource\n"
)


def _limits(*, timeout_s: float, memory_mb: int) -> list[str]:
    """util-linux `prlimit` sets the rlimits and execs bwrap (no preexec_fn: threads run
    sandboxes concurrently, and preexec_fn is not safe with threads)."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise ValueError("code rewards need util-linux's prlimit on the worker")
    cpu = math.ceil(timeout_s)
    return [
        prlimit,
        f"--cpu={cpu}:{cpu + 1}",
        f"--as={memory_mb * 2**20}",
        f"--fsize={MAX_OUTPUT_BYTES}",
        "--core=0",
        "--",
    ]


def _wait(process: subprocess.Popen[bytes], stdin: str, *, wall_s: float) -> tuple[int, bool]:
    """Feed stdin, wait up to wall_s, then kill the whole sandbox; (returncode, timed_out)."""
    try:
        process.communicate(stdin.encode(), timeout=wall_s)
        return process.returncode, False
    except subprocess.TimeoutExpired:
        # bwrap's --die-with-parent and the pid namespace take every sandboxed process along
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return process.returncode, True


def _note(
    returncode: int, stderr: str, *, timed_out: bool, timeout_s: float, memory_mb: int
) -> str | None:
    if timed_out:
        return f"killed after {2 * timeout_s + 1:g} s of wall time"
    if returncode == -signal.SIGXCPU or returncode == 128 + signal.SIGXCPU:
        return f"killed at the CPU limit ({math.ceil(timeout_s)} s)"
    # Python ignores SIGXFSZ: an oversized write raises "File too large" instead
    if returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or "File too large" in stderr:
        return f"killed at the output/file size limit ({MAX_OUTPUT_BYTES} bytes)"
    if "MemoryError" in stderr:
        return f"ran out of memory (limit {memory_mb} MB)"
    if returncode < 0 or returncode >= 128:
        return f"killed by signal {abs(returncode) % 128}"
    return None
