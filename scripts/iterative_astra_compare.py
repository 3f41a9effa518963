#!/usr/bin/env python3
"""Cross-check of tomors' ASTRA-style SIRT against ASTRA Toolbox's CPU SIRT.

    cargo test --release -p tomors-core --test iterative_measure -- --ignored export_for_astra
    python3 scripts/iterative_astra_compare.py /tmp/tomors-iter-astra

The test writes the exact 60-projection sinogram of the 256² modified
Shepp-Logan (raw little-endian f32, [angle][bin]), its angles, the rasterised
phantom, and tomors' reconstructions after the same number of iterations of
SIRT with row/column-sum weights (T = 1/column sums, M = 1/row sums,
relaxation 1, no constraint, zero start) with the Joseph and line-length
projectors. This script runs ASTRA's CPU `SIRT` with its 'linear' (Joseph)
and 'line' (line length) projectors on the same input for the same iteration
count and prints the relative L2 difference of the images and both NRMSEs
against the phantom inside the disc r = 0.45 n.
"""
import sys

import astra
import numpy as np

d = sys.argv[1] if len(sys.argv) > 1 else "/tmp/tomors-iter-astra"
meta = dict(line.split() for line in open(f"{d}/meta.txt"))
n, na, iters = int(meta["n"]), int(meta["angles"]), int(meta["iterations"])
sino = np.fromfile(f"{d}/sino.f32", dtype="<f4").reshape(na, n)
angles = np.fromfile(f"{d}/angles.f32", dtype="<f4").astype(np.float64)
phantom = np.fromfile(f"{d}/phantom.f32", dtype="<f4").reshape(n, n)

yy, xx = np.mgrid[:n, :n]
c = (n - 1) / 2
mask = (yy - c) ** 2 + (xx - c) ** 2 <= (0.45 * n) ** 2
rng = phantom[mask].max() - phantom[mask].min()


def nrmse(img):
    return np.sqrt(np.mean((img[mask] - phantom[mask]) ** 2)) / rng


vol_geom = astra.create_vol_geom(n, n)
proj_geom = astra.create_proj_geom("parallel", 1.0, n, angles)
ok = True
for ours_name, astra_proj in [("joseph", "linear"), ("line", "line")]:
    ours = np.fromfile(f"{d}/tomors_{ours_name}.f32", dtype="<f4").reshape(n, n)
    projector = astra.create_projector(astra_proj, proj_geom, vol_geom)
    sino_id = astra.data2d.create("-sino", proj_geom, sino)
    rec_id = astra.data2d.create("-vol", vol_geom, 0.0)
    cfg = astra.astra_dict("SIRT")
    cfg["ProjectorId"] = projector
    cfg["ProjectionDataId"] = sino_id
    cfg["ReconstructionDataId"] = rec_id
    alg = astra.algorithm.create(cfg)
    astra.algorithm.run(alg, iters)
    theirs = astra.data2d.get(rec_id)
    rel = np.linalg.norm(ours - theirs) / np.linalg.norm(theirs)
    rel_disc = np.linalg.norm((ours - theirs)[mask]) / np.linalg.norm(theirs[mask])
    print(
        f"{ours_name:6s} vs ASTRA '{astra_proj}' SIRT, {iters} iterations: "
        f"relative L2 difference {rel:.2e} (inside the disc {rel_disc:.2e}); "
        f"NRMSE tomors {nrmse(ours):.5f}, ASTRA {nrmse(theirs):.5f}"
    )
    astra.algorithm.delete(alg)
    astra.data2d.delete([sino_id, rec_id])
    astra.projector.delete(projector)
