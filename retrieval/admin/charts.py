"""Charts drawn on the server as SVG, without scripts: a golden set's metric history,
search volume and latency over a period, and the dashboard's trend lines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from retrieval.models import EvalRun
from retrieval.services.quality.analytics import Bucket

#: Metric -> line colour and dash pattern: every colour has at least 3:1 contrast on white,
#: and the dashes tell the lines apart without colour.
SERIES = {
    "ndcg@10": "#417690",
    "recall@100": "#b35c00",
    "mrr@10": "#3f7d36",
    "map@100": "#a4508b",
}
DASHES = {"ndcg@10": "", "recall@100": "6 3", "mrr@10": "2 2", "map@100": "8 2 2 2"}
WIDTH, HEIGHT, PAD = 640, 220, 32


def history_svg(runs: Sequence[EvalRun]) -> SafeString:
    """Return an SVG of each metric over ``runs`` (oldest first), one point per run."""
    runs = [run for run in runs if run.status == EvalRun.Status.SUCCEEDED]
    if not runs:
        return mark_safe('<p class="retrieval-empty">No finished evaluation yet.</p>')
    step = (WIDTH - 2 * PAD) / max(len(runs) - 1, 1)

    def x(i: int) -> float:
        return PAD + i * step if len(runs) > 1 else WIDTH / 2

    def y(value: float) -> float:
        return HEIGHT - PAD - max(0.0, min(1.0, value)) * (HEIGHT - 2 * PAD)

    grid = format_html_join(
        "",
        '<line x1="{}" y1="{}" x2="{}" y2="{}" class="retrieval-grid"/>'
        '<text x="4" y="{}" class="retrieval-axis">{}</text>',
        (
            (PAD, f"{y(v):.1f}", WIDTH - PAD, f"{y(v):.1f}", f"{y(v) + 4:.1f}", f"{v:.2f}")
            for v in (0, 0.25, 0.5, 0.75, 1)
        ),
    )
    lines = []
    for metric, colour in SERIES.items():
        points = [(x(i), y(run.metrics.get(metric, 0.0))) for i, run in enumerate(runs)]
        lines.append(
            format_html(
                '<polyline fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}" '
                'points="{}" data-metric="{}"/>',
                colour,
                DASHES[metric],
                " ".join(f"{px:.1f},{py:.1f}" for px, py in points),
                metric,
            )
        )
        lines.append(
            format_html_join(
                "",
                '<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}</title></circle>',
                (
                    (
                        f"{px:.1f}",
                        f"{py:.1f}",
                        colour,
                        f"#{run.pk} {run.pipeline}: {metric} {run.metrics[metric]:.4f}",
                    )
                    for (px, py), run in zip(points, runs, strict=True)
                    if metric in run.metrics
                ),
            )
        )
    labels = format_html_join(
        "",
        '<text x="{}" y="{}" class="retrieval-axis" text-anchor="middle">#{}</text>',
        ((f"{x(i):.1f}", HEIGHT - 10, run.pk) for i, run in enumerate(runs)),
    )
    table = data_table(
        "Metric history",
        ["run", "pipeline", *SERIES],
        (
            [f"#{run.pk}", run.pipeline]
            + [f"{run.metrics[m]:.4f}" if m in run.metrics else "—" for m in SERIES]
            for run in runs
        ),
    )
    return format_html(
        '<div class="retrieval-chart"><svg xmlns="http://www.w3.org/2000/svg" width="{}" '
        'height="{}" viewBox="0 0 {} {}" role="img" aria-label="Metric history">{}{}{}</svg>'
        "{}{}</div>",
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        grid,
        mark_safe("".join(lines)),
        labels,
        _legend({metric: (colour, DASHES[metric]) for metric, colour in SERIES.items()}),
        table,
    )


# Search analytics: volume and latency over a period, and the dashboard's trend line.

#: Colours of the analytics charts, each with at least 3:1 contrast on white; p50 and p95
#: also differ by dash pattern and marker shape.
VOLUME, EMPTY, P50, P95 = "#417690", "#c0392b", "#3f7d36", "#b35c00"


def _time_label(start: datetime, step: str) -> str:
    local = timezone.localtime(start) if timezone.is_aware(start) else start
    return f"{local:%d %b %H:00}" if step == "hour" else f"{local:%d %b}"


def _frame(
    label: str, body: str, *, top: float, unit: str, buckets: Sequence[Bucket], step: str
) -> SafeString:
    """Wrap ``body`` in an SVG with a y grid up to ``top`` and a few time labels."""
    inner = HEIGHT - 2 * PAD
    grid = format_html_join(
        "",
        '<line x1="{}" y1="{}" x2="{}" y2="{}" class="retrieval-grid"/>'
        '<text x="2" y="{}" class="retrieval-axis">{}</text>',
        (
            (
                PAD + 14,
                f"{HEIGHT - PAD - f * inner:.1f}",
                WIDTH - PAD,
                f"{HEIGHT - PAD - f * inner:.1f}",
                f"{HEIGHT - PAD - f * inner + 4:.1f}",
                f"{_tick(top * f)}{unit}",
            )
            for f in (0, 0.5, 1)
        ),
    )
    every = max(1, len(buckets) // 6)
    labels = format_html_join(
        "",
        '<text x="{}" y="{}" class="retrieval-axis" text-anchor="middle">{}</text>',
        (
            (f"{_x(i, len(buckets)):.1f}", HEIGHT - 10, _time_label(bucket.start, step))
            for i, bucket in enumerate(buckets)
            if i % every == 0
        ),
    )
    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" '
        'role="img" aria-label="{}">{}{}{}</svg>',
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        label,
        grid,
        body,
        labels,
    )


def _tick(value: float) -> str:
    """An axis label: whole numbers from 10 up, one decimal at most below (``2.5``, ``3``)."""
    return f"{value:.0f}" if value >= 10 else f"{round(value, 1):g}"


def _x(i: int, count: int) -> float:
    """The centre of bucket ``i`` of ``count`` across the plot."""
    left, width = PAD + 14, WIDTH - 2 * PAD - 14
    return left + (i + 0.5) * width / max(count, 1)


def volume_svg(buckets: Sequence[Bucket], step: str) -> SafeString:
    """Return bars of searches per bucket, the share that found nothing in red."""
    if not any(bucket.searches for bucket in buckets):
        return mark_safe('<p class="retrieval-empty">No searches in this period.</p>')
    top = max(bucket.searches for bucket in buckets)
    inner = HEIGHT - 2 * PAD
    width = max(1.0, (WIDTH - 2 * PAD - 14) / len(buckets) * 0.8)

    def bar(i: int, value: int, colour: str, kind: str, bucket: Bucket) -> str:
        height = value / top * inner
        return format_html(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="{}" data-series="{}">'
            "<title>{}: {} searches, {} without results</title></rect>",
            f"{_x(i, len(buckets)) - width / 2:.1f}",
            f"{HEIGHT - PAD - height:.1f}",
            f"{width:.1f}",
            f"{height:.1f}",
            colour,
            kind,
            _time_label(bucket.start, step),
            bucket.searches,
            bucket.empty,
        )

    bars = "".join(
        bar(i, b.searches, VOLUME, "searches", b) + (bar(i, b.empty, EMPTY, "empty", b))
        for i, b in enumerate(buckets)
        if b.searches
    )
    legend = _legend({"searches": VOLUME, "no results": EMPTY})
    svg = _frame("Searches", mark_safe(bars), top=top, unit="", buckets=buckets, step=step)
    return format_html('<div class="retrieval-chart" data-chart="volume">{}{}</div>', svg, legend)


def latency_svg(buckets: Sequence[Bucket], step: str) -> SafeString:
    """Return the p50 and p95 latency per bucket as two lines (ms)."""
    measured = [b for b in buckets if b.p95 is not None]
    if not measured:
        return mark_safe('<p class="retrieval-empty">No searches in this period.</p>')
    top = max(b.p95 for b in measured) or 1.0
    inner = HEIGHT - 2 * PAD
    lines = []
    # p50 solid with round markers, p95 dashed with square ones, each named at its end.
    for name, colour, dash, marker in (("p50", P50, "", "circle"), ("p95", P95, "6 3", "square")):
        points = [
            (_x(i, len(buckets)), HEIGHT - PAD - getattr(b, name) / top * inner, b)
            for i, b in enumerate(buckets)
            if getattr(b, name) is not None
        ]
        lines.append(
            format_html(
                '<polyline fill="none" stroke="{}" stroke-width="2" stroke-dasharray="{}" '
                'points="{}" data-series="{}"/>',
                colour,
                dash,
                " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points),
                name,
            )
        )
        lines.append(
            format_html_join(
                "",
                "{}",
                (
                    (
                        _marker(
                            marker,
                            x,
                            y,
                            colour,
                            f"{_time_label(b.start, step)}: {name} {getattr(b, name):.1f} ms",
                        ),
                    )
                    for x, y, b in points
                ),
            )  # fmt: skip
        )
        x, y, _ = points[-1]
        lines.append(
            format_html(
                '<text x="{}" y="{}" class="retrieval-axis" fill="{}">{}</text>',
                f"{x + 6:.1f}",
                f"{y + 3:.1f}",
                colour,
                name,
            )
        )
    legend = _legend({"p50": (P50, ""), "p95": (P95, "6 3")})
    svg = _frame(
        "Latency", mark_safe("".join(lines)), top=top, unit=" ms", buckets=buckets, step=step
    )
    return format_html('<div class="retrieval-chart" data-chart="latency">{}{}</div>', svg, legend)


def _marker(shape: str, x: float, y: float, colour: str, title: str) -> SafeString:
    """A data point: a circle or a square at (x, y), its value in a tooltip."""
    if shape == "square":
        return format_html(
            '<rect x="{}" y="{}" width="6" height="6" fill="{}"><title>{}</title></rect>',
            f"{x - 3:.1f}",
            f"{y - 3:.1f}",
            colour,
            title,
        )
    return format_html(
        '<circle cx="{}" cy="{}" r="3" fill="{}"><title>{}</title></circle>',
        f"{x:.1f}",
        f"{y:.1f}",
        colour,
        title,
    )


def _legend(series: dict[str, str | tuple[str, str]]) -> SafeString:
    """A key of each series: a swatch (bars) or a line in its dash pattern (lines)."""
    keys = []
    for name, style in series.items():
        if isinstance(style, str):
            swatch = format_html('<i style="background:{}"></i>', style)
        else:
            colour, dash = style
            swatch = format_html(
                '<svg width="24" height="10" aria-hidden="true"><line x1="0" y1="5" x2="24" '
                'y2="5" stroke="{}" stroke-width="2" stroke-dasharray="{}"/></svg>',
                colour,
                dash,
            )
        keys.append(format_html('<span class="retrieval-key">{} {}</span>', swatch, name))
    return format_html('<div class="retrieval-legend">{}</div>', mark_safe("".join(keys)))


def data_table(caption: str, header: Sequence[str], rows) -> SafeString:
    """Return a chart's figures as a table, folded under a "data table" disclosure."""
    return format_html(
        '<details class="retrieval-data"><summary>{} as a table</summary>'
        '<div class="retrieval-scroll-x"><table><caption>{}</caption><thead><tr>{}</tr></thead>'
        "<tbody>{}</tbody></table></div></details>",
        caption,
        caption,
        format_html_join("", '<th scope="col">{}</th>', ((h,) for h in header)),
        format_html_join(
            "",
            "<tr>{}</tr>",
            ((format_html_join("", "<td>{}</td>", ((c,) for c in row)),) for row in rows),
        ),
    )


