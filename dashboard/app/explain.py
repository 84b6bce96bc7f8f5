"""What the dashboard's numbers mean, said where they appear: a sentence with the formula
for each (the `help` of a metric, a caption under a chart), and a link to the section of
the docs that defines it (the Help page shows docs/*.md from the checkout).

The texts restate docs/mfu.md, docs/attribution.md and docs/advisor.md; they compute
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from stepscope.dashboard.app.context import deep_link


@dataclass(frozen=True)
class Explanation:
    """One number's meaning: what it is, its formula, and where the docs define it."""

    what: str
    formula: str
    doc: str       # docs/<doc>.md
    section: str   # the heading of that file that defines it

    @property
    def link(self) -> str:
        return deep_link("help", doc=self.doc, section=self.section)

    def help(self) -> str:
        """The text of a metric's (?) tooltip: meaning, formula, docs link."""
        return f"{self.what}\n\n`{self.formula}`\n\n[More in docs/{self.doc}.md]({self.link})"

    def caption(self) -> str:
        """One line under a chart or table: meaning, formula, docs link."""
        return f"{self.what} `{self.formula}` · [docs/{self.doc}.md]({self.link})"


MFU = Explanation(
    "MFU: the share of the GPUs' peak that the model's own FLOPs used over the whole step.",
    "MFU = model FLOPs per step / (step time × GPUs × peak FLOP/s per GPU)",
    "mfu", "MFU, HFU and the waterfall")
HFU = Explanation(
    "HFU: like MFU, with the FLOPs the hardware really ran (recomputed forwards for "
    "activation checkpointing and FlashAttention's backward recompute included).",
    "HFU = (model + recomputed FLOPs) / (step time × GPUs × peak)",
    "mfu", "MFU, HFU and the waterfall")
WATERFALL = Explanation(
    "A stage's points are the MFU regained if its time went away at today's kernel "
    "efficiency, so its points are its share of the step times the efficiency "
    "(88% of the step idle at 6% efficiency is −5 points).",
    "points = −time share × efficiency × 100",
    "mfu", "The waterfall")
EXPOSED = Explanation(
    "Exposed communication: a collective runs past its wait part and nothing else runs; "
    "overlapped: its time under compute or another collective (the step does not pay "
    "for it).",
    "collective time = exposed + straggler wait + in bubble + overlapped",
    "attribution", "Collectives: wait part and exposed part")
STRAGGLER_WAIT = Explanation(
    "Straggler wait: a rank has arrived at a collective and waits for the last rank "
    "(the first d − d_min of the collective); bubble: a pipeline send/recv runs, the "
    "stage waits for its neighbour.",
    "wait part = d − d_min (d_min: the same collective's shortest duration over ranks)",
    "attribution", "Collectives: wait part and exposed part")
BUBBLE = Explanation(
    "Pipeline bubble: time a stage spends in send/recv, waiting for the previous or the "
    "next stage; 1F1B's theory with S stages and M microbatches is (S−1)/(S−1+M).",
    "bubble theory = (S − 1) / (S − 1 + M)",
    "attribution", "Pipeline")
WAIT_CAUSED = Explanation(
    "Wait caused: the straggler wait of the other ranks in the collectives where this "
    "rank arrived last (ms per step); a straggler causes a lot and suffers none.",
    "caused(r) = Σ over collectives where r arrived last of the others' wait",
    "attribution", "Stragglers")
SLOWDOWN = Explanation(
    "Slowdown: the share of the step each waiting rank loses to the straggler.",
    "slowdown = waited-on time per waiting rank / step time",
    "attribution", "Stragglers")
