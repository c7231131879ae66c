"""Does the audit's estimate track the truth? The reference trainer with ``snooze`` (factor 5) and the audit on,
and every skipped encounter scored offline (docs/concepts.md, "The audit").

The truth: at each draw, every encounter the policy skips is scored under the model of that moment by its
exact chance of a signal group, ``q = 1 - p**G - (1 - p)**G`` with ``p`` the prompt's exact pass rate
(:func:`research/pass_rate_oracle.pass_rates`: the built-in tasks have one answer, so ``p`` is one teacher-forced pass;
this is the expectation of offline rollouts, without their sampling noise, and none of it is trained on).
The estimate: ``total/audit_signal_rate``, from the audit groups the run generated. Printed: both, over the
run and per quarter of it, and what the audit costs (audit groups / all generated groups)::

    PYTHONPATH=src .venv/bin/python benchmarks/audit_truth.py --out runs/audit_truth

Small (a custom profile of ``rev:3-5``, 150 prompts, 120 steps): a few minutes on 2 CPU threads.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "research"))
from pass_rate_oracle import pass_rates  # noqa: E402

from snooze.analysis import signal_prob  # noqa: E402
from snooze.core.config import SchedulerConfig  # noqa: E402
from snooze.core.policies.snooze import SnoozeOptions  # noqa: E402
from snooze.core.scheduler import Scheduler  # noqa: E402
from snooze.experiments.compare import _data, profile_base  # noqa: E402
from snooze.experiments.profiles import PROFILES, train_config, with_overrides  # noqa: E402
from snooze.logs import read_metrics  # noqa: E402
from snooze.trainer import loop  # noqa: E402
from snooze.trainer.rollout import Roller  # noqa: E402

TRUTH: dict = {"model": None, "pools": {}, "temperature": 0.4, "G": 4, "q": [], "step": []}


class _CapturingRoller(Roller):
    def __init__(self, model, *args, **kwargs) -> None:  # noqa: ANN001, ANN002, ANN003
        super().__init__(model, *args, **kwargs)
        TRUTH["model"] = model


def _scored_walk(inner):  # noqa: ANN001, ANN202
    """``Scheduler._walk`` that also scores each skipped encounter (a row counted down: the counter rule)."""

    def walk(self, need, only=None):  # noqa: ANN001, ANN202
        before = [t.counter.copy() for t in self._parts.memory.tables]
        w = inner(self, need, only)
        for d, table in enumerate(self._parts.memory.tables):
            rows = np.flatnonzero(table.counter < before[d])  # the rows counted down
            recs = [TRUTH["pools"][self.names[d]][int(r)] for r in rows]
            if not recs:  # nothing of this dataset was skipped (pass_rates takes at least one record)
                continue
            p = pass_rates(TRUTH["model"], recs, TRUTH["temperature"])
            TRUTH["q"].extend(signal_prob(p, TRUTH["G"]).tolist())
            TRUTH["step"].extend([self.step_index] * len(recs))
        return w

    return walk


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/audit_truth"))
    parser.add_argument(
        "--audit", type=float, default=0.2, help="audit share (0.2: enough audit groups in a small run)"
    )
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=Path("runs/cache"))
    args = parser.parse_args()
    torch.set_num_threads(2)
    profile = with_overrides(
        PROFILES["quick"], pool_size=150, steps=args.steps, eval_every=args.steps, max_gen_rounds=4
    )
    pools, tests, banned = _data(profile, profile.tasks)
    model_cfg, base = profile_base(profile, cache_dir=args.cache, banned=banned)
    TRUTH.update(pools=pools, temperature=profile.temperature, G=profile.group_size)
    loop.Roller = _CapturingRoller  # type: ignore[misc]  # the benchmark's hooks: the model, and the skipped encounters
    Scheduler._walk = _scored_walk(Scheduler._walk)  # type: ignore[method-assign]
    cfg = SchedulerConfig(
        policy="snooze",
        options=SnoozeOptions(factor=5),
        audit=args.audit,
        batch_size=profile.batch_size,
        group_size=profile.group_size,
        max_gen_rounds=profile.max_gen_rounds,
    )
    run_dir = args.out / f"audit{args.audit:g}-seed{args.seed}"
    loop.train(run_dir, pools, tests, cfg, train_config(profile, args.seed), model_cfg, base.state_dict, resume=False)
    lines = read_metrics(run_dir / loop.METRICS_FILE)
    last = lines[-1]
    q, step = np.array(TRUTH["q"]), np.array(TRUTH["step"])
    result = {
        "steps": len(lines),
        "skipped": int(q.size),
        "audit_groups": last["total/audit_groups"],
        "audited_signal_rate": last["total/audit_signal_rate"],
        "true_skipped_signal_rate": float(q.mean()) if q.size else 0.0,
        "drawn_signal_rate": last["total/drawn_signal_rate"],
        "audit_cost": last["total/audit_groups"] / last["total/gen_groups"],
        "given_up_estimate": last["total/audit_given_up"],
        "given_up_truth": float(q.sum() * (1 - args.audit)),
        "quarters": [],
    }
    for k in range(4):
        a, b = k * len(lines) // 4, (k + 1) * len(lines) // 4
        groups = sum(m["snooze/audit/groups"] for m in lines[a:b])
        signal = sum(m["snooze/audit/groups"] * m["snooze/audit/signal_rate"] for m in lines[a:b])
        sel = (step >= a) & (step < b)
        result["quarters"].append(
            {
                "steps": f"{a}-{b - 1}",
                "audit_groups": groups,
                "audited": signal / groups if groups else 0.0,
                "truth": float(q[sel].mean()) if sel.any() else 0.0,
                "skipped": int(sel.sum()),
            }
        )
    (run_dir / "audit_truth.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
