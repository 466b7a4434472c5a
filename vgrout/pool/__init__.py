"""Stage 4, the teacher pool: completions of the training problems (scripted templates or a teacher model) mixed into each GRPO group."""
