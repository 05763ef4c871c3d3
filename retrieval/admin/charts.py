"""A golden set's metric history as a small SVG line chart, drawn on the server."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from retrieval.models import EvalRun

#: Metric -> line colour.
SERIES = {
    "ndcg@10": "#417690",
    "recall@100": "#e8a33d",
    "mrr@10": "#5b9a52",
    "map@100": "#a4508b",
}
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
                '<polyline fill="none" stroke="{}" stroke-width="2" points="{}" data-metric="{}"/>',
                colour,
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
    legend = format_html_join(
        "",
        '<span class="retrieval-key"><i style="background:{}"></i>{}</span>',
        ((colour, metric) for metric, colour in SERIES.items()),
    )
    return format_html(
        '<div class="retrieval-chart"><svg xmlns="http://www.w3.org/2000/svg" width="{}" '
        'height="{}" viewBox="0 0 {} {}" role="img" aria-label="Metric history">{}{}{}</svg>'
        '<div class="retrieval-legend">{}</div></div>',
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        grid,
        mark_safe("".join(lines)),
        labels,
        legend,
    )
