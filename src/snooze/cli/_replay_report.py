"""What ``snooze replay`` prints: the log and its run, the verdict, one headline line per policy, the details.

The verdict (:mod:`snooze.analysis.verdict`) says what to do: DAPO's rounds per step on the run, the docs'
rule, what the recommended setting would save, what each policy was measured to cost, and the lines to
paste. The headline (:mod:`snooze.analysis.estimate`) is the one estimate to read per policy: the rollouts it
would have generated for as many signal groups as the log holds, its interval over the log's prompts, the same
saving in generated tokens (``unknown`` where the log's lines do not give them), and the signal it would have
missed (a count and its share of all the log's signal). The details are the raw counts
and the other estimates (the signal per skipped encounter among them); an estimate that does not hold for
the log is printed ``n/a`` with the reason, never as a number.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["print_log", "print_verdict", "print_headline", "print_details", "pct", "encounters", "tokens_text"]

UNKNOWN_TOKENS = "tokens unknown: the log's lines carry no `tokens`"
"""What is printed in place of a count of tokens the log does not give."""


def pct(value: Any) -> str:
    return "n/a" if value is None else f"{100 * float(value):.1f}%"


def tokens_text(log: Any) -> str:
    """The log's generated tokens, or why they are not known (no line, or not every line, gives them)."""
    if log.tokens_known:
        return f"{int(log.tokens.sum()):,} generated tokens"
    if log.tokens is not None:
        given = int((log.tokens >= 0).sum())
        return f"tokens unknown: {given:,} of the {len(log):,} lines give their `tokens`, the others do not"
    return UNKNOWN_TOKENS


def _row(cells: tuple[str, ...], widths: tuple[int, ...]) -> str:
    return "".join(f"{c:>{w}}" if i else f"{c:<{w}}" for i, (c, w) in enumerate(zip(cells, widths)))


def encounters(log: Any) -> tuple[int, float, int]:
    """Prompts, their mean encounters and the most any prompt had: what bounds how far the policies can differ."""
    import numpy as np

    prompt, keys = log.prompt_index()
    per = np.bincount(prompt, minlength=len(keys))
    return len(keys), float(per.mean()), int(per.max())


