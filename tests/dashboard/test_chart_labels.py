"""Labels beside the Plan scatter's points (dashboard/app/charts.py label_positions): a
label goes where it overlaps no label placed before it and no point, else it is left
out (the hover still names every layout)."""

from __future__ import annotations

from stepscope.dashboard.app.charts import (
    CHAR_WIDTH,
    LABEL_HEIGHT,
    LABEL_PLACES,
    label_positions,
)

NAME = "TP4 PP1 DP2"


def boxes(x: list[float], y: list[float],
          where: list[str | None]) -> list[tuple[float, float, float, float]]:
    """The label boxes as label_positions estimates them (x and y already in 0..1)."""
    offset = {place: (dx, dy) for place, dx, dy in LABEL_PLACES}
    w, h = CHAR_WIDTH * len(NAME), LABEL_HEIGHT
    out = []
    for px, py, place in zip(x, y, where, strict=True):
        if place is not None:
            dx, dy = offset[place]
            cx, cy = px + dx * w, py + dy * h
            out.append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
    return out


def test_apart_points_keep_the_label_above_them() -> None:
    assert label_positions([0.0, 1.0], [0.0, 1.0], [NAME, NAME]) == ["top center"] * 2


def test_two_close_points_label_on_both_sides_without_overlap() -> None:
    # the straggler run's plan: TP4 PP1 DP2 at (0.48 GB, 32.0%), TP2 PP2 DP2 at (0.55, 33.0)
    x, y = [0.0, 0.48, 0.55, 2.0], [20.0, 32.0, 33.0, 45.0]
    where = label_positions(x, y, [NAME] * 4)
    assert None not in where and where[1] != where[2]
    sx = [(v - 0.0) / 2.0 for v in x]
    sy = [(v - 20.0) / 25.0 for v in y]
    placed = boxes(sx, sy, where)
    assert len(placed) == 4
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])


def test_a_crowd_names_what_fits_and_leaves_the_rest_to_the_hover() -> None:
    x = [0.0, 1.0] + [0.5] * 6
    y = [0.0, 1.0] + [0.5 + 0.001 * i for i in range(6)]
    where = label_positions(x, y, [NAME] * 8)
    assert where[:2] == ["top center"] * 2 and None in where[2:]
    assert label_positions([], [], []) == []
