"""What ``snooze replay`` prints: the log and its run, one headline line per policy, then the details.

The headline (:mod:`snooze.analysis.estimate`) is the one estimate to read: the groups the policy would
have generated for the log's signal groups, its interval over the log's prompts, and the share of its
skipped encounters that had signal. The details are the raw counts and the other estimates; an estimate
that does not hold for the log is printed ``n/a`` with the reason, never as a number.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["print_log", "print_headline", "print_details", "pct"]


def pct(value: Any) -> str:
    return "n/a" if value is None else f"{100 * float(value):.1f}%"


def _row(cells: tuple[str, ...], widths: tuple[int, ...]) -> str:
    return "".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cells, widths)))


def print_log(log: Any, run: Any) -> None:
    """The log's size, the run it comes from (header or assumptions), and the warnings, loudly on stderr."""
    n_prompts = len(set(zip(log.datasets, log.ids, strict=False)))
    print(
        f"{log.path}: {len(log):,} groups of {log.group_size} rollouts, {n_prompts:,} prompts, "
        f"steps {int(log.steps[0])}..{int(log.steps[-1])}"
    )
    shape = run.shape
    sizes = (
        f"batch_size {shape.batch_size}, gen_batch_size {shape.gen_batch_size}, max_gen_rounds {shape.max_gen_rounds}"
        if shape is not None
        else "sizes unknown"
    )
    if run.has_header:
        h = log.header
        if run.sim_na is not None:  # the sizes feed only the step simulation: say what the header says
            sizes = ", ".join(f"{k} {v}" for k, v in h.sizes().items()) or "batch sizes not in the header"
        low, high = h.reward_range
        print(
            f"run (from the header, written by {h.source or 'an unnamed writer'}): policy {h.policy}, "
            f"dynamic sampling {_yes(h.dynamic_sampling)}, {sizes}, reward range [{low:g}, {high:g}]"
        )
    else:
        print(f"run (ASSUMED: the log has no header): a DAPO run (dynamic sampling), {sizes}")
    for note in run.overridden:
        print(f"WARNING: --override-header: {note}", file=sys.stderr)
    for note in run.assumed:
        print(f"WARNING: {log.path}: {note}", file=sys.stderr)
    if not run.has_header:
        print(
            f"WARNING: {log.path} has no header line, so the replay ASSUMES the above; if the run was not a DAPO "
            "run with these sizes, pass --batch-size/--gen-batch-size/--max-gen-rounds (docs/reward-log.md)",
            file=sys.stderr,
        )
    for warning in run.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)


def _yes(value: bool | None) -> str:
    return "unknown" if value is None else "yes" if value else "no"


def _groups(h: dict[str, Any]) -> tuple[str, str]:
    if h["groups"] is None:
        return "n/a", "(every signal group skipped)"
    lo, hi = h["groups_interval"] or (None, None)
    span = f"[{lo:,.0f} .. {hi:,.0f}]" if lo is not None else "[n/a]"
    return f"{h['groups']:,.0f}", span


def print_headline(results: dict[str, dict[str, Any]]) -> None:
    """One line per policy: groups generated for the log's signal groups, interval, saving, risk."""
    first = next(iter(results.values()))["headline"]
    level = round(100 * first["level"])
    print(
        f"\ngroups each policy would have generated for the log's signal groups (log: {first['log_groups']:,}), "
        f"{level}% interval over the log's {first['prompts']:,} prompts ({first['resamples']:,} resamples); "
        "risk: the share of its skipped encounters that had signal in the log"
    )
    widths = (16, 10, 22, 9, 29, 10)
    print(_row(("policy", "groups", f"[{level}% interval]", "saved", "risk (skipped with signal)", "skipped"), widths))
    print("-" * sum(widths))
    for name, r in results.items():
        h = r["headline"]
        groups, span = _groups(h)
        risk = pct(h["risk"])
        if h["risk_interval"] is not None:
            risk += f" [{pct(h['risk_interval'][0])} .. {pct(h['risk_interval'][1])}]"
        print(_row((name, groups, span, pct(h["saved_frac"]), risk, f"{h['skipped_groups']:,}"), widths))


def print_details(results: dict[str, dict[str, Any]], run: Any) -> None:
    """The raw counts and the other estimates, each ``n/a`` with its reason where it does not hold."""
    print("\ndetails (the headline's 'saved' is the '@ equal signal' column):")
    cols = ("policy", "skipped share", "missed signal", "of signal", "@ equal signal", "step sim", "regressed")
    widths = (16, 15, 15, 11, 16, 10, 11)
    print(_row(cols, widths))
    print("-" * sum(widths))
    for name, r in results.items():
        sim = r.get("simulated", {}).get("saved_frac") if run.sim_na is None else None
        cells = (
            name,
            pct(r["saved_frac"]),
            f"{r['missed_signal_groups']:,}",
            pct(r["missed_signal_frac"]),
            pct(r["predicted_saved_frac"]),
            pct(sim),
            f"{r['regressed']:,}",
        )
        print(_row(cells, widths))
    _print_sim_note(results, run)


def _print_sim_note(results: dict[str, dict[str, Any]], run: Any) -> None:
    if run.sim_na is not None:
        print(f"step sim: n/a: {run.sim_na}")
        return
    shape = run.shape
    first = next(iter(results.values())).get("simulated", {})
    if not first.get("steps"):
        print("step sim: n/a: the rebuilt loop completes no step over the logged lines (the sizes do not fit the log)")
        return
    print(
        f"step sim: batch_size={shape.batch_size}, gen_batch_size={shape.gen_batch_size}, "
        f"max_gen_rounds={shape.max_gen_rounds}; generation saved over the {first['steps']} steps both loops complete"
        + (
            ""
            if first["dapo_sim_matches_log"]
            else " -- WARNING: the loop over every line does not reproduce the logged steps; check these sizes"
        )
    )
