"""Project-wide settings the training script imports."""

STRATEGY = "deepspeed"