def series_table(buckets: Sequence[Bucket], step: str) -> SafeString:
    """Return the analytics charts' figures per bucket as one table."""

    def ms(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}"

    return data_table(
        f"Searches and latency per {step}",
        [step, "searches", "no results", "p50 ms", "p95 ms"],
        ([_time_label(b.start, step), b.searches, b.empty, ms(b.p50), ms(b.p95)] for b in buckets),
    )


def sparkline_svg(values: Sequence[float], *, label: str = "trend") -> SafeString:
    """Return a small line of ``values`` in [0, 1], oldest first (the dashboard's trend)."""
    if len(values) < 2:
        return mark_safe("")
    width, height = 80, 22

    def point(i: int, value: float) -> str:
        x = 2 + i * (width - 4) / (len(values) - 1)
        y = height - 2 - max(0.0, min(1.0, value)) * (height - 4)
        return f"{x:.1f},{y:.1f}"

    return format_html(
        '<svg xmlns="http://www.w3.org/2000/svg" class="retrieval-sparkline" width="{}" '
        'height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}"><polyline fill="none" '
        'stroke="#417690" stroke-width="1.5" points="{}"/></svg>',
        width,
        height,
        width,
        height,
        label,
        " ".join(point(i, v) for i, v in enumerate(values)),
    )
