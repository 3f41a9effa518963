#!/usr/bin/env python3
"""Cross-check of tomors against ASTRA Toolbox (CPU, from PyPI) on one input.

    tomors phantom --size 512 --angles 720 --out-dir /tmp/sl512
    tomors recon /tmp/sl512/projections.npy --angles /tmp/sl512/angles.npy --out /tmp/sl512/tomors.npy
    python3 scripts/astra_compare.py /tmp/sl512

ASTRA reconstructs the same sinogram with its CPU FBP (parallel geometry,
'linear' projector, Ram-Lak); the script prints the relative difference of
the two images, the difference of their means, and both NRMSEs against the
rasterised phantom inside the disc r = 0.45 n. A mirrored or rotated image,
or a wrong scale, shows as a relative difference of order 1.
"""
import sys

import astra
import numpy as np

d = sys.argv[1]
proj = np.load(f"{d}/projections.npy")[:, 0, :]  # [angle][bin] of the middle row
angles = np.load(f"{d}/angles.npy").astype(np.float64)
phantom = np.load(f"{d}/phantom.npy")[0]
ours = np.load(f"{d}/tomors.npy")[0]
n = proj.shape[1]

vol_geom = astra.create_vol_geom(n, n)
proj_geom = astra.create_proj_geom("parallel", 1.0, n, angles)
projector = astra.create_projector("linear", proj_geom, vol_geom)
sino_id = astra.data2d.create("-sino", proj_geom, proj)
rec_id = astra.data2d.create("-vol", vol_geom)
cfg = astra.astra_dict("FBP")
cfg["ProjectorId"] = projector
cfg["ProjectionDataId"] = sino_id
cfg["ReconstructionDataId"] = rec_id
cfg["FilterType"] = "ram-lak"
alg = astra.algorithm.create(cfg)
astra.algorithm.run(alg)
theirs = astra.data2d.get(rec_id)

yy, xx = np.mgrid[:n, :n]
c = (n - 1) / 2
mask = (xx - c) ** 2 + (yy - c) ** 2 <= (0.45 * n) ** 2


def nrmse(a):
    ref = phantom[mask]
    return np.sqrt(np.mean((a[mask] - ref) ** 2)) / (ref.max() - ref.min())


rel = np.linalg.norm((ours - theirs)[mask]) / np.linalg.norm(theirs[mask])
print(f"ASTRA {astra.__version__} CPU FBP vs tomors on {n}x{n}, {len(angles)} angles")
print(f"relative L2 difference inside the disc: {rel:.4f}")
print(f"mean inside the disc: tomors {ours[mask].mean():.5f}, ASTRA {theirs[mask].mean():.5f}")
print(f"NRMSE vs phantom: tomors {nrmse(ours):.5f}, ASTRA {nrmse(theirs):.5f}")
flip = np.linalg.norm((ours[::-1] - theirs)[mask]) / np.linalg.norm(theirs[mask])
print(f"(for scale: tomors flipped upside down differs by {flip:.3f})")
