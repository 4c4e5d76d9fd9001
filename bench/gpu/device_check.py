"""Run on a lent GPU machine (device tool): slurm_common's GPU reading against the real host.

What a worker's role reads (the /dev/nvidia* names, nvidia-smi's index,name query) goes
through slurm_gpus exactly as on a worker; the count must equal what nvidia-smi lists, and
every non-GPU device file (nvidiactl, nvidia-uvm, nvidia-caps, ...) must be left out. Writes
$OUT/gpu_check.json; exits 1 when the reading disagrees with the host.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "roles" / "slurm_common" / "files"))
from slurm_readers.gpus import slurm_gpu_query, slurm_gpu_type, slurm_gpus  # noqa: E402

device_files = sorted(str(p) for p in Path("/dev").glob("nvidia*"))
query = subprocess.run(
    slurm_gpu_query("nvidia-smi"), capture_output=True, text=True, check=True
).stdout
listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=True).stdout
gpus = slurm_gpus(query, device_files)
expected = sum(1 for line in listed.splitlines() if line.startswith("GPU "))
report = {
    "device_files": device_files,
    "nvidia_smi_query": query,
    "nvidia_smi_L": listed,
    "slurm_gpus": gpus,
    "gres_type": slurm_gpu_type(gpus["models"][0]) if gpus["models"] else None,
    "expected_count": expected,
    "agrees": gpus["count"] == expected and len(gpus["files"]) == expected,
}
out = Path(os.environ.get("OUT", "."))
(out / "gpu_check.json").write_text(json.dumps(report, indent=2) + "\n")
print(json.dumps(report, indent=2))
sys.exit(0 if report["agrees"] else 1)
