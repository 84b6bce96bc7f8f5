"""The parses an ingest keeps for a retry (ingest/kept_parses.py): a parsed rank's outcome
is kept on disk beside its Parquet files, not in the writer's memory, and a retry replays
it as it was, then runs only the tasks whose outcomes never arrived."""

from __future__ import annotations

from pathlib import Path

from stepscope.ingest.executors import InlineExecutor
from stepscope.ingest.kept_parses import OUTCOME_FILE, KeptParses, OnDisk, ReplayExecutor
from stepscope.ingest.tasks import RankParsed, RankTask, run_task

HEALTHY = Path(__file__).resolve().parents[2] / "sample_traces" / "simulated" / "healthy"


def _tasks(stage: Path, n: int) -> list[RankTask]:
    files = sorted(HEALTHY.glob("rank*.json.gz"))[:n]
    return [RankTask(i, str(f), f.name, str(stage / str(i)), len(files))
            for i, f in enumerate(files)]


def test_a_parsed_rank_is_kept_on_disk_and_replayed_as_it_was(tmp_path: Path) -> None:
    """Kept in memory, the outcomes of a 2,048-rank job (each with the job's process
    groups, every rank listed) took ~79 KB each in the writer; kept on disk, the writer
    holds an index and a path per rank, and the replay gives back an equal outcome."""
    task = _tasks(tmp_path, 1)[0]
    parsed = run_task(task)
    assert isinstance(parsed, RankParsed)
    kept = KeptParses(budget=1 << 30)
    kept.record(parsed)
    assert kept.outcomes == [OnDisk(0, str(Path(task.stage_dir) / OUTCOME_FILE))]
    kept.all_arrived = True
    assert list(ReplayExecutor(kept).run([task])) == [parsed]


def test_a_retry_runs_only_the_tasks_that_never_arrived(tmp_path: Path) -> None:
    """Two of three outcomes kept: the replay gives those two back and parses the third,
    recording it, so that a further retry replays all three."""
    tasks = _tasks(tmp_path, 3)
    kept = KeptParses(budget=1 << 30)
    for task in tasks[:2]:
        kept.record(run_task(task))
    replay = ReplayExecutor(kept, InlineExecutor(threads=1))
    outcomes = list(replay.run(tasks))
    assert [o.index for o in outcomes] == [0, 1, 2]
    assert [o.index for o in kept.outcomes] == [0, 1, 2] and kept.replayable()
    assert all(isinstance(o, OnDisk) for o in kept.outcomes)
