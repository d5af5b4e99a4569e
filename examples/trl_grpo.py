"""GRPO + LoRA on a trace-gym environment with your own TRL ``GRPOTrainer``.

    python examples/trl_grpo.py [MODEL] [ENV_ID] [STEPS] [OUT]

``grpo_trainer_kwargs`` supplies the dataset (env seeds), the rollout function (it plays
each group's episodes through the env: tool results and user turns come from the env
and are masked out of the loss) and the reward function (the env's own reward).
Everything else is plain TRL; keep ``num_generations`` and ``max_completion_length``
the same on both sides.  ``trace-gym train`` does the same with more defaults chosen.
"""

import sys

import torch
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

from trace_gym.train import grpo_trainer_kwargs

model_name, env_id, steps, out = (sys.argv[1:] + ["HuggingFaceTB/SmolLM2-135M-Instruct", "trace/cap-refund-policy-v0",
                                                  "10", "runs/trl_grpo"][len(sys.argv) - 1:])[:4]

gpu = torch.cuda.is_available()
tokenizer = AutoTokenizer.from_pretrained(model_name, padding_side="left")
args = GRPOConfig(output_dir=out, num_generations=4, per_device_train_batch_size=4, max_completion_length=256,
                  max_steps=int(steps), learning_rate=1e-5, logging_steps=1, report_to="none", bf16=gpu, use_cpu=not gpu)
trainer = GRPOTrainer(
    model=AutoModelForCausalLM.from_pretrained(model_name), args=args, processing_class=tokenizer,
    peft_config=LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"),
    **grpo_trainer_kwargs(env_id, seeds=range(64), num_generations=4, max_new_tokens_per_turn=64,
                          max_completion_length=256),
)
trainer.train()
trainer.save_model(f"{out}/adapter")
