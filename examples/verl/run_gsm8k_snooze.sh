#!/usr/bin/env bash
# The snooze trainer in verl 0.9.1 on one GPU: vLLM rollouts, a small public model, GSM8K.
#
# NOT RUN IN CI, and not yet run by the project (no GPU was available): see docs/integrations/verl.md,
# "A GPU recipe". Nothing is downloaded at run time; bring the model and the data:
#
#   MODEL  a local copy of a small instruct model, e.g. Qwen/Qwen2.5-0.5B-Instruct
#   DATA   a folder with train.parquet and test.parquet written by verl's own preprocessor
#          (verl repo: python examples/data_preprocess/gsm8k.py --local_save_dir DATA), which gives every
#          row data_source=openai/gsm8k and extra_info.index (the prompt's stable id)
#   RUN    where checkpoints, the reward log and verl's file log go (default ./runs/gsm8k_snooze)
#
# usage: examples/verl/run_gsm8k_snooze.sh MODEL DATA [RUN] [extra Hydra overrides...]
# needs: one GPU with >= 24 GB, and in one environment verl's GPU stack and snooze from a clone of it
# (snooze is not on PyPI yet), installed from the clone's root:
#   pip install 'verl[vllm]==0.9.1'     # verl, vLLM and TransferQueue with verl's own pins
#   pip install .                       # snooze (registers trainer.v1.trainer_mode=snooze with verl)
# check the overrides first, on any machine with verl: snooze check-verl <the overrides below>
set -euo pipefail

if [[ $# -lt 2 ]]; then
  echo "usage: $0 MODEL DATA [RUN] [overrides...]" >&2
  exit 2
fi
MODEL=$1
DATA=$2
RUN=${3:-runs/gsm8k_snooze}
shift $(( $# >= 3 ? 3 : 2 ))
for f in "$DATA/train.parquet" "$DATA/test.parquet" "$MODEL/config.json"; do
  [[ -f $f ]] || { echo "$0: $f not found (see the header of this script)" >&2; exit 2; }
done
mkdir -p "$RUN"

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=False \
  data.train_files="$DATA/train.parquet" data.val_files="$DATA/test.parquet" \
  data.train_batch_size=64 data.gen_batch_size=128 \
  data.max_prompt_length=512 data.max_response_length=512 \
  data.filter_overlong_prompts=True data.truncation=error \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.model.use_remove_padding=True \
  actor_rollout_ref.model.enable_gradient_checkpointing=True \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \
  actor_rollout_ref.actor.use_kl_loss=True actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=32 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=32 \
  trainer.v1.trainer_mode=snooze \
  +trainer.v1.snooze.policy=snooze +trainer.v1.snooze.options.factor=1 +trainer.v1.snooze.carry_surplus=True \
  +trainer.v1.snooze.max_gen_rounds=4 +trainer.v1.snooze.seed=0 \
  trainer.default_local_dir="$RUN/ckpt" trainer.save_freq=50 trainer.resume_mode=auto \
  trainer.logger='["console","file"]' trainer.project_name=snooze trainer.experiment_name=gsm8k_snooze \
  trainer.n_gpus_per_node=1 trainer.nnodes=1 \
  trainer.test_freq=25 trainer.total_training_steps=200 \
  "$@"
