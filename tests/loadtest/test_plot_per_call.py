"""The per-call plot's SVG: well-formed, every point inside the axes, log scale in both."""

from __future__ import annotations

import xml.dom.minidom

from loadtest.plot_per_call import measure, svg


def test_points_sit_on_log_log_axes() -> None:
    series = [
        ("a", "#000", False, [(10_000.0, 1.0), (100_000.0, 10.0), (1_000_000.0, 100.0)]),
        ("b & <c>", "#f00", True, [(10_000.0, 0.5), (4_000_000.0, 40_000.0)]),
    ]
    document = xml.dom.minidom.parseString(svg(series, "title"))
    circles = [
        (float(c.getAttribute("cx")), float(c.getAttribute("cy")))
        for c in document.getElementsByTagName("circle")
    ]
    assert len(circles) == 5
    (x0, y0), (x1, y1), (x2, y2) = circles[:3]
    assert abs((x1 - x0) - (x2 - x1)) < 0.2 and abs((y0 - y1) - (y1 - y2)) < 0.2  # decades
    assert x0 < x1 < x2 and y0 > y1 > y2  # up and to the right
    frame = document.getElementsByTagName("rect")[1]
    left, top = float(frame.getAttribute("x")), float(frame.getAttribute("y"))
    right = left + float(frame.getAttribute("width"))
    bottom = top + float(frame.getAttribute("height"))
    assert all(left <= x <= right and top <= y <= bottom for x, y in circles)
    labels = [t.firstChild.data for t in document.getElementsByTagName("text") if t.firstChild]
    assert "b & <c>" in labels and "4M" not in labels and "10M" in labels
    assert len(document.getElementsByTagName("polyline")) == 2


def test_a_small_measurement_gives_every_series() -> None:
    """The measuring half runs against the benchmark it calls (a renamed helper broke it)."""
    series = measure("qwen3", [20_000], 3)
    assert [name for name, *_ in series] == [
        "toksplice session encode (append)",
        "reference full encode",
        "native full encode",
    ]
    assert all(len(points) == 1 and min(points[0]) > 0 for *_, points in series)
