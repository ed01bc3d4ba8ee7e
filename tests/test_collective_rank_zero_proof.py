"""FAB033 proven with real processes: the rule's first sample, run by the real Lightning on CPU with
two processes (``accelerator="cpu", devices=2, strategy="ddp"``, gloo), hangs in ``fabric.save``
under ``if fabric.global_rank == 0:``; its fixed script, the save on every rank, finishes.

No faked machine here: Lightning launches the second process itself. Both scripts start together;
each prints a marker once both processes are launched. The fixed script gets a generous deadline
to finish. The sample gets ``HANG_WINDOW`` seconds after its markers for a few steps of a 4x2 linear
model that take milliseconds; the verdict "hangs" is that it is still waiting then (a slow machine
only makes that more certain). Then its process group, which this test started, is killed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from fabric_ls.rules import collective_under_rank_zero as rule

pytest.importorskip("lightning")

CASE = rule.INVALID[0]
LAUNCH = "fabric.launch()\n"
MARKER = 'print(f"launched rank {fabric.global_rank}", flush=True)\n'
FIXED_DEADLINE = 300.0  # start-up of two processes importing torch on a loaded machine
HANG_WINDOW = 8.0
_CLEARED = ("LT_", "MASTER_", "PL_", "SLURM_", "TORCHELASTIC_", "OMPI_", "PMI_")
_CLEARED_NAMES = {"WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE"}


class Job:
    """One script run as its own process group; its output collected line by line."""

    def __init__(self, source: str, directory: Path) -> None:
        directory.mkdir()
        script = directory / "train.py"
        script.write_text(source.replace(LAUNCH, LAUNCH + MARKER, 1), encoding="utf-8")
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(_CLEARED) and key not in _CLEARED_NAMES
        }
        environment.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(
            [sys.executable, str(script)],
            cwd=directory,
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self.launched = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)
            # The two processes share the pipe: one's line may land in the middle of the other's.
            ranks = set(re.findall(r"launched rank (\d)", "".join(self.lines)))
            if ranks == {"0", "1"}:
                self.launched.set()

    @property
    def output(self) -> str:
        return "".join(self.lines[-40:])

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)


def test_save_under_rank_zero_hangs_and_the_fixed_script_finishes(tmp_path):
    assert 'accelerator="cpu", devices=2, strategy="ddp"' in CASE.source and CASE.fixed is not None
    hanging = Job(CASE.source, tmp_path / "invalid")
    fixed = Job(CASE.fixed, tmp_path / "fixed")
    try:
        fixed.process.wait(timeout=FIXED_DEADLINE)
        fixed._reader.join(timeout=30)
        assert fixed.process.returncode == 0, fixed.output
        assert fixed.launched.is_set(), fixed.output
        assert (tmp_path / "fixed" / "checkpoint.ckpt").is_file()

        assert hanging.launched.wait(timeout=FIXED_DEADLINE), hanging.output
        with pytest.raises(subprocess.TimeoutExpired):
            hanging.process.wait(timeout=HANG_WINDOW)
        # Rank zero wrote its checkpoint, then waits in the barrier that `fabric.save` ends with.
        assert (tmp_path / "invalid" / "checkpoint.ckpt").is_file()
    finally:
        hanging.stop()
        fixed.stop()


MAIN_PROCESS_FIRST = """import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cpu", devices=2, strategy="ddp")
fabric.launch()
if not fabric.is_global_zero:
    fabric.barrier()
data = torch.randn(16, 4)  # rank zero prepares the data first
if fabric.is_global_zero:
    fabric.barrier()
print(f"rank {fabric.global_rank} passed", flush=True)
"""


def test_main_process_first_is_no_hang(tmp_path):
    """The other ranks wait at their own barrier while rank zero works, then rank zero joins with its
    own: every rank calls ``barrier`` once. fabric-ls is silent, and the two real processes finish."""
    from fabric_ls.engine import analyze_source

    assert analyze_source(MAIN_PROCESS_FIRST, str(tmp_path / "train.py")).findings == []
    job = Job(MAIN_PROCESS_FIRST, tmp_path / "run")
    try:
        job.process.wait(timeout=FIXED_DEADLINE)
        job._reader.join(timeout=30)
        assert job.process.returncode == 0, job.output
        assert set(re.findall(r"rank (\d) passed", job.output)) == {"0", "1"}, job.output
    finally:
        job.stop()


def test_local_rank_zero_on_one_device_per_machine_is_every_process(tmp_path):
    """With one device per machine each process is local rank zero (``local_rank`` is the rank on its
    machine): a barrier under ``if fabric.local_rank == 0`` is reached by all of them. With two
    devices per machine it is rank zero's alone, and the warning stays."""
    from fabric_ls.engine import analyze_source

    script = (
        "import torch\nfrom lightning.fabric import Fabric\n\n"
        'fabric = Fabric(accelerator="cpu", devices={devices}, num_nodes=2, strategy="ddp")\n'
        "fabric.launch()\nif fabric.local_rank == 0:\n    fabric.barrier()\n"
    )
    path = str(tmp_path / "train.py")
    assert analyze_source(script.format(devices=1), path).findings == []
    assert [f.code for f in analyze_source(script.format(devices=2), path).findings] == ["FAB033"]
