"""Cross-check of tomors' cone-beam FDK with ASTRA 2.5 FDK_CUDA on the same data.

Runs on the GPU machine with the ASTRA prepared by ../shared/bench/astra/setup.sh
(carried as .astra; `bash .astra/run.sh ...` installs it into .astra/site first):

  ASTRA_SITE=.astra/site ASTRA_SHIM=.astra/libcufft.so.11 python3 scripts/astra_fdk_compare.py \
      --dir PHANTOM_DIR --ours OURS.npy --sod 1000 --odd 500 --pixel 3 --voxel 1 [--short-scan]

PHANTOM_DIR is what `tomors phantom --geometry cone` wrote (projections.npy
[angle][row][col], angles.npy, phantom.npy [z][y][x]); OURS.npy is `tomors recon
--geometry cone` of those projections with the same flags. The mapping of the two
conventions is the one of docs/cone.md: ASTRA projections [row][angle][col], ASTRA
volume row 0 at the smallest y (tomors = astra[:, ::-1, :]).

Prints JSON lines: relative L2 difference of the whole volumes and of the central
slice, inside the cylinder r < 0.45 n; NRMSE of each against the phantom in the
central slice; the least-squares scale between them.
"""
import argparse, ctypes, glob, json, os, sys
import numpy as np

site = os.environ["ASTRA_SITE"]
ctypes.CDLL(glob.glob(site + "/nvidia/cuda_runtime/lib/libcudart.so.12")[0], mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.environ["ASTRA_SHIM"], mode=ctypes.RTLD_GLOBAL)
sys.path.insert(0, site)
import astra  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--dir", required=True)
p.add_argument("--ours", required=True)
p.add_argument("--sod", type=float, required=True)
p.add_argument("--odd", type=float, required=True)
p.add_argument("--pixel", type=float, required=True)
p.add_argument("--voxel", type=float, required=True)
p.add_argument("--short-scan", action="store_true")
a = p.parse_args()

proj = np.load(os.path.join(a.dir, "projections.npy")).astype(np.float32)  # [angle][row][col]
ang = np.load(os.path.join(a.dir, "angles.npy")).astype(np.float64)
phantom = np.load(os.path.join(a.dir, "phantom.npy")).astype(np.float32)  # [z][y][x]
ours = np.load(a.ours).astype(np.float32)
na, nr, nc = proj.shape
nz, ny, nx = ours.shape
v = a.voxel

pg = astra.create_proj_geom("cone", a.pixel, a.pixel, nr, nc, ang, a.sod, a.odd)
vg = astra.create_vol_geom(ny, nx, nz, -nx * v / 2, nx * v / 2, -ny * v / 2, ny * v / 2,
                           -nz * v / 2, nz * v / 2)
sid = astra.data3d.create("-sino", pg, np.ascontiguousarray(np.transpose(proj, (1, 0, 2))))
rid = astra.data3d.create("-vol", vg, 0)
cfg = astra.astra_dict("FDK_CUDA")
cfg["ReconstructionDataId"] = rid
cfg["ProjectionDataId"] = sid
if a.short_scan:
    cfg["option"] = {"ShortScan": True}
aid = astra.algorithm.create(cfg)
astra.algorithm.run(aid)
theirs = astra.data3d.get(rid)[:, ::-1, :].astype(np.float32)
astra.algorithm.delete(aid)
astra.data3d.delete([sid, rid])

yy, xx = np.mgrid[0:ny, 0:nx]
r = np.hypot(xx - (nx - 1) / 2, yy - (ny - 1) / 2)
disc = r < 0.45 * min(nx, ny)
mask = np.broadcast_to(disc, ours.shape)
k = nz // 2


def rel(x, y, m):
    return float(np.linalg.norm((x - y)[m]) / np.linalg.norm(y[m]))


def nrmse(x, truth, m):
    d = truth[m].max() - truth[m].min()
    return float(np.sqrt(np.mean((x[m] - truth[m]) ** 2)) / d)


scale = float(np.sum(ours[mask] * theirs[mask]) / np.sum(theirs[mask] ** 2))
out = dict(
    what="fdk_volume_vs_astra",
    shape=[nz, ny, nx],
    angles=na,
    short_scan=a.short_scan,
    rel_l2_volume=rel(ours, theirs, mask),
    rel_l2_central_slice=rel(ours[k], theirs[k], disc),
    rel_l2_volume_after_scale=rel(ours / scale, theirs, mask),
    scale_ours_over_astra=scale,
    nrmse_central_ours=nrmse(ours[k], phantom[k], disc),
    nrmse_central_astra=nrmse(theirs[k], phantom[k], disc),
    flipped_y_rel_l2=rel(ours[:, ::-1, :], theirs, mask),
    astra=getattr(astra, "__version__", "?"),
)
print(json.dumps(out), flush=True)
np.save(os.path.join(os.path.dirname(os.path.abspath(a.ours)), "astra_fdk.npy"), theirs)
