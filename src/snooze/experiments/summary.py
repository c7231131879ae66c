"""``summary.json`` and the printed table of ``snooze compare``: per arm, mean and min-max over seeds.

Pure functions of the runs' :class:`~snooze.trainer.loop.RunResult` (numbers read back from each
``metrics.jsonl``), so a summary can be rebuilt from the run folders at any time.

Accuracy comes two ways (docs/results.md): ``greedy`` (one greedy completion per prompt)
and ``sampled`` (avg@k at the rollout temperature, when the profile evaluates it). The *headline*
accuracy, the one figure 2 and the table's "acc" column show, is ``sampled`` when present: it is what
GRPO optimises, and greedy accuracy can stay flat while RL keeps changing the sampled distribution.
Each has a *final* value (the last evaluation) and a *late* one (the mean of the last
:data:`~snooze.logs.LATE_EVALS` evaluations), which one dip at the end does not move as much.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["summarise", "summary_table", "stat", "headline", "saving_share"]


def stat(values: Sequence[float]) -> dict[str, Any]:
    """``{"mean", "min", "max", "by_seed"}`` over the finite values (NaN where there are none)."""
    xs = [float(x) for x in values if x is not None and not math.isnan(x)]
    if not xs:
        return {"mean": math.nan, "min": math.nan, "max": math.nan, "by_seed": list(values)}
    return {"mean": sum(xs) / len(xs), "min": min(xs), "max": max(xs), "by_seed": [float(x) for x in values]}


def _acc_block(
    base: Sequence[float],
    final: Sequence[float],
    late: Sequence[float],
    base_tasks: Sequence[Mapping[str, float]],
    final_tasks: Sequence[Mapping[str, float]],
) -> dict[str, Any]:
    tasks = sorted({t for d in (*base_tasks, *final_tasks) for t in d})
    return {
        "base": stat(base),
        "final": stat(final),
        "late": stat(late),
        "gain": stat([f - b for b, f in zip(base, final)]),
        "by_task": {
            t: {
                "base": stat([d.get(t, math.nan) for d in base_tasks]),
                "final": stat([d.get(t, math.nan) for d in final_tasks]),
            }
            for t in tasks
        },
    }


def summarise(results: Sequence[Any], pool_prompts: int) -> dict[str, Any]:
    """One arm's entry of ``summary.json`` from its runs (one per seed). ``pool_prompts``: prompts in its pools."""

    def totals(key: str) -> list[float]:
        return [r.totals.get(key, math.nan) for r in results]

    gen, skipped = totals("total/gen_groups"), totals("total/skipped")
    rollouts = [r.totals.get("total/cost_rollouts", r.totals.get("total/rollouts", math.nan)) for r in results]
    tokens = [math.nan if r.totals.get("total/tokens_missing", 1) else r.totals["total/cost_tokens"] for r in results]
    greedy = _acc_block(
        [r.base_accuracy for r in results],
        [r.final_accuracy for r in results],
        [r.late_accuracy for r in results],
        [r.base_by_task for r in results],
        [r.final_by_task for r in results],
    )
    out: dict[str, Any] = {
        # the first keys are those of earlier versions (greedy accuracy, means over seeds)
        "total_gen_groups": stat(gen)["mean"],
        "total_rollouts": stat(totals("total/rollouts"))["mean"],
        "final_test_accuracy": greedy["final"]["mean"],
        "test_accuracy_by_seed": [r.final_accuracy for r in results],
        "final_test_accuracy_by_task": {t: v["final"]["mean"] for t, v in greedy["by_task"].items()},
        "base_test_accuracy": greedy["base"]["mean"],
        "steps": max(r.steps for r in results),
        "wall_seconds": sum(r.wall_seconds for r in results),
        "seeds": len(results),
        "steps_by_seed": [r.steps for r in results],
        "gen_groups": stat(gen),
        "rollouts": stat(rollouts),  # every rollout and scoring pass (total/cost_rollouts)
        "gen_tokens": stat(tokens),  # and their tokens (total/cost_tokens; NaN where some went unreported)
        "curve": {"by_seed": [r.curve for r in results]},  # per seed, every evaluation and what it cost
        "gen_rounds": stat(totals("total/rounds")),
        "train_groups": stat(totals("total/train_groups")),
        "encounters_per_prompt": stat(
            [(g + (0.0 if math.isnan(s) else s)) / pool_prompts for g, s in zip(gen, skipped)]
        ),
        "generated_per_prompt": stat([g / pool_prompts for g in gen]),
        "pool_prompts": pool_prompts,
        "accuracy": {"greedy": greedy},
    }
    if any(not math.isnan(r.sampled_final) for r in results):
        out["accuracy"]["sampled"] = _acc_block(
            [r.sampled_base for r in results],
            [r.sampled_final for r in results],
            [r.sampled_late for r in results],
            [r.sampled_base_by_task for r in results],
            [r.sampled_final_by_task for r in results],
        )
    return out


