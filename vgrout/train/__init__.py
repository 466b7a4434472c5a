"""Stage 5, training: the Dr.GRPO loop with the lora2r adapter (deployed and quarantine blocks), what each arm changes in a step, checkpoints and the step log."""
