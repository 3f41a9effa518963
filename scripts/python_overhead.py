#!/usr/bin/env python3
"""Python-call overhead of tomors.recon (FBP) against the same Rust code
without Python (crates/tomors-py/examples/fbp_timing.rs), on the same
1024-bin × 1024-angle projections (slices of 1024²); docs/python.md reports
the result.

    cargo build --release -p tomors-py --example fbp_timing
    python3 scripts/python_overhead.py [ROWS] [REPS] [cpu|cuda]

The example is looked up in $CARGO_TARGET_DIR (default target/) under
release/examples; on the GPU machine `bash .pydevice/run.sh overhead ...`
(scripts/python-device-pack.sh) runs this script with the packed example.

Both sides time warm calls: one untimed call on the same data first (the
Rust example does it in each of its processes). Runs alternate (Python,
Rust, Python, Rust, ...) so that a changing machine load hits both alike; prints every wall-clock and CPU time (user + system of
all threads: less sensitive to other processes on a shared machine), their
medians and minima. Freeing the result is timed apart on both sides
(`del out` here, the drop after the clock stops in the example): it is not
part of the call. With TOMORS_TIMING=1 both sides print the time of each
phase of every call on stderr (tomors timing ... / rust timing ...).
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import tomors

rows = int(sys.argv[1]) if len(sys.argv) > 1 else 24
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
backend = sys.argv[3] if len(sys.argv) > 3 else "cpu"
target = Path(os.environ.get("CARGO_TARGET_DIR", Path(__file__).resolve().parents[1] / "target"))
exe = target / "release/examples/fbp_timing"
if not exe.exists():
    sys.exit(f"python_overhead: {exe} is missing; cargo build --release -p tomors-py --example fbp_timing")
theta = tomors.angles(1024)
sino = tomors.shepp_logan_projections(theta, 1024)
proj = np.ascontiguousarray(np.repeat(sino[:, None, :], rows, axis=1))
with tempfile.TemporaryDirectory() as d:
    np.save(f"{d}/p.npy", proj)
    np.save(f"{d}/t.npy", theta)
    py, rs, pyc, rsc, pyf, rsf, pyp, rsp = [], [], [], [], [], [], [], []
    # One untimed call on the same data first (thread pool, FFT plans, GPU
    # contexts, kernels and buffers), as fbp_timing does in its process.
    tomors.recon(proj, theta, backend=backend)
    for _ in range(reps):
        flt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t, c = time.perf_counter(), time.process_time()
        out = tomors.recon(proj, theta, backend=backend)
        py.append(time.perf_counter() - t)
        pyc.append(time.process_time() - c)
        pyp.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - flt)
        # Freeing the volume is timed apart on both sides: a caller keeps
        # the result, and the Rust example drops its volume after its clock
        # stops too.
        t = time.perf_counter()
        del out
        pyf.append(time.perf_counter() - t)
        p = subprocess.run([str(exe), f"{d}/p.npy", f"{d}/t.npy", "1", backend], capture_output=True,
                           text=True, check=True)
        if p.stderr:
            print(p.stderr.strip(), file=sys.stderr)
        rs.append(float(p.stdout.split()[0]))
        rsc.append(float(p.stdout.split()[1]))
        rsf.append(float(p.stdout.split()[2]))
        rsp.append(int(p.stdout.split()[3]))
gpus = [d["name"] for d in tomors.devices()["devices"]]
print(f"{rows} slices of 1024² from 1024 angles × 1024 bins, backend {backend}, {reps} runs each; "
      f"{os.cpu_count()} CPU threads, GPUs {gpus or 'none'}, load {os.getloadavg()[0]:.2f}")
print("minor page faults per call, python:", " ".join(map(str, pyp)))
print("minor page faults per call, rust:  ", " ".join(map(str, rsp)))
for what, p, r in (("wall", py, rs), ("cpu", pyc, rsc), ("free", pyf, rsf)):
    print(f"{what} python:", " ".join(f"{v:.3f}" for v in p))
    print(f"{what} rust:  ", " ".join(f"{v:.3f}" for v in r))
    for name, f in (("median", statistics.median), ("min", min)):
        a, b = f(p), f(r)
        if what == "free":
            print(f"{what} {name}: python {a:.4f} s, rust {b:.4f} s (not part of the call)")
        else:
            print(f"{what} {name}: python {a:.3f} s, rust {b:.3f} s, overhead {100 * (a - b) / b:+.2f} %")
