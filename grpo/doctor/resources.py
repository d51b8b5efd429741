"""Resource rules: where the time and the memory of a step go.

`time/generate` and `time/step` are the step's phases (grpo/report/timing.py); `memory/peak_gb`
and `memory/device_gb` are the peak of the step's allocations and the device's size, on
CUDA only (grpo/report/memory.py). Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from grpo.doctor.finding import Severity, Suggestion, Verdict
from grpo.doctor.rule import Detector, Metrics, Rule
from grpo.doctor.windows import Window, percent
from grpo.spec import JobSpec

RESOURCE_WINDOW = 10
GENERATION_SHARE = 0.8
"""Share of step time spent sampling at which decoding in larger batches is the lever
(generation dominates GRPO steps: TRL's vLLM integration exists for this reason)."""
MEMORY_SHARE = 0.9
"""Peak allocation at this share of the device: one longer completion away from out of
memory."""
MEMORY_CRITICAL = 0.97


class GenerationBound:
    """Sampling takes most of each step while generation_batch_size decodes in small chunks."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.share = Window(RESOURCE_WINDOW)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        generate, total = metrics.get("time/generate"), metrics.get("time/step")
        if generate is None or not total:
            return None
        self.share.push(generate / total)
        mean = self.share.mean
        if not self.share.is_full or mean < GENERATION_SHARE:
            return None
        chunk = self.spec.generation_batch_size or self.spec.completions_per_step
        larger = min(self.spec.completions_per_step, 2 * chunk)
        return Verdict(
            severity=Severity.INFO,
            message=(
                f"Generation took {percent(mean)} of each step over the last "
                f"{RESOURCE_WINDOW} steps, decoding {chunk} of {self.spec.completions_per_step} "
                "completions at a time (the vLLM backend, where available, decodes faster)."
            ),
            metric="time/generate",
            facts={"generation_share": mean},
            suggestions=(
                Suggestion("generation_batch_size", larger, "decode more completions at once"),
            ),
        )


def _generation_bound(spec: JobSpec) -> Detector | None:
    """Only where a larger generation_batch_size is possible: otherwise nothing to change."""
    size = spec.generation_batch_size
    return GenerationBound(spec) if size is not None and size < spec.completions_per_step else None


class MemoryPressure:
    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.share = Window(3)

    def observe(self, step: int, metrics: Metrics) -> Verdict | None:
        peak, device = metrics.get("memory/peak_gb"), metrics.get("memory/device_gb")
        if peak is None or not device:
            return None
        self.share.push(peak / device)
        mean = self.share.mean
        if mean < MEMORY_SHARE:
            return None
        return Verdict(
            severity=Severity.CRITICAL if mean >= MEMORY_CRITICAL else Severity.WARNING,
            message=(
                f"Each step's peak allocation reached {percent(mean)} of the device "
                f"({peak:.1f} of {device:.1f} GB): a longer batch will run out of memory."
            ),
            metric="memory/peak_gb",
            facts={"memory_share": mean, "memory/peak_gb": peak, "memory/device_gb": device},
            suggestions=self._suggestions(),
        )

    def _suggestions(self) -> tuple[Suggestion, ...]:
        spec, changes = self.spec, []
        micro = spec.micro_batch_size or spec.completions_per_step
        if micro > 1:
            why = "fewer completions per forward and backward pass"
            changes.append(Suggestion("micro_batch_size", max(1, micro // 2), why))
        if not spec.gradient_checkpointing:
            why = "recompute activations instead of keeping them"
            changes.append(Suggestion("gradient_checkpointing", True, why))
        chunk = spec.generation_batch_size or spec.completions_per_step
        if chunk > spec.num_generations:
            smaller = max(
                spec.num_generations, chunk // 2 // spec.num_generations * spec.num_generations
            )
            changes.append(Suggestion("generation_batch_size", smaller, "a smaller KV cache"))
        return tuple(changes)


GENERATION_BOUND = Rule(
    "generation_bound", "resources", "Generation-bound steps", _generation_bound
)
MEMORY_PRESSURE = Rule("memory_pressure", "resources", "Memory near the limit", MemoryPressure)
