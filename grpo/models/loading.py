"""Loading the policy: built-in tiny models, local directories and Hugging Face ids.

Built-in models are materialised once into the cache directory (config, weights and
tokenizer written with `save_pretrained`) and then always loaded back through
`AutoModelForCausalLM` / `AutoTokenizer`, the same path any hub id or local directory
takes. Also picks the device and says whether it computes in bf16. Knows nothing of GRPO.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)
from transformers.utils import logging as hf_logging

from grpo.models.build_progress import Log
from grpo.models.builtin_names import builtin_dir_name, is_built
from grpo.models.builtin_small import build_small
from grpo.models.char_tokenizer import build_char_tokenizer
from grpo.models.random_init import save_random_model
from grpo.models.small_warmup import SMALL_ARITH
from grpo.models.tool_warmup import build_tiny_tools
from grpo.models.warmup import build_warmed_up
from grpo.spec import FIRST_USE_BUILD
from grpo.spec.hub import hub_model_problem, is_cached
from grpo.spec.sources import LocalRoots, parse_model_name, resolve_local

TINY_SEED = 1234
"""Its cache directory's version is grpo/models/builtin_names.py's TINY_VERSION: bump it when
tiny_config or build_tiny changes."""


def tiny_config(vocab_size: int, *, pad_id: int, bos_id: int, eos_id: int) -> LlamaConfig:
    """A small Llama (~270k parameters): 4 layers, 4 heads, width 64, tied embeddings, no
    dropout. Small enough that the warm-up and a GRPO step take seconds on one CPU core."""
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        attention_dropout=0.0,
        pad_token_id=pad_id,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
    )


def build_tiny(target: Path) -> None:
    """Write the seeded, randomly initialised built-in model and its tokenizer to `target`."""
    tokenizer = build_char_tokenizer()
    config = tiny_config(
        len(tokenizer),
        pad_id=tokenizer.pad_token_id,
        bos_id=tokenizer.bos_token_id,
        eos_id=tokenizer.eos_token_id,
    )
    save_random_model(
        target, config, tokenizer, seed=TINY_SEED, pad_token_id=tokenizer.pad_token_id
    )


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive advisory lock held for the block (blocks until free)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def materialise(
    target: Path, build: Callable[[Path], None], *, log: Log | None = None, what: str = ""
) -> Path:
    """Run `build` into a temp dir next to `target` and rename it into place, once; `log`
    hears when it starts and ends (`what` names it), so a first use is no silent wait.

    Safe across processes: a file lock serialises builders, the rename is atomic, so a
    reader sees either no directory or a complete one.
    """
    if is_built(target):
        return target
    with _file_lock(target.with_name(target.name + ".lock")):
        if is_built(target):
            return target
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
        started = time.perf_counter()
        if log is not None:
            cost = FIRST_USE_BUILD.get(what)
            about = f", {cost} here" if cost else ""
            log("info", f"building {what or target.name} on first use{about} (kept in {target})")
        try:
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared by workers
            build(tmp)
            if log is not None:
                log("info", f"built {what or target.name} in {time.perf_counter() - started:.0f} s")
            if target.exists():  # an incomplete leftover from a killed builder
                shutil.rmtree(target)
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def builtin_dir(name: str, cache_dir: Path, *, progress: bool, log: Log | None = None) -> Path:
    """Directory of a built-in model, created on first use (said to `log`): the two random
    bases (builtin:small, builtin:tiny) and the models warmed up from them."""

    def built(what: str, build: Callable[[Path], None]) -> Path:
        return materialise(cache_dir / builtin_dir_name(what), build, log=log, what=what)

    target = builtin_dir_name(name)  # an unknown name raises here
    if name.startswith("builtin:small"):
        small = built("builtin:small", build_small)
        if name == "builtin:small-arith":
            warm = partial(build_warmed_up, small, progress=progress, log=log, recipe=SMALL_ARITH)
            return built(name, warm)
        return small
    tiny = built("builtin:tiny", build_tiny)
    if name == "builtin:tiny-arith":
        warm_arith = partial(build_warmed_up, tiny, progress=progress, log=log)
        return built(name, warm_arith)
    if name == "builtin:tiny-tools":
        warm_tools = partial(build_tiny_tools, tiny, progress=progress, log=log)
        return built(name, warm_tools)
    assert target == tiny.name
    return tiny


@contextmanager
def _progress_bars(enabled: bool) -> Iterator[None]:
    """Silence transformers' loading bars for the block when not `enabled`."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    if not enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


