#!/usr/bin/env python3
"""tomors.recon against ASTRA's Python CPU FBP (and TomoPy's gridrec and
fbp when TomoPy is installed) on the same exact 2048² Shepp–Logan slice
(2048 angles over 180°, 2048 bins): wall and CPU time (user + system of all
threads) and NRMSE against the phantom inside the disc r = 0.45 n.
docs/python.md reports the result.

    python3 scripts/python_compare.py [N] [ANGLES]
"""
import sys
import time

import numpy as np

import tomors

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2048
na = int(sys.argv[2]) if len(sys.argv) > 2 else n
theta = tomors.angles(na)
sino = tomors.shepp_logan_projections(theta, n)
phantom = tomors.shepp_logan(n)
rows = []


def timed(name, f):
    f()  # warm up (thread pools, FFT plans, kernel caches)
    t, c = time.perf_counter(), time.process_time()
    img = f()
    rows.append((name, time.perf_counter() - t, time.process_time() - c,
                 tomors.nrmse(np.asarray(img, np.float32), phantom, 0.45)))


timed("tomors.recon (CPU, ram-lak, linear)", lambda: tomors.recon(sino, theta, backend="cpu"))

try:
    import astra

    def astra_fbp():
        vol = astra.create_vol_geom(n, n)
        pg = astra.create_proj_geom("parallel", 1.0, n, theta.astype(np.float64))
        pid = astra.create_projector("linear", pg, vol)
        sid = astra.data2d.create("-sino", pg, sino)
        rid = astra.data2d.create("-vol", vol)
        cfg = astra.astra_dict("FBP")
        cfg.update(ProjectorId=pid, ProjectionDataId=sid, ReconstructionDataId=rid,
                   FilterType="ram-lak")
        alg = astra.algorithm.create(cfg)
        astra.algorithm.run(alg)
        img = astra.data2d.get(rid)
        astra.algorithm.delete(alg)
        astra.data2d.delete([sid, rid])
        astra.projector.delete(pid)
        return img

    timed(f"ASTRA {astra.__version__} FBP (CPU, linear projector, ram-lak)", astra_fbp)
except ImportError:
    print("ASTRA is not installed (pip install astra-toolbox)")

try:
    import tomopy

    tomo = sino[:, None, :]
    for alg in ("gridrec", "fbp"):
        timed(f"TomoPy {tomopy.__version__} {alg}",
              lambda: tomopy.recon(tomo, theta, algorithm=alg)[0])
except ImportError:
    print("TomoPy is not installed (not on PyPI; conda-forge only)")

print(f"{n}² slice from {na} angles × {n} bins")
print(f"| method | wall s | CPU s | NRMSE (disc 0.45 n) |")
print(f"|---|---|---|---|")
for name, w, c, e in rows:
    print(f"| {name} | {w:.2f} | {c:.2f} | {e:.4f} |")
