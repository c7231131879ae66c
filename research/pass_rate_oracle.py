"""What skipping by signal probability can save at best: a policy that knows every prompt's pass rate.

The built-in tasks have one right answer per prompt and an exact-match verifier, so a prompt's pass
rate under the current model is exactly the probability of sampling its answer and then end of
sequence at the rollout temperature: one teacher-forced forward pass, no sampling. From it the chance
of a signal group of ``G`` is ``q = 1 - p**G - (1 - p)**G``. This benchmark registers a policy,
``pass_rate_oracle``, that skips an encounter when ``q < tau`` (and, like ``predictive``, halves
``tau`` when a draw finds a whole epoch skipped, up to 4 times a step, so steps stay full), and trains
the reference experiment's arms with it. No real policy can know ``q``; what this one saves and what
it keeps of DAPO's accuracy is the frontier of every rule that skips by predicted signal (the
design space): a rule that predicts ``q`` perfectly gets these numbers, one that predicts worse does
not do better in expectation.

The oracle's own forward passes are not counted as generation (they are ~1/30 of a step's sampling
here; on an LLM with reasoning traces there is no such shortcut: the answer is not a fixed string).

    .venv/bin/python research/pass_rate_oracle.py --tau 0.5 --seeds 3 --out runs/oracle
    .venv/bin/python research/pass_rate_oracle.py --tau 0.5 --seeds 3 --out runs/oracle --dapo runs/final-default

prints, per run and as means over seeds, generated groups, DAPO/arm, final avg@8 and the gap to DAPO
(paired by seed: DAPO's runs are read from ``--dapo``'s ``dynamic_sampling/seed<k>/``, or trained here).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from snooze.analysis import signal_prob
from snooze.core.config import SchedulerConfig
from snooze.core.policies import Context, DatasetStream, Policy, PromptTable, register_policy
from snooze.experiments.compare import _data, profile_base
from snooze.experiments.profiles import PROFILES, train_config, with_overrides
from snooze.trainer import loop
from snooze.trainer.model import TinyGPT, completion_logprobs
from snooze.trainer.rollout import Roller
from snooze.trainer.tokenizer import EOS, PAD, CharTokenizer

RELAXATIONS = 4


@dataclass
class _Oracle:
    """What the policy reads: the model being trained (captured from its roller), the pools, ``tau``."""

    tau: float = 0.5
    temperature: float = 0.4
    group_size: int = 8
    pools: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    model: TinyGPT | None = None
    q: dict[str, np.ndarray] = field(default_factory=dict)
    trace: list[dict[str, float]] = field(default_factory=list)

    def signal_chance(self, name: str) -> np.ndarray:
        if name not in self.q:
            assert self.model is not None, "the roller was not built"
            p = pass_rates(self.model, self.pools[name], self.temperature)
            self.q[name] = signal_prob(p, self.group_size)
        return self.q[name]


ORACLE = _Oracle()


@torch.no_grad()
def pass_rates(
    model: TinyGPT, records: Sequence[Mapping[str, Any]], temperature: float, chunk: int = 1024
) -> np.ndarray:
    """Exact pass rate of each record under ``model`` at ``temperature``: P(answer, then EOS)."""
    tok = CharTokenizer()
    was_training = model.training
    model.eval()
    out = []
    for lo in range(0, len(records), chunk):
        part = records[lo : lo + chunk]
        pid, pmask = (torch.from_numpy(x) for x in tok.encode_prompts([r["prompt"] for r in part]))
        answers = [[*tok.encode(r["answer"]), EOS] for r in part]
        width = max(len(a) for a in answers)
        tokens = torch.full((len(part), width), PAD, dtype=torch.long)
        for i, a in enumerate(answers):
            tokens[i, : len(a)] = torch.tensor(a)
        logp = completion_logprobs(model, pid, pmask, tokens, tokens != PAD, temperature, 1)
        out.append(logp.sum(dim=1).exp().double().numpy())
    model.train(was_training)
    return np.concatenate(out)


class PassRateOracle(Policy):
    """Skip an encounter when the prompt's exact chance of a signal group is below ``tau`` (registered as
    ``pass_rate_oracle`` by :func:`main` only: importing this module adds no policy)."""

    def __init__(self, options: Any, context: Context) -> None:
        super().__init__(options, context)
        self.relaxed = 0

    def skip_mask(self, table: PromptTable, stream: DatasetStream, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
        if self.relaxed >= RELAXATIONS:
            return np.zeros(rows.shape[0], dtype=bool)
        return ORACLE.signal_chance(stream.name)[rows] < ORACLE.tau / 2**self.relaxed

    def relax(self, d: int) -> bool:
        self.relaxed += 1
        return True

    def end_step(self, steps: int) -> None:
        q = np.concatenate([ORACLE.signal_chance(n) for n in ORACLE.pools])
        ORACLE.trace.append(
            {
                "step": steps - 1,
                "relaxed": self.relaxed,
                "share_above_tau": float(np.mean(q >= ORACLE.tau)),
                "mean_q": float(q.mean()),
            }
        )
        self.relaxed = 0
        ORACLE.q.clear()  # the model is updated after this step's batch: pass rates are recomputed at the next draw


class _CapturingRoller(Roller):
    def __init__(self, model: TinyGPT, *args: Any, **kwargs: Any) -> None:
        super().__init__(model, *args, **kwargs)
        ORACLE.model = model
        ORACLE.q.clear()


def _result(run_dir: Path) -> dict[str, float]:
    res = loop.read_result(run_dir)
    return {"groups": res.totals["total/gen_groups"], "final": res.sampled_final, "greedy": res.final_accuracy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tau", type=float, default=0.5, help="skip an encounter when its chance of a signal group is below this"
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--profile", default="default", choices=sorted(PROFILES))
    parser.add_argument(
        "--tasks", default=None, help="the main arms' tasks (as snooze compare --tasks; default: the profile's)"
    )
    parser.add_argument(
        "--pool-size", type=int, default=None, help="prompts per task in the RL pool (as snooze compare --pool-size)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/oracle"))
    parser.add_argument(
        "--dapo",
        type=Path,
        default=None,
        help="a snooze compare folder whose dynamic_sampling runs are DAPO's (else trained here)",
    )
    parser.add_argument("--cache", type=Path, default=None, help="warm-up cache folder")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--carry-surplus",
        action="store_true",
        help="the oracle arm keeps its surplus signal groups for the next step (SchedulerConfig.carry_surplus)",
    )
    args = parser.parse_args()
    register_policy("pass_rate_oracle")(PassRateOracle)
    torch.set_num_threads(args.threads)
    profile = with_overrides(PROFILES[args.profile], tasks=args.tasks, pool_size=args.pool_size, fig3_task=args.tasks)
    pools, tests, banned = _data(profile, profile.tasks)
    model_cfg, base = profile_base(profile, cache_dir=args.cache, banned=banned)
    ORACLE.tau, ORACLE.temperature, ORACLE.group_size, ORACLE.pools = (
        args.tau,
        profile.temperature,
        profile.group_size,
        pools,
    )
    loop.Roller = _CapturingRoller  # type: ignore[misc]  # the benchmark's only hook: it sees the model being trained
    shape = {
        "batch_size": profile.batch_size,
        "group_size": profile.group_size,
        "max_gen_rounds": profile.max_gen_rounds,
    }
    rows = []
    out = args.out / (f"tau{args.tau:g}" + ("-carry" if args.carry_surplus else ""))
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        dapo_dir = (args.dapo or args.out) / "dynamic_sampling" / f"seed{seed}"
        if args.dapo is None:
            loop.train(
                dapo_dir,
                pools,
                tests,
                SchedulerConfig(policy="dynamic_sampling", **shape),
                train_config(profile, seed),
                model_cfg,
                base.state_dict,
            )
        run_dir = out / f"seed{seed}"
        ORACLE.trace.clear()
        loop.train(
            run_dir,
            pools,
            tests,
            SchedulerConfig(policy="pass_rate_oracle", carry_surplus=args.carry_surplus, **shape),
            train_config(profile, seed),
            model_cfg,
            base.state_dict,
        )
        if ORACLE.trace:  # empty when the run was complete already (resumed at its end)
            (run_dir / "oracle_trace.json").write_text(json.dumps(ORACLE.trace))
        arm, dapo = _result(run_dir), _result(dapo_dir)
        rows.append((seed, arm, dapo))
        relaxed = sum(t["relaxed"] > 0 for t in ORACLE.trace)
        print(
            f"seed {seed}: oracle tau {args.tau:g}: {arm['groups']:.0f} groups "
            f"({dapo['groups'] / arm['groups']:.2f}x fewer than DAPO's {dapo['groups']:.0f}), "
            f"avg@8 {arm['final']:.3f} vs DAPO {dapo['final']:.3f} (gap {arm['final'] - dapo['final']:+.3f}); "
            f"steps that relaxed: {relaxed}",
            flush=True,
        )
    gaps = [a["final"] - d["final"] for _, a, d in rows]
    ratio = sum(d["groups"] for _, _, d in rows) / sum(a["groups"] for _, a, _ in rows)
    print(
        f"mean over {len(rows)} seeds: DAPO/oracle {ratio:.2f}x, avg@8 {np.mean([a['final'] for _, a, _ in rows]):.3f} "
        f"vs DAPO {np.mean([d['final'] for _, _, d in rows]):.3f}, "
        f"gap {np.mean(gaps):+.3f} [{min(gaps):+.3f}, {max(gaps):+.3f}]"
    )
    summary = {
        "tau": args.tau,
        "carry_surplus": args.carry_surplus,
        "runs": [{"seed": s, "oracle": a, "dapo": d} for s, a, d in rows],
        "ratio": ratio,
        "gap_mean": float(np.mean(gaps)) if gaps else math.nan,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