def resolve_model_path(
    name: str,
    cache_dir: Path,
    *,
    progress: bool,
    roots: LocalRoots | None = None,
    log: Log | None = None,
) -> str:
    """What to hand to `from_pretrained`: a built-in's directory, a local dir, or the hub id.

    A local directory must lie inside `roots` (relative ones resolve against `roots.base`);
    without roots the caller is trusted and relative paths are the working directory's."""
    source = parse_model_name(name)
    match source.kind:
        case "builtin":
            return str(builtin_dir(name, cache_dir, progress=progress, log=log))
        case "hub":
            return _hub_source(source.value, log)
    path = resolve_local(source.value, roots or LocalRoots(Path.cwd(), None), kind="model")
    if not path.is_dir():
        raise ValueError(f"model path {str(path)!r} does not exist or is not a directory")
    if not (path / "config.json").is_file():
        raise ValueError(f"model path {str(path)!r} has no config.json")
    return str(path)


def _hub_source(repo_id: str, log: Log | None) -> str:
    """A hub id not in this machine's cache fails in seconds when the hub cannot give it
    (not after from_pretrained's download retries), and is said to be downloading when it can."""
    if not is_cached(repo_id):
        if problem := hub_model_problem(repo_id):
            raise ValueError(f"cannot load model: {problem}")
        if log is not None:
            log("info", f"downloading model {repo_id} from the Hugging Face hub (first use here)")
    return _hub_snapshot(repo_id)


def _hub_snapshot(repo_id: str) -> str:
    """The hub id itself, unless a same-named path under the working directory would make
    `from_pretrained` read that instead: then the hub's own snapshot directory."""
    if not os.path.lexists(repo_id):
        return repo_id
    from huggingface_hub import snapshot_download

    try:
        return str(snapshot_download(repo_id))
    except (OSError, ValueError) as exc:
        raise ValueError(
            f"cannot load model {repo_id!r}: not available from the Hugging Face cache or hub"
        ) from exc


def load_policy(
    name: str,
    *,
    cache_dir: Path,
    device: torch.device | str = "cpu",
    progress: bool = True,
    roots: LocalRoots | None = None,
    log: Log | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Model (fp32 master weights, eval mode) and tokenizer on `device`. The tokenizer keeps
    its own padding side (it is saved in checkpoints as it came); code that pads for
    generation asks for left padding where it pads. `log` hears each wait: a built-in built
    on first use, the loading of the weights."""
    with _progress_bars(progress):
        source = resolve_model_path(name, Path(cache_dir), progress=progress, roots=roots, log=log)
        if log is not None:
            log("info", f"loading model {name}" + (f" from {source}" if source != name else ""))
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
        except OSError as exc:
            raise ValueError(
                f"cannot load model {name!r}: not a built-in, not a local directory, and "
                f"not available from the Hugging Face cache or hub ({exc})"
            ) from exc
    if tokenizer.pad_token is None:
        # Many causal LMs ship without a pad token; masked positions never reach the loss.
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    # transformers wraps .to() in a decorator typed as if unbound
    return model.to(device), tokenizer  # type: ignore[arg-type]


def pick_device(device: str) -> torch.device:
    """`auto` → CUDA when present, else CPU; `cuda[:N]` must exist."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    picked = torch.device(device)
    if picked.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but CUDA is not available")
        index = picked.index or 0
        if index >= torch.cuda.device_count():
            raise ValueError(
                f"device {device!r} requested but only {torch.cuda.device_count()} GPU(s) exist"
            )
    elif picked.type != "cpu":
        raise ValueError(f"unsupported device {device!r}; use auto, cpu or cuda[:N]")
    return picked


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def supports_bf16(device: torch.device | str) -> bool:
    """Whether bf16 compute is native (and so fast) on `device`."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    # Without AVX-512 BF16 or AMX, CPU bf16 is emulated and slower than fp32.
    capability = torch.backends.cpu.get_cpu_capability()
    if "BF16" in capability or "AMX" in capability:
        return True
    return bool(_cpu_flags() & {"avx512_bf16", "amx_bf16"})