def print_log(log: Any, run: Any) -> None:
    """The log's size, the run it comes from (header or assumptions), and the warnings, loudly on stderr."""
    n_prompts, mean, most = encounters(log)
    print(
        f"{log.path}: {int(log.rollouts.sum()):,} rollouts in {len(log):,} groups of {log.group_size} "
        f"({tokens_text(log)}), {n_prompts:,} prompts "
        f"({mean:.1f} encounters each on average, at most {most:,}), "
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


def _estimate(h: dict[str, Any], unit: str = "rollouts") -> tuple[str, str]:
    """A headline's estimate in ``unit`` (``groups``, ``rollouts``) and its interval, as printed."""
    if h[unit] is None:
        return "n/a", "(every signal group skipped)"
    lo, hi = h[f"{unit}_interval"] or (None, None)
    span = f"[{lo:,.0f} .. {hi:,.0f}]" if lo is not None else "[n/a]"
    return f"{h[unit]:,.0f}", span


def _tokens_saved(h: dict[str, Any]) -> str:
    return pct(h["tokens_saved_frac"]) if h.get("tokens_known") else "unknown"


def _span(value: Any, interval: Any) -> str:
    return pct(value) + (f" [{pct(interval[0])} .. {pct(interval[1])}]" if interval is not None else "")


def print_headline(results: dict[str, dict[str, Any]], log: Any = None) -> None:
    """One line per policy: rollouts generated for as many signal groups as the log holds, interval, saving, the
    saving in generated tokens (``unknown`` where the log does not give them), the signal it would have missed
    (count, share of all the log's signal) and the rollouts (groups) it skips. Policies with the same skips are
    named, with the encounters per prompt that make them so."""
    first = next(iter(results.values()))["headline"]
    level = round(100 * first["level"])
    tokens = f"{first['log_tokens']:,} generated tokens" if first.get("tokens_known") else UNKNOWN_TOKENS
    print(
        f"\nrollouts each policy would have generated to train on as many signal groups as the log holds (the log: "
        f"{first['log_rollouts']:,} rollouts in {first['log_groups']:,} groups, {first['signal_groups']:,} with "
        f"signal; {tokens}), {level}% interval over the log's {first['prompts']:,} prompts "
        f"({first['resamples']:,} resamples); tokens saved: the same estimate in generated tokens; missed signal: "
        "the signal groups it would have skipped, and their share of all the log's signal"
    )
    widths = (16, 12, 24, 9, 14, 34, 26)
    cells = ("policy", "rollouts", f"[{level}% interval]", "saved", "tokens saved", "missed signal (of all signal)")
    print(_row((*cells, "skipped rollouts (groups)"), widths))
    print("-" * sum(widths))
    for name, r in results.items():
        h = r["headline"]
        rollouts, span = _estimate(h)
        missed = f"{h['skipped_with_signal']:,} ({_span(h['missed_share'], h['missed_share_interval'])})"
        skipped = f"{h['skipped_rollouts']:,} ({h['skipped_groups']:,})"
        row = (name, rollouts, span, pct(h["rollouts_saved_frac"]), _tokens_saved(h), missed, skipped)
        print(_row(row, widths))
    _print_same(results, log)


def _print_same(results: dict[str, dict[str, Any]], log: Any) -> None:
    """Name the policies whose rows are the same, and why they can be: few encounters per prompt."""
    seen: dict[tuple[Any, ...], list[str]] = {}
    for name, r in results.items():
        h = r["headline"]
        seen.setdefault((h["skipped_groups"], h["skipped_with_signal"], r["regressed"]), []).append(name)
    if all(len(names) < 2 for names in seen.values()) or log is None:
        return
    _, mean, most = encounters(log)
    for (skipped, _, _), names in seen.items():
        if len(names) < 2:
            continue
        if not skipped:
            print(f"{', '.join(names)}: skip nothing here (no prompt's group was too easy before its last encounter)")
            continue
        print(
            f"{', '.join(names)}: the same skips here. The log met each prompt {mean:.1f} times on average (at most "
            f"{most:,}): once a prompt is asleep for longer than the encounters it has left, a longer snooze or "
            "retiring it skips nothing more"
        )


def _factor_text(measured: dict[str, Any]) -> str:
    lo, hi = measured["saving"]
    saving = f"{lo:.2f}x" if lo == hi else f"{lo:.2f}-{hi:.2f}x"
    gaps = measured["gaps"]
    worst = min(gaps)
    gap = f"mean {measured['mean_gap']:+.2f}, worst {worst:+.1f}" if measured["mean_gap"] is not None else (
        f"{max(gaps):+.1f} to {worst:+.1f}" if len(gaps) > 1 else f"worst {worst:+.1f}"
    )  # fmt: skip
    return f"{saving}, {gap} points"


def _verdict_word(measured: dict[str, Any]) -> str:
    worst = min(measured["gaps"])
    return "held DAPO's accuracy" if worst >= -1.0 else "lost points" if worst > -10.0 else "collapsed"


def _saved(entry: dict[str, Any]) -> tuple[Any, Any]:
    """A verdict entry's saving in rollouts and its interval (in groups for an entry written before rollouts)."""
    if "rollouts_saved_frac" in entry:
        return entry["rollouts_saved_frac"], entry["rollouts_saved_interval"]
    return entry["saved_frac"], entry["saved_interval"]


def print_verdict(v: dict[str, Any]) -> None:
    """The verdict block (:func:`snooze.analysis.verdict.verdict`), the first thing after the log."""
    r = v["dapo_rounds"]
    basis = (
        "read off the log (groups per step over the generation batch)"
        if r["basis"] == "logged"
        else "estimated from the share of groups with signal"
    )
    print(
        f"\nverdict\n  DAPO's rounds per step on this run, {basis}; batch_size {r['batch_size']}, gen_batch_size "
        f"{r['gen_batch_size']}, max_gen_rounds {r['max_gen_rounds']}:"
    )
    for name in ("early", "late"):
        w = r[name]
        rounds = w.get("logged_rounds", w["rounds"])
        check = f"; {w['rounds']:.1f} from its signal share" if "logged_rounds" in w else ""
        size = f"{w['rollouts']:,} rollouts in {w['groups']:,} groups" if w.get("rollouts") is not None else (
            f"{w['groups']:,} groups"
        )  # fmt: skip
        print(
            f"    {name}: {rounds:.1f} rounds a step (steps {w['first_step']}..{w['last_step']}, "
            f"{size}, {pct(w['signal_share'])} with signal{check})"
        )
    if r["floor"]:
        print(f"    a floor: {r['floor']}")
    late = r["late"].get("logged_rounds", r["late"]["rounds"])
    rule = v["rule_rounds"]
    decision = (
        f"late {late:.1f} > {rule:g}: turn skipping on, with the recommended setting"
        if v["turn_on"]
        else f"late {late:.1f} <= {rule:g}: keep DAPO's dynamic sampling (policy=dynamic_sampling: skips nothing); "
        "watch gen/rounds"
    )
    print(f"  the docs' rule: turn skipping on when DAPO needs more than about {rule:g} rounds a step; {decision}")
    rec = v["recommended"]
    tokens = (
        f"{_span(rec['tokens_saved_frac'], rec['tokens_saved_interval'])} of its generated tokens"
        if rec.get("tokens_known")
        else "tokens unknown"
    )
    print(
        f"  the recommended setting (snooze factor 1, the surplus carried) would save "
        f"{_span(*_saved(rec))} of this log's rollouts ({tokens}; replayed as "
        f"{rec['replayed_as']}; the carried surplus is no skip, a replay cannot see it); measured: "
        f"{_factor_text(rec['measured'])}, "
        f"{_verdict_word(rec['measured'])}"
    )
    print("  each policy's saving here, and what this project measured it to cost (late avg@k against DAPO's, points):")
    widths = (12, 28, 14, 20)
    cells = ("policy", "rollouts saved", "tokens saved", "missed signal")
    print("  " + _row(cells, widths) + "  measured (docs/results.md)")
    for c in v["costs"]:
        m = c["measured"]
        measured = f"{_factor_text(m)}: {_verdict_word(m)}" if m is not None else c["note"]
        missed = f"{c['missed_signal']:,} ({pct(c['missed_share'])})"
        row = (c["policy"], _span(*_saved(c)), _tokens_saved(c), missed)
        print("  " + _row(row, widths) + "  " + measured)
    where = {"verl": "verl overrides, to add to the run's command line (snooze check-verl checks them)",
             "trl": "TRL", "reference": "the reference trainer",
             "library": "the library's scheduler"}[v["framework"]]  # fmt: skip
    what = (
        "turn on the recommended setting" if v["turn_on"] else "run DAPO's dynamic sampling (policy=dynamic_sampling)"
    )
    print(f"  next: {what}; {where}:")
    for line in v["lines"]:
        print(f"    {line}")


def print_details(results: dict[str, dict[str, Any]], run: Any) -> None:
    """The raw counts and the other estimates, each ``n/a`` with its reason where it does not hold."""
    print(
        "\ndetails (the headline's 'saved' is the '@ equal signal' column; skipped: the share of the log's rollouts "
        "and of its tokens the policy skips, before any signal is made up; risk per skip: the share of the "
        "policy's skipped encounters that had signal, which a policy that skips the most can keep low while it "
        "misses the most signal)"
    )
    cols = ("policy", "skipped", "skipped tokens", "risk per skip [interval]", "@ equal signal", "step sim")
    widths = (16, 10, 16, 28, 16, 10, 11)
    print(_row((*cols, "regressed"), widths))
    print("-" * sum(widths))
    for name, r in results.items():
        sim = r.get("simulated", {}) if run.sim_na is None else {}
        h = r["headline"]
        tokens = pct(r["skipped_tokens"] / r["total_tokens"]) if r["tokens_known"] and r["total_tokens"] else "unknown"
        cells = (
            name,
            pct(r["skipped_rollouts"] / r["total_rollouts"]),
            tokens,
            _span(h["risk"], h["risk_interval"]),
            pct(r["predicted_saved_frac"]),
            pct(sim.get("rollouts_saved_frac", sim.get("saved_frac"))),
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
