"""Does the policy's own representation of a prompt predict its next group better than the prompt's past?

Issue 12's bounds (docs/reference-experiment.md, "What any skip rule could reach here") find that a skip
rule lacks the prompt's *current* pass rate, which its history does not carry here (the model moves
between visits). A cheap way to look at a prompt now, short of generating: one forward pass over the
prompt alone (a prefill, no sampling) under the model being trained, and a predictor of the group's
signal read from it, fitted online on the groups of the last steps (a value head on the prompt, as a
PPO critic's value at the first token, or a probe for "will the model get this right"). On an LLM a
prefill of the prompt costs a small fraction of generating G completions of it, and it needs no answer
string, so unlike ``pass_rate_oracle.py`` it would carry over to tasks with reasoning traces.

This trains DAPO (the ``dynamic_sampling`` arm: same config, seed and draws) and logs, for every
generated group, the prompt's features under the model that generated it (the final layer's output at
the last prompt token, its mean over the prompt's tokens, and the entropy of the first completion
token), the prompt's exact pass rate (the oracle's) and the group's correct count. It then replays,
step by step from ``--from-step`` on, four predictors of "this group has signal", each fitted by
ridge regression on the groups of the ``--window`` steps before the step it predicts (and the task):

- ``oracle``: ``q = 1 - p**G - (1 - p)**G`` from the exact pass rate (not fitted: the frontier);
- ``history``: the prompt's previous correct count (one-hot, or "never seen"), as every rule of the
  issue's kind reads it;
- ``probe``: the prompt's features now;
- ``probe+history``: both.

and prints each one's AUC and the signal share of the groups it ranks first in each step (keeping
25%, 50%, 75% of them), with what that share would cost a run of ``--steps`` x ``--batch-size``
signal groups with the surplus carried (``steps x batch / r``, first looks and relaxations left out,
so optimistic) against DAPO's own generated groups::

    python research/probe_ceiling.py --seeds 3 --out runs/probe

The window, the ridge penalty and the features were chosen on dev seed 10 (a two-layer MLP on the same
features did worse there: AUC 0.73 against ridge's 0.79), before the reported seeds were run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling probes, run as a script

import pass_rate_oracle as oracle_bench  # noqa: E402
from history_ceiling import previous_group  # noqa: E402

from snooze.analysis import signal_prob  # noqa: E402
from snooze.core.config import SchedulerConfig  # noqa: E402
from snooze.core.policies.base import Context, Policy, register_policy  # noqa: E402
from snooze.experiments.compare import _data, profile_base  # noqa: E402
from snooze.experiments.profiles import PROFILES, train_config  # noqa: E402
from snooze.trainer import loop  # noqa: E402
from snooze.trainer.model import TinyGPT, _shift  # noqa: E402
from snooze.trainer.tokenizer import CharTokenizer  # noqa: E402

KEEP = (0.25, 0.5, 0.75)
LOG_FIELDS = ("step", "ds", "row", "correct", "p", "features")


@torch.no_grad()
def prompt_features(
    model: TinyGPT, records: Sequence[Mapping[str, Any]], temperature: float, chunk: int = 1024
) -> np.ndarray:
    """``[N, 2 d_model + 1]``: each prompt's final-layer output at its last token, its mean over the
    prompt's real tokens, and the entropy of the first completion token at ``temperature``; one
    forward pass over the prompts, no sampling."""
    tok = CharTokenizer()
    was_training = model.training
    model.eval()
    grabbed: dict[str, torch.Tensor] = {}
    hook = model.ln_f.register_forward_hook(lambda _m, _i, out: grabbed.__setitem__("x", out))
    try:
        out = []
        for lo in range(0, len(records), chunk):
            pid, pmask = (
                torch.from_numpy(x) for x in tok.encode_prompts([r["prompt"] for r in records[lo : lo + chunk]])
            )
            logits, _ = model(pid, pmask, _shift(pmask))
            x, m = grabbed["x"], pmask[..., None].to(grabbed["x"].dtype)
            logp = torch.log_softmax(logits[:, -1] / temperature, dim=-1)
            entropy = -(logp.exp() * logp).sum(dim=-1, keepdim=True)
            out.append(torch.cat([x[:, -1], (x * m).sum(dim=1) / m.sum(dim=1), entropy], dim=1).double().numpy())
    finally:
        hook.remove()
        model.train(was_training)
    return np.concatenate(out)


class _LoggingDapo(Policy):
    """DAPO (the base policy's defaults) that logs each group with its prompt's features and pass rate
    under the model that generated it (registered by :func:`main` only)."""

    log: dict[str, list[np.ndarray]] = {k: [] for k in LOG_FIELDS}  # per field, one array per report
    temperature: float = 0.4

    def __init__(self, options: Any, context: Context) -> None:
        super().__init__(options, context)
        self.names = list(context.names)
        self.offsets = np.concatenate([[0], np.cumsum(context.sizes)]).astype(np.int64)
        self.step, self.now = 0, -1
        self.pool_features: list[tuple[np.ndarray, np.ndarray]] = []

    def report(self, memory: Any, report: Any) -> None:
        if self.now != self.step:  # reports of a step come before its update: one model for all of them
            model, pools = oracle_bench.ORACLE.model, oracle_bench.ORACLE.pools
            assert model is not None, "the roller was not built"
            self.pool_features = [
                (
                    prompt_features(model, pools[n], self.temperature),
                    oracle_bench.pass_rates(model, pools[n], self.temperature),
                )
                for n in self.names
            ]
            self.now = self.step
        ds = np.asarray(report.group_ds, dtype=np.int64)
        local = np.asarray(report.group_rows, dtype=np.int64) - self.offsets[ds]
        feats = np.empty((ds.shape[0], self.pool_features[0][0].shape[1]), dtype=np.float32)
        p = np.empty(ds.shape[0])
        for d in np.unique(ds):  # one gather per dataset
            at = ds == d
            feats[at], p[at] = self.pool_features[d][0][local[at]], self.pool_features[d][1][local[at]]
        correct = np.rint(report.rewards.sum(axis=1)).astype(np.int64)
        for key, value in zip(LOG_FIELDS, (np.full(ds.shape[0], self.step), ds, local, correct, p, feats)):
            self.log[key].append(value)
        return None

    def end_step(self, steps: int) -> None:
        self.step = steps


def ridge(x: np.ndarray, y: np.ndarray, lam: float) -> Any:
    """Ridge regression of ``y`` on standardised ``x`` with an unpenalised intercept; returns the predictor."""
    mu, sd = x.mean(axis=0), x.std(axis=0) + 1e-6
    z = np.hstack([(x - mu) / sd, np.ones((x.shape[0], 1))])
    a = z.T @ z + lam * np.eye(z.shape[1])
    a[-1, -1] -= lam
    w = np.linalg.solve(a, z.T @ y)
    return lambda xn: np.hstack([(xn - mu) / sd, np.ones((xn.shape[0], 1))]) @ w


def rolling_ridge(
    x: np.ndarray, y: np.ndarray, step: np.ndarray, window: int, lam: float, from_step: int
) -> np.ndarray:
    """Each row's prediction of ``y`` by a ridge fit on the rows of the ``window`` steps before its own
    (steps ``>= from_step``; NaN before, or where that window is empty)."""
    out = np.full(step.shape[0], np.nan)
    for t in range(from_step, int(step.max()) + 1):
        train, test = (step >= t - window) & (step < t), step == t
        if test.any() and train.any():
            out[test] = ridge(x[train], y[train], lam)(x[test])
    return out


def auc(score: np.ndarray, label: np.ndarray) -> float:
    """The chance that a random positive outranks a random negative (ties broken by position)."""
    rank = np.empty(score.shape[0])
    rank[np.argsort(score, kind="stable")] = np.arange(score.shape[0])
    pos = label.astype(bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((rank[pos].sum() - n_pos * (n_pos - 1) / 2) / (n_pos * n_neg))


def kept_share(score: np.ndarray, label: np.ndarray, step: np.ndarray, keep: float) -> float:
    """Signal share of the groups ranked first by ``score`` within each step, ``keep`` of each step's groups."""
    kept = []
    for t in np.unique(step):
        at = np.flatnonzero(step == t)
        kept.append(label[at[np.argsort(-score[at], kind="stable")[: max(1, round(keep * at.shape[0]))]]])
    return float(np.concatenate(kept).mean())


def history_columns(log: Mapping[str, np.ndarray], group_size: int) -> np.ndarray:
    """One-hot of each group's prompt's previous correct count, or "never seen" (the first column)."""
    ds, row, correct = (np.asarray(log[k]) for k in ("ds", "row", "correct"))
    prev = previous_group(ds.astype(np.int64) * (int(row.max()) + 1) + row)
    prev_correct = np.where(prev >= 0, correct[np.maximum(prev, 0)], -1)
    return (prev_correct[:, None] == np.arange(-1, group_size + 1)[None]).astype(float)


def predictors(
    log: Mapping[str, np.ndarray], group_size: int, window: int, lam: float, from_step: int
) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Each predictor's score for the groups of steps ``>= from_step``, with their signal and step."""
    step, ds, correct = (np.asarray(log[k]) for k in ("step", "ds", "correct"))
    signal = ((correct > 0) & (correct < group_size)).astype(float)
    history = history_columns(log, group_size)
    task = (ds[:, None] == np.unique(ds)[None]).astype(float)
    inputs = {
        "history": np.hstack([history, task]),
        "probe": np.hstack([log["features"], task]),
        "probe+history": np.hstack([log["features"], history, task]),
    }
    p = np.asarray(log["p"])
    scores = {"oracle": signal_prob(p, group_size)}
    for name, x in inputs.items():
        scores[name] = rolling_ridge(x, signal, step, window, lam, from_step)
    on = step >= from_step
    return {k: v[on] for k, v in scores.items()}, signal[on], step[on]


def common_args(parser: argparse.ArgumentParser, out: str) -> None:
    """The options this benchmark shares with ``critic_ceiling.py``."""
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--profile", default="default", choices=sorted(PROFILES))
    parser.add_argument("--out", type=Path, default=Path(out))
    parser.add_argument("--window", type=int, default=30, help="steps of groups each fit reads")
    parser.add_argument("--lam", type=float, default=10.0, help="ridge penalty")
    parser.add_argument(
        "--from-step", type=int, default=60, help="first step predicted (the earlier ones fill the window)"
    )
    parser.add_argument("--cache", type=Path, default=None, help="warm-up cache folder")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (1, as snooze compare: the runs are then its dynamic_sampling runs)",
    )


