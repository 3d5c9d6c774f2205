"""Exhaustive explorers: every delivery order (part one) and every arrival order (part two).

`labkit.frontier.orders.explore_delivery_orders` walks all n! orders of n messages (equal
priorities, so every order is feasible), summarizing under both policies after each finished row.
`labkit.designs.arrival_orders.explore` walks every schedule of n deliveries (each response at
most twice, one timeout) per design.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.common import FIGURES, BenchResult, finish, fmt_s, print_table, time_call
from labkit.designs import arrival_orders as arrivals
from labkit.designs.registry import DESIGNS
from labkit.frontier import orders as explorer

NAME = "explorers"
ORDER_SIZES = (7, 8)
SMOKE_ORDER_SIZES = (4, 5)
ARRIVAL_SIZES = (3, 4)
SMOKE_ARRIVAL_SIZES = (2,)
TARGET_N8_S = 5.0


def order_rows(sizes: tuple[int, ...], repeats: int) -> list[dict[str, object]]:
    rows = []
    for n in sizes:
        frame = explorer.explore_delivery_orders([5] * n)
        t = time_call(lambda n=n: explorer.explore_delivery_orders([5] * n), repeats=repeats)
        orders = int(frame["orders"].iloc[0])
        rows.append(
            {
                "explorer": "delivery orders",
                "design": "",
                "n": n,
                "orders": orders,
                "median_s": t.median,
                "orders_per_s": orders / t.median,
            }
        )
    return rows


def arrival_rows(sizes: tuple[int, ...], repeats: int) -> list[dict[str, object]]:
    rows = []
    for n in sizes:
        for design in DESIGNS:
            found = arrivals.explore(design, n)
            t = time_call(lambda d=design, n=n: arrivals.explore(d, n), repeats=repeats)
            rows.append(
                {
                    "explorer": "arrival orders",
                    "design": design,
                    "n": n,
                    "orders": found.orders,
                    "median_s": t.median,
                    "orders_per_s": found.orders / t.median,
                }
            )
    return rows


def plot(rows: list[dict[str, object]]):
    """Left: delivery-order explorer time per n. Right: arrival explorer time per design."""
    from labkit.plots.style import COLORS, new_figure

    fig = new_figure(8.0, 3.6, layout="constrained")
    left, right = fig.subplots(1, 2)
    orders = [r for r in rows if r["explorer"] == "delivery orders"]
    left.bar(
        [f"n={r['n']}\n{r['orders']} orders" for r in orders],
        [float(r["median_s"]) for r in orders],
        color=COLORS["frontier"],
    )
    left.axhline(TARGET_N8_S, color=COLORS["max"], ls="--", lw=1, label="target for n=8")
    left.set_ylabel("seconds (median)")
    left.set_title("explore_delivery_orders: every order", fontsize=9)
    left.legend(fontsize=8)
    arr = [r for r in rows if r["explorer"] == "arrival orders"]
    sizes = sorted({int(r["n"]) for r in arr})
    width = 0.8 / len(DESIGNS)
    for i, design in enumerate(DESIGNS):
        mine = {int(r["n"]): float(r["median_s"]) for r in arr if r["design"] == design}
        right.bar(
            [k + (i - (len(DESIGNS) - 1) / 2) * width for k in range(len(sizes))],
            [mine[n] for n in sizes],
            width,
            color=COLORS[design],
            label=design,
        )
    right.set_xticks(range(len(sizes)), [f"n={n}" for n in sizes])
    right.set_ylabel("seconds (median)")
    right.set_title("arrivals.explore: every arrival order", fontsize=9)
    right.legend(fontsize=8)
    return fig


def run(smoke: bool = False, out: Path = FIGURES) -> BenchResult:
    """Time both explorers, print the table, write CSV and figure."""
    repeats = 1 if smoke else 3
    rows = order_rows(SMOKE_ORDER_SIZES if smoke else ORDER_SIZES, repeats)
    rows += arrival_rows(SMOKE_ARRIVAL_SIZES if smoke else ARRIVAL_SIZES, repeats)
    print_table(
        [
            {
                **r,
                "median": fmt_s(float(r["median_s"])),
                "orders/s": f"{float(r['orders_per_s']):.0f}",
            }
            for r in rows
        ],
        ("explorer", "design", "n", "orders", "median", "orders/s"),
    )
    orders = [r for r in rows if r["explorer"] == "delivery orders"]
    largest = orders[-1]
    ratios = {
        f"n={largest['n']} / n={orders[0]['n']} time": (
            float(largest["median_s"]) / float(orders[0]["median_s"])
        ),
        f"n={largest['n']} time / {TARGET_N8_S:.0f} s target": (
            float(largest["median_s"]) / TARGET_N8_S
        ),
    }
    targets = {
        f"n={largest['n']} under {TARGET_N8_S:.0f} s": float(largest["median_s"]) < TARGET_N8_S
    }
    return finish(NAME, rows, ratios, targets, plot(rows), out)
