"""The first try's parsed files, kept for a retry in a larger room.

An ingest that runs out of its DuckDB room is rolled back and runs again with more room
(ingest/writer.py, `_ingest_in_rooms`). Parsing is most of an ingest's time (a 4,096-rank
job: half of 59 minutes went to parsing every file a second time), and the parse does not
depend on the room: only the appends, the attribution and the commit do. So the first try
records the outcome of every task in the order it arrived and keeps each rank's Parquet
files after appending them; a retry replays those outcomes instead of starting workers.

Kept files cost disk: up to a quarter of what the stage folder's disk had free when the
ingest began. Past that the first try gives up keeping (it deletes the files appended so
far and each batch's as it goes, as without keeping) and a retry parses again. A try
that stopped before every outcome arrived (the room ran out during an append) is resumed:
the retry replays the outcomes that arrived and parses only the files whose outcomes
never did (those still in flight, or not yet started), recording them in turn.

A parsed rank's outcome is kept on disk beside its Parquet files (`outcome.pickle`), not
in the writer: it holds the trace's distributedInfo, whose default process group lists
every rank, so the outcomes of a 2,048-rank job held in memory took ~79 KB each, 2,048
times (benchmarks/README.md, "Scale at the defaults").
"""

from __future__ import annotations

import pickle
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stepscope.ingest.executors import Executor
from stepscope.ingest.tasks import Outcome, RankParsed, Task

KEEP_SHARE_OF_FREE_DISK = 4  # keep at most 1/4 of the stage disk's free space
OUTCOME_FILE = "outcome.pickle"  # a kept rank's outcome, in its rank folder


def keep_budget(stage: Path) -> int:
    """Bytes of Parquet the first try may keep for a retry."""
    return shutil.disk_usage(stage).free // KEEP_SHARE_OF_FREE_DISK


def rank_folder(outcome: RankParsed) -> Path:
    """The folder holding one parsed rank's Parquet files (one per table)."""
    return Path(next(iter(outcome.tables.table_files.values()))).parent


@dataclass(frozen=True, slots=True)
class OnDisk:
    """A kept outcome of a parsed rank, pickled in its rank folder (OUTCOME_FILE)."""

    index: int
    path: str

    def load(self) -> Outcome:
        outcome: Outcome = pickle.loads(Path(self.path).read_bytes())  # our own file
        return outcome


Kept = Outcome | OnDisk


@dataclass
class KeptParses:
    """What the first try parsed, while it is still whole."""

    budget: int
    outcomes: list[Kept] = field(default_factory=list)
    kept_bytes: int = 0
    keeping: bool = True   # false once over budget: nothing is kept from then on
    all_arrived: bool = False  # every task's outcome was recorded
    counted: set[Path] = field(default_factory=set)  # folders in kept_bytes

    def replayable(self) -> bool:
        """Every task's outcome is kept: a retry parses nothing."""
        return self.keeping and self.all_arrived

    def resumable(self) -> bool:
        """Some outcomes are kept: a retry replays them and parses only the rest."""
        return self.keeping and bool(self.outcomes)

    def record(self, outcome: Outcome) -> None:
        """Keep a task's outcome as it arrives: a parsed rank's on disk, in its folder
        (private to this ingest), any other in memory (a failure, a skip, an NCCL file's
        few fields)."""
        if isinstance(outcome, RankParsed):
            path = rank_folder(outcome) / OUTCOME_FILE
            path.write_bytes(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
            self.outcomes.append(OnDisk(outcome.index, str(path)))
        else:
            self.outcomes.append(outcome)

    def keep(self, sizes: dict[Path, int]) -> bool:
        """After an append: keep these ranks' files (Parquet bytes by rank folder; a
        folder an earlier try kept is counted once) if the budget allows (True), else
        give up keeping and delete every kept file (False: the caller deletes these)."""
        nbytes = sum(n for folder, n in sizes.items() if folder not in self.counted)
        if self.keeping and self.kept_bytes + nbytes <= self.budget:
            self.kept_bytes += nbytes
            self.counted.update(sizes)
            return True
        if self.keeping:
            self.keeping = False
            for outcome in self.outcomes:
                if isinstance(outcome, OnDisk):
                    shutil.rmtree(Path(outcome.path).parent, ignore_errors=True)
            self.outcomes.clear()
            self.counted.clear()
        return False


class RecordingExecutor:
    """The executor of the first try, recording each outcome as it arrives."""

    def __init__(self, inner: Executor, kept: KeptParses) -> None:
        self.inner, self.kept = inner, kept
        self.name = inner.name

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        for outcome in self.inner.run(tasks):
            if self.kept.keeping:
                self.kept.record(outcome)
            yield outcome
        self.kept.all_arrived = True

    def cancel(self) -> None:
        self.inner.cancel()

    def start(self, n_tasks: int) -> None:
        self.inner.start(n_tasks)

    def close(self) -> None:
        self.inner.close()


class ReplayExecutor:
    """A retry's executor: the kept outcomes again, in the order they came (no file is
    read for them), then the tasks whose outcomes never arrived on `rest` (None: every
    outcome is kept, and no worker starts), recorded in `kept` for a further retry."""

    name = "replay"

    def __init__(self, kept: KeptParses, rest: Executor | None = None) -> None:
        self.kept, self.rest = kept, rest
        self.outcomes = list(kept.outcomes)
        self._cancelled = False

    def run(self, tasks: Sequence[Task]) -> Iterator[Outcome]:
        for outcome in self.outcomes:
            if self._cancelled:
                return
            yield outcome.load() if isinstance(outcome, OnDisk) else outcome
        remaining = unfinished(tasks, self.outcomes)
        if not remaining:
            self.kept.all_arrived = True
            return
        assert self.rest is not None, "a task's outcome is neither kept nor to be run"
        for task in remaining:  # what the stopped try left of it
            shutil.rmtree(task.stage_dir, ignore_errors=True)
        yield from RecordingExecutor(self.rest, self.kept).run(remaining)

    def cancel(self) -> None:
        self._cancelled = True
        if self.rest is not None:
            self.rest.cancel()

    def start(self, n_tasks: int) -> None:
        if self.rest is not None and n_tasks > len(self.outcomes):
            self.rest.start(n_tasks - len(self.outcomes))

    def close(self) -> None:
        if self.rest is not None:
            self.rest.close()


def unfinished(tasks: Sequence[Task], outcomes: Sequence[Kept]) -> list[Task]:
    """The tasks, in order, that have no outcome among `outcomes`."""
    arrived = {outcome.index for outcome in outcomes}
    return [task for task in tasks if task.index not in arrived]


__all__ = ["KeptParses", "RecordingExecutor", "ReplayExecutor", "keep_budget", "rank_folder",
           "unfinished"]
