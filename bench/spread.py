"""The one table of the torchrun/directory benches (bench/dcp.py, bench/dirs.py): per
competitor the median, min and max seconds, throughput and the ratio to the first row
(tensorseal), median / median from the same run."""
from __future__ import annotations

import statistics
from typing import Dict, List


def table(title: str, runs: Dict[str, List[float]], total_bytes: int) -> List[str]:
    base = statistics.median(next(iter(runs.values())))
    lines = [f"| {title} | median s | min | max | GiB/s | vs tensorseal |", "|---|---|---|---|---|---|"]
    for name, ts in runs.items():
        med = statistics.median(ts)
        lines.append(f"| {name} | {med:.3f} | {min(ts):.3f} | {max(ts):.3f} | {total_bytes / 2**30 / med:.2f} | "
                     f"{med / base:.2f}x |")
    return lines + [""]