def run(
    args: argparse.Namespace,
    policy: type[_LoggingDapo],
    name: str,
    log_name: str,
    fields: Sequence[str],
    score: Callable[[Mapping[str, np.ndarray], Any], tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]],
    before_run: Callable[[int, Any, Any], None] | None = None,
) -> None:
    """Train DAPO with the logging ``policy`` (registered as ``name``) for each seed whose log is
    missing (``before_run(seed, model_cfg, base)`` first), then print each predictor's AUC and kept
    signal shares per seed and as means. ``score(log, profile)`` gives ``(scores by predictor, signal,
    step)``."""
    torch.set_num_threads(args.threads)
    profile = PROFILES[args.profile]
    register_policy(name)(policy)
    pools, tests, banned = _data(profile, profile.tasks)
    oracle_bench.ORACLE.pools = pools
    policy.temperature = profile.temperature
    loop.Roller = oracle_bench._CapturingRoller  # type: ignore[misc]  # the benchmark's hook: it sees the model being trained
    shape = {
        "batch_size": profile.batch_size,
        "group_size": profile.group_size,
        "max_gen_rounds": profile.max_gen_rounds,
    }
    model_cfg = base = None
    results: dict[str, list[list[float]]] = {}
    dapo_groups = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        run_dir, log_path = args.out / f"seed{seed}", args.out / f"seed{seed}" / log_name
        if not log_path.exists():
            if run_dir.exists():
                sys.exit(f"{run_dir} exists without {log_name} (an interrupted run): remove it and run again")
            if base is None:
                model_cfg, base = profile_base(profile, cache_dir=args.cache, banned=banned)
            if before_run is not None:
                before_run(seed, model_cfg, base)
            for v in policy.log.values():
                v.clear()
            loop.train(
                run_dir,
                pools,
                tests,
                SchedulerConfig(policy=name, **shape),
                train_config(profile, seed),
                model_cfg,
                base.state_dict,
            )
            np.savez_compressed(
                log_path, **{k: np.concatenate(v) for k, v in policy.log.items()}
            )  # one array per report, joined
        with np.load(log_path, allow_pickle=False) as f:
            log = {k: f[k] for k in fields}
        dapo_groups.append(log["step"].shape[0])
        scores, signal, step = score(log, profile)
        print(
            f"seed {seed}: {log['step'].shape[0]} groups; "
            f"steps {args.from_step}+: {signal.shape[0]} groups, signal share {signal.mean():.3f}"
        )
        width = max(len(k) for k in scores)
        for key, s in scores.items():
            row = [auc(s, signal)] + [kept_share(s, signal, step, k) for k in KEEP]
            results.setdefault(key, []).append(row)
            print(
                f"  {key:{width}s} AUC {row[0]:.3f} | "
                + " | ".join(f"keep {k:.0%}: signal {v:.3f}" for k, v in zip(KEEP, row[1:])),
                flush=True,
            )
    need = profile.steps * profile.batch_size
    print(
        f"\nmean over {args.seeds} seeds "
        f"(steps {args.from_step}+; DAPO generated {np.mean(dapo_groups):.0f} groups a run); "
        f"the share kept costs a run ~{need} / r groups with the surplus carried:"
    )
    print(
        "| predictor | AUC | "
        + " | ".join(f"signal share, best {k:.0%}" for k in KEEP)
        + f" | DAPO / ({need:,} / r) at 25% |"
    )
    print("|---|---|" + "---|" * len(KEEP) + "---|")
    for key, rows in results.items():
        m = np.mean(rows, axis=0)
        print(
            f"| {key} | {m[0]:.3f} | "
            + " | ".join(f"{v:.3f}" for v in m[1:])
            + f" | {np.mean(dapo_groups) * m[1] / need:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    common_args(parser, "runs/probe")
    args = parser.parse_args()
    run(
        args,
        _LoggingDapo,
        "dynamic_sampling_logged",
        "probe_log.npz",
        LOG_FIELDS,
        lambda log, profile: predictors(log, profile.group_size, args.window, args.lam, args.from_step),
    )


if __name__ == "__main__":
    main()
