"""A stand-in for ``nvidia-smi`` that prints the real CSV format, scripted by a JSON file.

The tests copy this file to ``<bin>/nvidia-smi`` (with a shebang for the running Python) next to
``nvidia-smi.json``, and put ``<bin>`` first on PATH. Every invocation is appended to
``nvidia-smi.log`` as one JSON line ``{"pid": ..., "argv": [...]}``.

Scenario keys:
    gpus: [{"index", "name", "memory.total" (MiB), "readings": [{field: text}], "lost_after"}]
        readings cycle, one per block; ``lost_after`` = blocks after which the GPU is gone.
    lost_mode: "missing" (rows stop) or "error" (an error line replaces the GPU's row).
    fail: {"code", "message"}: print the message and exit with the code, at once.
    loop_exit_after: blocks after which the ``-lms`` loop exits with code 1.
"""

import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULTS = {
    "utilization.gpu": "0",
    "utilization.memory": "0",
    "memory.used": "0",
    "power.draw": "[N/A]",
    "temperature.gpu": "30",
}


def main(argv):
    scenario = json.loads((HERE / "nvidia-smi.json").read_text())
    with open(HERE / "nvidia-smi.log", "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "argv": argv}) + "\n")
    fail = scenario.get("fail")
    if fail:
        print(fail["message"], flush=True)
        return fail["code"]
    fields, ids, loop_ms = [], None, None
    args = iter(argv)
    for arg in args:
        if arg.startswith("--query-gpu="):
            fields = arg.split("=", 1)[1].split(",")
        elif arg == "-i":
            ids = [int(part) for part in next(args).split(",")]
        elif arg == "-lms":
            loop_ms = int(next(args))
    gpus = [gpu for gpu in scenario["gpus"] if ids is None or gpu["index"] in ids]
    block = 0
    while True:
        for gpu in gpus:
            lost_after = gpu.get("lost_after")
            if lost_after is not None and block >= lost_after:
                if scenario.get("lost_mode") == "error":
                    print(
                        f"Unable to determine the device handle for GPU {gpu['index']}: "
                        "GPU is lost.  Reboot the system to recover this GPU"
                    )
                continue
            readings = gpu.get("readings") or [{}]
            reading = {**DEFAULTS, **readings[block % len(readings)]}
            values = {
                "index": str(gpu["index"]),
                "name": gpu["name"],
                "memory.total": str(gpu["memory.total"]),
                **reading,
            }
            print(", ".join(values[field] for field in fields))
        sys.stdout.flush()
        if loop_ms is None:
            return 0
        block += 1
        if scenario.get("loop_exit_after") is not None and block >= scenario["loop_exit_after"]:
            return 1
        time.sleep(loop_ms / 1000)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
