"""Figures 1-3 render from synthetic runs, say the data's finding in their titles, and never crash."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from snooze.plots import FIGURE_FILES, figure_dapo_waste, figure_efficiency, figure_mix, write_compare_figures
from snooze.plots.style import ARM_COLORS, STRATUM_COLORS

pytest.importorskip("matplotlib")

ALL_ARMS = ("grpo", "dynamic_sampling", "filter", "snooze", "fig3-filter", "fig3-snooze", "fig3-snooze-quota")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _pixels_near(png: Path, hex_color: str, tol: float = 0.06) -> int:
    """How many pixels of the image are within ``tol`` (per channel, 0-1) of ``hex_color``."""
    import matplotlib.image as mpimg
    from matplotlib.colors import to_rgb

    img = mpimg.imread(png)[..., :3]  # [H, W, 3] floats in 0..1
    return int(np.all(np.abs(img - np.array(to_rgb(hex_color))) < tol, axis=-1).sum())


def test_all_three_figures_are_valid_pngs_with_the_arms_drawn(make_runs: Callable, tmp_path: Path) -> None:
    out = tmp_path / "figs"
    paths = write_compare_figures(out, make_runs(ALL_ARMS, seeds=2, steps=40))
    assert [p.name for p in paths] == list(FIGURE_FILES)
    import matplotlib.image as mpimg

    for p in paths:
        assert p.read_bytes()[:8] == PNG_MAGIC
        img = mpimg.imread(p)
        assert img.shape[0] > 300 and img.shape[1] > 900
        assert img[..., :3].std() > 0.05  # not a blank canvas
    fig1, fig2, fig3, fig4 = paths
    assert _pixels_near(fig1, ARM_COLORS["dynamic_sampling"]) > 500
    for arm in ("grpo", "dynamic_sampling", "filter", "snooze"):
        assert _pixels_near(fig2, ARM_COLORS[arm]) > 300, arm
    for color in STRATUM_COLORS.values():
        assert _pixels_near(fig3, color) > 500
    for arm in ("grpo", "dynamic_sampling", "filter", "snooze"):  # figure 4: each main arm's points
        assert _pixels_near(fig4, ARM_COLORS[arm]) > 100, arm


def test_missing_arms_skip_their_figures(make_runs: Callable, tmp_path: Path) -> None:
    runs = make_runs(("snooze", "fig3-snooze-quota"), seeds=1, steps=20)
    paths = write_compare_figures(tmp_path / "figs", runs)
    assert [p.name for p in paths] == ["fig2_efficiency.png", "fig3_mix.png", "fig4_tradeoff.png"]
    assert write_compare_figures(tmp_path / "none", {}) == []
    assert not list((tmp_path / "none").glob("*.png"))


def test_unreadable_and_absent_runs_are_left_out_with_a_warning(
    make_runs: Callable, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    runs = make_runs(("dynamic_sampling",), seeds=2, steps=20)
    (runs["dynamic_sampling"][1] / "metrics.jsonl").write_text('{"step": 1}\ngarbage\n{"step": 2}\n')
    runs["filter"] = [tmp_path / "never-written"]
    with caplog.at_level(logging.WARNING, logger="snooze.plots"):
        paths = write_compare_figures(tmp_path / "figs", runs)
    assert [p.name for p in paths] == ["fig1_dapo_waste.png", "fig2_efficiency.png", "fig4_tradeoff.png"]
    assert "never-written" in caplog.text and "metrics.jsonl, line 2" in caplog.text


def _dapo_records() -> list[dict]:
    """Rounds 1,1,1,1,1 then 4,4,4,4,4 (B = 16): 5*16 + 20*16 = 400 groups generated, 10*16 = 160 used."""
    recs, gen, train = [{"step": 0, "eval/accuracy": 0.5}], 0, 0
    for t in range(1, 11):
        rounds = 1 if t <= 5 else 4
        gen, train = gen + 16 * rounds, train + 16
        recs.append(
            {
                "step": t,
                "gen/rounds": rounds,
                "gen/groups": 16 * rounds,
                "train/groups": 16,
                "total/gen_groups": gen,
                "total/train_groups": train,
            }
        )
    return recs


def test_figure1_title_states_the_measured_waste() -> None:
    import matplotlib.pyplot as plt

    fig = figure_dapo_waste([_dapo_records()])
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert "rise from 1.0 to 4.0" in title  # first and last 10% of 10 steps = one step each
    assert "only 40% of generated groups" in title  # 160 / 400


def test_figure2_title_states_the_saving_and_accuracies() -> None:
    import matplotlib.pyplot as plt

    dapo = _dapo_records()  # 25 rounds in total
    snooze = [{"step": t, "gen/rounds": 1} for t in range(1, 11)] + [{"step": 10, "eval/accuracy": 0.625}]
    fig = figure_efficiency({"dynamic_sampling": [dapo], "snooze": [snooze]})
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert "data snoozing generated 2.5x fewer batches" in title  # 25 / 10
    assert "DAPO 50.0%" in title and "snoozing 62.5%" in title


def test_figure2_title_compares_an_arm_that_stopped_early_at_its_last_step() -> None:
    import matplotlib.pyplot as plt

    dapo = _dapo_records()  # 1 round a step to step 5, then 4 (25 in all by step 10)
    filt = [{"step": t, "gen/rounds": 1} for t in range(1, 5)]  # ran out of data after step 4
    fig = figure_efficiency({"dynamic_sampling": [dapo], "filter": [filt]})
    title = fig._suptitle.get_text()
    plt.close(fig)
    dapo_by_4 = sum(r["gen/rounds"] for r in dapo if "gen/rounds" in r and r["step"] <= 4)
    assert f"difficulty filtering generated {dapo_by_4 / 4:.1f}x fewer (by step 4, where it stopped)" in title


def test_figure3_title_names_the_arm_that_drifts(make_runs: Callable) -> None:
    import matplotlib.pyplot as plt

    from snooze.plots import load_runs

    fig = figure_mix(load_runs(make_runs(("fig3-filter", "fig3-snooze-quota"), seeds=1, steps=40)))
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert "filtering drifts most" in title and "snoozing+quota 50%" in title


def test_figure3_verdict_names_tied_arms_together() -> None:
    from snooze.plots.mix import _verdict

    late = {"fig3-filter": ("h", 0.64, 0.5), "fig3-snooze": ("h", 0.65, 0.5), "fig3-snooze-quota": ("h", 0.5, 0.5)}
    assert _verdict(late) == "filtering and snoozing drift most, snoozing+quota holds closest to the target"
    assert _verdict({"fig3-filter": ("h", 0.51, 0.5), "fig3-snooze": ("h", 0.5, 0.5)}) == "all arms end alike"


def test_builders_return_none_without_the_metrics_they_need() -> None:
    bare = [[{"step": 1, "train/loss": 0.3}]]
    assert figure_dapo_waste(bare[0:1]) is None
    assert figure_efficiency({"snooze": bare}) is None
    assert figure_mix({"fig3-filter": bare}) is None


def test_figure3_ignores_steps_with_an_empty_batch() -> None:
    import matplotlib.pyplot as plt

    def rec(t: int, hard: float, size: int) -> dict:
        frac = {"dataset/t-hard/batch_frac": hard, "dataset/t-easy/batch_frac": 1 - hard if size else 0.0}
        return {"step": t, "train/size": size, **frac}

    # step 10's batch is empty and is left out; the last 20% of the 9 other steps = steps 8, 9:
    # (0.5 + 0.7) / 2 = 60%.  Counting step 10's logged 0 would give (0.7 + 0.0) / 2 = 35%.
    recs = [rec(t, 0.5, 16) for t in range(1, 9)] + [rec(9, 0.7, 16), rec(10, 0.0, 0)]
    fig = figure_mix({"fig3-filter": [recs]})
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert "filtering 60%" in title


def test_figure2_shows_accuracy_at_the_rollout_temperature_when_logged() -> None:
    import matplotlib.pyplot as plt

    dapo = _dapo_records() + [{"step": 10, "eval/accuracy": 0.5, "eval/sampled_accuracy": 0.4}]
    fig = figure_efficiency({"dynamic_sampling": [dapo]})
    title, panel = fig._suptitle.get_text(), fig.axes[1].get_title()
    plt.close(fig)
    assert "DAPO 40.0%" in title and "rollout temperature" in panel and "greedy" not in panel


def test_figure3_marks_where_an_arm_ran_out_of_data() -> None:
    import matplotlib.pyplot as plt

    def recs(steps: int) -> list[dict]:
        return [
            {"step": t, "train/size": 4, "dataset/easy:r/batch_frac": 0.5, "dataset/hard:r/batch_frac": 0.5}
            for t in range(steps)
        ]

    fig = figure_mix({"fig3-filter": [recs(12)], "fig3-snooze": [recs(40)]})
    labels = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in fig.axes]
    lines = [ax.get_lines()[0].get_color() for ax in fig.axes]
    plt.close(fig)
    assert "data used up at step 11" in labels[0] and not any("used up" in x for x in labels[1])
    assert lines[0] == STRATUM_COLORS["easy"]  # strata named easy:... get the stratum colours


def test_figure4_puts_one_point_per_seed_and_states_the_trade_in_its_title() -> None:
    import matplotlib.pyplot as plt

    from snooze.plots import figure_tradeoff
    from snooze.plots.tradeoff import final_point

    def run(groups: int, acc: float) -> list[dict]:
        return [
            {"step": 0, "eval/accuracy": 0.5},
            {"step": 1, "total/gen_groups": groups, "total/train_groups": 100, "eval/accuracy": acc},
        ]

    runs = {
        "dynamic_sampling": [run(300, 0.80), run(340, 0.82)],
        "predictive": [run(100, 0.79), run(120, 0.80)],
        "fig3-snooze": [run(5, 0.1)],
    }
    assert final_point(runs["predictive"][0], "eval/accuracy") == (100.0, 0.79)
    assert final_point([{"step": 0, "eval/accuracy": 0.5}], "eval/accuracy") is None
    fig = figure_tradeoff(runs)
    ax = fig.axes[0]
    offsets = [c.get_offsets() for c in ax.collections if len(c.get_offsets())]
    seeds = sorted(tuple(map(tuple, o.tolist())) for o in offsets if len(o) == 2)
    assert seeds == [
        ((100.0, 0.79), (120.0, 0.80)),
        ((300.0, 0.80), (340.0, 0.82)),
    ]  # one point per seed; fig3 arms left out
    assert "predictive skipping: 2.91x fewer groups than DAPO, -1.5 points" in ax.get_title()
    assert (
        len(fig.axes) == 4 and "late accuracy" in fig.axes[1].get_title()
    )  # one evaluation after the base: late = final here
    assert "predictive skipping: 2.91x fewer groups than DAPO, -1.5 points" in fig.axes[1].get_title()
    plt.close(fig)


def test_figure4_late_panel_averages_the_last_evaluations_after_the_base() -> None:
    import matplotlib.pyplot as plt

    from snooze.plots import figure_tradeoff
    from snooze.plots.tradeoff import late_point

    def run(groups: int, accs: list[float]) -> list[dict]:
        lines: list[dict] = [{"step": 0, "eval/accuracy": 0.1}]  # the base: never part of the late mean
        lines += [{"step": 10 * k, "eval/accuracy": a} for k, a in enumerate(accs, 1)]
        lines[-1].update({"total/gen_groups": groups, "total/train_groups": 50})
        return lines

    dips = run(100, [0.6, 0.9, 0.9, 0.3])  # a dip at the last evaluation
    assert late_point(dips, "eval/accuracy") == (100.0, pytest.approx(0.7))
    assert late_point(run(80, [0.4]), "eval/accuracy") == (80.0, 0.4)
    assert late_point([{"step": 0, "eval/accuracy": 0.1}], "eval/accuracy") is None  # no generated groups
    fig = figure_tradeoff({"dynamic_sampling": [run(300, [0.7, 0.8, 0.8, 0.8])], "snooze": [dips]})
    final, late, final_zoom, late_zoom = fig.axes  # top row: every arm; bottom row: zoomed on DAPO's accuracy
    assert final_zoom.get_ylim() == pytest.approx((0.74, 0.83)) and late_zoom.get_ylim() == pytest.approx((0.74, 0.83))
    final_pts = sorted(tuple(o[0]) for c in final.collections for o in [c.get_offsets()] if len(o) == 1)
    late_pts = sorted(tuple(o[0]) for c in late.collections for o in [c.get_offsets()] if len(o) == 1)
    assert (100.0, 0.3) in final_pts and (100.0, pytest.approx(0.7)) in late_pts
    assert "-50.0 points" in final.get_title() and "-10.0 points" in late.get_title()
    plt.close(fig)
    fig = figure_tradeoff({"snooze": [dips]})  # no DAPO: nothing to zoom on, one row
    assert len(fig.axes) == 2
    plt.close(fig)
