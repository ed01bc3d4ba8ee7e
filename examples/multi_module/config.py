"""Settings shared by the training scripts of this project."""

STRATEGY = "deepspeed_stage_3"
DEVICES = 8