def headline(entry: Mapping[str, Any]) -> str:
    """``"sampled"`` when the arm was evaluated at the rollout temperature, else ``"greedy"``."""
    return "sampled" if "sampled" in entry.get("accuracy", {}) else "greedy"


def saving_share(dapo_groups: float, arm_groups: float, optimal_groups: float) -> float:
    """Share of the optimal saving: ``(DAPO - arm) / (DAPO - one round per step)``; NaN when DAPO is optimal."""
    den = dapo_groups - optimal_groups
    return (dapo_groups - arm_groups) / den if den > 0 else math.nan


def _range(s: Mapping[str, Any], fmt: str = "{:.3f}") -> str:
    if len([x for x in s["by_seed"] if x is not None and not math.isnan(x)]) <= 1:
        return fmt.format(s["mean"])
    return f"{fmt.format(s['mean'])} [{fmt.format(s['min'])}, {fmt.format(s['max'])}]"


def _row(arm: str, s: Mapping[str, Any], ref: Mapping[str, Any] | None, optimal: float | None) -> list[str]:
    kind = headline(s)
    acc = s["accuracy"][kind]
    ratio = gap = late_gap = share = oracle = "-"
    if ref is not None and not arm.startswith("fig3") and s["gen_groups"]["mean"]:
        ratio = f"{ref['gen_groups']['mean'] / s['gen_groups']['mean']:.2f}x"
        gap, late_gap = (_paired_gap(acc[when], ref["accuracy"][kind][when]) for when in ("final", "late"))
        if optimal is not None and arm != "dynamic_sampling":
            share = f"{saving_share(ref['gen_groups']['mean'], s['gen_groups']['mean'], optimal):.0%}"
        if "oracle_groups" in ref:
            floor = ref["oracle_groups"]["mean"]
            oracle = (
                f"{floor:.0f}"
                if arm == "dynamic_sampling"
                else f"{saving_share(ref['gen_groups']['mean'], s['gen_groups']['mean'], floor):.0%}"
            )
    greedy = s["accuracy"]["greedy"]["final"]
    return [
        arm,
        _range(s["gen_groups"], "{:.0f}"),
        *(
            _range(s[k], "{:.0f}") if k in s and not math.isnan(s[k]["mean"]) else "-"
            for k in ("rollouts", "gen_tokens")
        ),
        ratio,
        share,
        oracle,
        f"{acc['base']['mean']:.3f}",
        _range(acc["final"]),
        gap,
        _range(acc["late"]),
        late_gap,
        _range(greedy, "{:.3f}"),
        _range(s["generated_per_prompt"], "{:.1f}"),
        _range(s["encounters_per_prompt"], "{:.1f}"),
        str(s["steps"]),
        f"{s['wall_seconds']:.0f}",
    ]


def _paired_gap(arm: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    """The arm's accuracy minus the reference's, paired by seed: ``mean [min, max]``."""
    return _range(stat([a - r for a, r in zip(arm["by_seed"], ref["by_seed"])]), "{:+.3f}")


def summary_table(
    summary: Mapping[str, Mapping[str, Any]], markdown: bool = False, optimal_groups: float | None = None
) -> str:
    """One row per arm: generated groups, rollouts and tokens (every rollout and scoring pass and their tokens;
    ``-`` where not recorded), DAPO's groups over the arm's (share of the optimal saving, share of the oracle's
    saving: DAPO's row shows the oracle floor itself, :mod:`snooze.experiments.oracle`), headline accuracy
    base -> final and its gap to DAPO (paired by seed), the same for the late accuracy, greedy final,
    groups generated and stream encounters (rolled out or skipped) per prompt, steps, wall time.

    ``mean [min, max]`` over seeds. ``optimal_groups``: one round per step for the whole run (steps x
    generation batch), the denominator of the saving's share.
    """
    ref = summary.get("dynamic_sampling")
    kind = headline(next(iter(summary.values()))) if summary else "greedy"
    acc_name = "acc" if kind == "greedy" else "acc@T"
    head = [
        "arm",
        "gen groups",
        "rollouts",
        "tokens",
        "DAPO/arm",
        "saving share",
        "oracle share",
        f"base {acc_name}",
        f"final {acc_name}",
        "gap vs DAPO",
        f"late {acc_name}",
        "late gap",
        "final greedy",
        "groups/prompt",
        "encounters/prompt",
        "steps",
        "wall s",
    ]
    rows = [_row(arm, s, ref, optimal_groups) for arm, s in summary.items()]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths)) for r in [head, *rows])
