"""The doctor of one run: every rule's detector, fed each step once, turned into findings.

A finding is an episode of one rule: it opens at the first step the rule's condition holds,
grows while it holds, escalates to the worst severity it reached, and is resolved after
QUIET_STEPS steps without it (reopened, same id, if it returns soon after). `observe`
answers the findings that changed and are worth writing now: opened, escalated, resolved,
or refreshed on a schedule that thins out as the episode lasts (a 10,000-step episode is
written about 40 times). O(1) per step per rule: detectors keep windows, the doctor keeps
the last EVIDENCE_STEPS steps' metrics by reference.

`diagnose` is the same fold over a whole stored series: the findings of a run are a pure
function of its metrics. Knows nothing of torch, HTTP or SQL.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from grpo.doctor.finding import Evidence, ExampleQuery, Finding, Severity, Verdict
from grpo.doctor.registry import RULES
from grpo.doctor.rule import Detector, Metrics, Rule
from grpo.spec import JobSpec

QUIET_STEPS = 3
"""Steps without a verdict after which an open finding is resolved."""
REOPEN_STEPS = 20
"""A resolved finding whose rule fires again within this many steps is reopened, not
doubled: a metric hovering at a threshold makes one finding, not hundreds."""
REFRESH_STEPS = 10
"""An open finding is rewritten (last step, message, evidence) at least this far apart, and
then every quarter of its length."""
EVIDENCE_STEPS = 60
"""Steps of the evidence metric a finding carries (the dashboard draws the whole curve)."""


@dataclass
class Episode:
    rule: Rule
    first_step: int
    last_step: int
    severity: Severity
    verdict: Verdict
    examples: ExampleQuery | None
    is_open: bool = True
    quiet: int = 0
    written_step: int = -1
    values: tuple[tuple[int, float], ...] = ()
    """The evidence values as last written: what is left once the steps leave `recent`."""

    def extend(self, step: int, verdict: Verdict) -> bool:
        """Hold at `step`; True when the finding escalated."""
        self.last_step, self.verdict, self.quiet, self.is_open = step, verdict, 0, True
        self.examples = verdict.examples or self.examples
        if verdict.severity.rank > self.severity.rank:
            self.severity = verdict.severity
            return True
        return False

    def is_due(self, step: int) -> bool:
        return step - self.written_step >= max(REFRESH_STEPS, (step - self.first_step) // 4)


class Doctor:
    def __init__(self, spec: JobSpec) -> None:
        self.detectors: list[tuple[Rule, Detector]] = [
            (rule, detector) for rule in RULES if (detector := rule.start(spec)) is not None
        ]
        self.episodes: dict[str, Episode] = {}  # each rule's latest, open or resolved
        self.finished: list[Episode] = []
        self.recent: deque[tuple[int, Metrics]] = deque(maxlen=EVIDENCE_STEPS)

    def observe(self, step: int, metrics: Metrics) -> list[Finding]:
        """Feed one step (in step order); the findings to write now."""
        self.recent.append((step, metrics))
        changed = []
        for rule, detector in self.detectors:
            episode = self._advance(rule, step, detector.observe(step, metrics))
            if episode is not None:
                finding = self.finding(episode)
                episode.written_step, episode.values = step, tuple(finding.evidence.values)
                changed.append(finding)
        return changed

    def _advance(self, rule: Rule, step: int, verdict: Verdict | None) -> Episode | None:
        """Move the rule's episode on by one step; the episode when it is to be written."""
        episode = self.episodes.get(rule.id)
        if verdict is not None:
            if episode is None or step - episode.last_step > REOPEN_STEPS:
                if episode is not None:
                    self.finished.append(episode)
                episode = Episode(rule, step, step, verdict.severity, verdict, verdict.examples)
                self.episodes[rule.id] = episode
                return episode
            was_open = episode.is_open
            escalated = episode.extend(step, verdict)
            return episode if escalated or not was_open or episode.is_due(step) else None
        if episode is None or not episode.is_open:
            return None
        episode.quiet += 1
        if episode.quiet < QUIET_STEPS:
            return None
        episode.is_open = False
        return episode

    def settle(self) -> list[Finding]:
        """Take out the finished episodes that no later step can change (the evidence window
        has moved past their last step) and answer their findings, final. A doctor that
        settles after each step holds one window of steps, not every episode of the run:
        what the store keeps of a long run between two stretches of its diagnosis."""
        if not self.recent:
            return []
        oldest = self.recent[0][0]
        done = [e for e in self.finished if e.last_step < oldest]
        if not done:
            return []
        self.finished = [e for e in self.finished if e.last_step >= oldest]
        return [self.finding(e) for e in done]

    def findings(self) -> list[Finding]:
        """Every episode so far (since the last `settle`), open and resolved, by the step it
        opened."""
        episodes = [*self.finished, *self.episodes.values()]
        return [self.finding(e) for e in sorted(episodes, key=lambda e: e.first_step)]

    def finding(self, episode: Episode) -> Finding:
        verdict = episode.verdict
        values = list(episode.values)
        if self.recent and self.recent[0][0] <= episode.last_step:
            values = [
                (s, float(m[verdict.metric]))
                for s, m in self.recent
                if verdict.metric in m and s <= episode.last_step
            ]
        return Finding(
            rule=episode.rule.id,
            title=episode.rule.title,
            severity=episode.severity,
            status="open" if episode.is_open else "resolved",
            first_step=episode.first_step,
            last_step=episode.last_step,
            message=verdict.message,
            evidence=Evidence(metric=verdict.metric, values=values, facts=dict(verdict.facts)),
            suggestions=verdict.suggestions,
            examples=episode.examples,
        )


def diagnose(spec: JobSpec, rows: Iterable[tuple[int, Metrics]]) -> list[Finding]:
    """The findings of a stored run: its metric rows, in step order, through a new doctor."""
    doctor = Doctor(spec)
    for step, metrics in rows:
        doctor.observe(step, metrics)
    return doctor.findings()
