"""The Markdown tables the benchmarks print, in the form bench/README.md keeps them."""

from collections.abc import Collection, Sequence


def header(columns: Sequence[str], text: Collection[str] = ()) -> str:
    """A table's heading and alignment rows: numbers align right, the `text` columns left."""
    alignment = ["---" if column in text else "---:" for column in columns]
    return f"| {' | '.join(columns)} |\n|{'|'.join(alignment)}|"


def row(*cells: object) -> str:
    return f"| {' | '.join(str(cell) for cell in cells)} |"


def slowest_tasks_cell(slowest: Sequence[tuple[str, float]], count: int = 4) -> str:
    return "; ".join(f"{name} {seconds:.1f}" for name, seconds in slowest[:count])
