"""FAB034 proven with the real ``deepspeed`` (0.19.8, installed with ``DS_BUILD_OPS=0``) on CPU:
Lightning's own ``DeepSpeedStrategy.setup_module``, which ``fabric.setup(model)`` calls when no
optimizer is given, builds the engine with ``optimizer=None``, and DeepSpeed asserts for ZeRO
stage 1 and 2; stage 3, and stage 2 with an optimizer, build an engine.

Only what a CPU machine cannot do is skipped: ``launch()`` (DeepSpeed needs CUDA there, FAB019).
One process in a gloo group (``DS_ACCELERATOR=cpu``) is enough, since the assertion is local.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fabric_ls.records import get_record

pytest.importorskip("lightning")
pytest.importorskip("deepspeed")

SCRIPT = r"""
import json, os, socket, traceback
with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
import torch
import deepspeed
from lightning.fabric.accelerators import CPUAccelerator
from lightning.fabric.strategies import DeepSpeedStrategy

deepspeed.init_distributed(dist_backend="gloo")
results = []
for stage, with_optimizer in ((1, False), (2, False), (3, False), (2, True)):
    strategy = DeepSpeedStrategy(
        stage=stage, accelerator=CPUAccelerator(), parallel_devices=[torch.device("cpu", 0)]
    )
    strategy._format_config()  # as launch() does on a GPU machine (`_setup_distributed`, deepspeed.py:655)
    model = torch.nn.Linear(4, 2)
    try:
        if with_optimizer:
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            engine = strategy.setup_module_and_optimizers(model, [optimizer])[0]
        else:
            engine = strategy.setup_module(model)
        results.append([stage, with_optimizer, type(engine).__name__, None, []])
    except AssertionError as error:
        frames = [f"{frame.filename}:{frame.lineno}" for frame in traceback.extract_tb(error.__traceback__)]
        results.append([stage, with_optimizer, "AssertionError", str(error), frames])
print("RESULTS " + json.dumps(results), flush=True)
"""


def test_zero_1_and_2_assert_without_an_optimizer_zero_3_does_not():
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("LT_", "PL_"))}
    environment.update(DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=environment, timeout=600
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    results = {(stage, trained): rest for stage, trained, *rest in json.loads(lines[0][len("RESULTS ") :])}

    record = get_record("FAB034")
    lightning_line = f"lightning/fabric/strategies/deepspeed.py:{record.line_number}"
    for stage in (1, 2):
        outcome, message, frames = results[(stage, False)]
        assert (outcome, message) == ("AssertionError", f"zero stage {stage} requires an optimizer")
        assert record.matches(message)
        # Raised inside deepspeed.initialize, called from the record's line of Lightning.
        assert any(frame.endswith(lightning_line) for frame in frames), frames
        assert "deepspeed/runtime/engine.py" in frames[-1], frames
    assert results[(3, False)][0] == "DeepSpeedEngine"
    assert results[(2, True)][0] == "DeepSpeedEngine"
