"""Markdown and machine-description helpers for bench/compare.py (standard library only)."""
import os
import re
import statistics

# CPU features that decide which kernels Kiln and ORT can use; reported in every table's header.
FLAG_GROUPS = [
    ("avx2", ("avx2",)),
    ("avx512f", ("avx512f",)),
    ("avx512_vnni", ("avx512_vnni",)),
    ("avx512_bf16", ("avx512_bf16",)),
    ("avx512_fp16", ("avx512_fp16",)),
    ("amx", ("amx_tile", "amx_bf16", "amx_int8")),
]


def cpu_summary(cpuinfo_path="/proc/cpuinfo"):
    """Returns (model name, logical CPU count, {flag group: bool})."""
    model, flags, count, ids = "unknown CPU", set(), 0, {}
    try:
        with open(cpuinfo_path) as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "processor":
                    count += 1
                elif key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key in ("cpu family", "model") and key not in ids:
                    ids[key] = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    present = {name: any(f in flags for f in members) for name, members in FLAG_GROUPS}
    if ids:  # "AMD EPYC" alone does not say which generation a virtual machine got
        model += f", family {ids.get('cpu family', '?')} model {ids.get('model', '?')}"
    return model, count or os.cpu_count() or 0, present


def cpu_header():
    model, count, present = cpu_summary()
    flag_text = ", ".join(f"{name} {'yes' if ok else 'no'}" for name, ok in present.items())
    return f"CPU: {model} ({count} logical CPUs); flags: {flag_text}"


def fmt(x, digits=2):
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.{digits}f}"


def aggregate(records):
    """Folds one engine's per-round JSON results for one case into one row's numbers.

    The headline is the median over rounds of each round's median: one round that an unrelated
    process slowed down moves it less than a mean would, and unlike the best round it does not
    reward luck. Peak RSS is the largest any round's process reached.
    """
    if not records:
        return None
    medians = [r["median_ms"] for r in records]
    create_key = "compile_ms" if "compile_ms" in records[0] else "session_create_ms"
    return {
        "median_ms": statistics.median(medians),
        "round_min_ms": min(medians),
        "round_max_ms": max(medians),
        "p90_ms": statistics.median(r["p90_ms"] for r in records),
        "min_ms": min(r["min_ms"] for r in records),
        "create_ms": statistics.median(r[create_key] for r in records),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in records),
        "iterations": records[0].get("iterations"),
        "rounds": len(records),
        "foreign_load": max((r.get("foreign_load") or 0.0) for r in records),
    }


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def replace_section(text, heading, body):
    """Replaces the Markdown section that starts with `heading` (a full '## ...' line) up to the
    next heading of the same or a higher level; appends it when absent."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.strip() == heading.strip()), None)
    new = [heading, "", *body.rstrip("\n").splitlines(), ""]
    if start is None:
        while lines and not lines[-1].strip():
            lines.pop()
        return "\n".join(lines + ([""] if lines else []) + new).rstrip("\n") + "\n"
    end = len(lines)
    for i in range(start + 1, len(lines)):
        m = re.match(r"^(#+)\s", lines[i])
        if m and len(m.group(1)) <= level:
            end = i
            break
    return "\n".join(lines[:start] + new + lines[end:]).rstrip("\n") + "\n"
