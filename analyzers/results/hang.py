"""Why did the job hang? (`stepscope hang`, docs/hang.md).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from stepscope.analyzers.results.base import Model

HANG_SCHEMA_VERSION = 1


Rank = Annotated[int, msgspec.Meta(ge=0)]


Sizes = list[list[int]] | None  # one shape per tensor: [[4027, 5120]]


CollectiveState = Literal["scheduled", "started", "completed"]


StuckKind = Literal["not_entered", "not_completed"]


MismatchField = Literal["op", "dtype", "sizes"]


class GroupProgress(Model, frozen=True, kw_only=True):
    """How far one process group got (keyed by pg_name, the same on every rank)."""
    pg_name: str
    pg_desc: str
    ranks: list[Rank]
    last_completed_by_all: int | None   # collective seq every dumped member completed
    last_enqueued_max: int | None
    ranks_without_dump: list[Rank]
    membership_conflict: bool           # dumps disagree on the member list


class StuckCollective(Model, frozen=True, kw_only=True):
    """The first collective of a group that did not finish everywhere."""
    pg_name: str
    pg_desc: str
    op: str | None                      # e.g. all_to_all (None: no dump holds the entry)
    profiling_name: str | None          # e.g. nccl:all_to_all
    seq: int                            # collective_seq_id in the group
    sizes: Sizes                        # input sizes, from the lowest rank holding it
    output_sizes: Sizes
    dtype: str | None
    state: CollectiveState | None       # of the lowest rank holding it
    kind: StuckKind
    first_created_ns: int | None        # when the first rank enqueued it (epoch ns)
    missing_ranks: list[Rank]           # members that never entered it
    waiting_ranks: list[Rank]           # members that entered it and wait
    ranks_without_dump: list[Rank]


class RankOps(Model, frozen=True, kw_only=True):
    """What one rank issued for a sequence number (desync evidence)."""
    rank: int
    ops: list[str]
    sizes: list[Sizes]
    dtypes: list[list[str] | None]


class Mismatch(Model, frozen=True, kw_only=True):
    """One sequence number of one group issued differently across ranks."""
    pg_name: str
    pg_desc: str
    seq: int
    fields: Annotated[list[MismatchField], msgspec.Meta(min_length=1)]
    ranks: list[RankOps]


class CompletionLag(Model, frozen=True, kw_only=True):
    """Members that did not see collectives complete that other members completed."""
    pg_name: str
    pg_desc: str
    lagging_ranks: list[Rank]
    ahead_ranks: list[Rank]
    first_seq: int                      # first collective the laggards did not complete
    last_seq: int                       # last collective the others completed


class P2PWait(Model, frozen=True, kw_only=True):
    """A send or recv that did not complete."""
    pg_name: str
    pg_desc: str
    rank: int
    op: Literal["send", "recv"]
    peer_rank: int | None
    state: Literal["scheduled", "started"]
    sizes: Sizes
    dtype: str | None
    peer_posted: bool | None            # None: the peer left no dump


class Suspect(Model, frozen=True, kw_only=True):
    """A rank that may have caused the hang; `idle`: nothing in flight, so it is stuck
    outside NCCL."""
    rank: int
    idle: bool
    reasons: Annotated[list[str], msgspec.Meta(min_length=1)]


class HangReport(Model, frozen=True, kw_only=True):
    """Everything `stepscope hang` says about one run (docs/hang.md): suspects best first,
    stuck collectives first to hang first."""
    schema_version: int = HANG_SCHEMA_VERSION
    run: str
    verdict: Annotated[str, msgspec.Meta(min_length=1)]
    suspect_ranks: list[Rank]
    suspects: list[Suspect]
    stuck: list[StuckCollective]
    mismatches: list[Mismatch]
    completion_lags: list[CompletionLag]
    p2p_waits: list[P2PWait]
    groups: list[GroupProgress]
    dump_ranks: list[Rank]
    fr_versions: list[str]
    nccl_versions: list[str]
    notes: list[str]
