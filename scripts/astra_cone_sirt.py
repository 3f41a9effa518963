"""ASTRA SIRT3D_CUDA and the cone FP3D/BP3D kernels on the geometry of
`cargo run --release -p tomors-cuda --example cone_sirt_bench [n] [angles]`,
to put beside its numbers (run on the GPU machine, in the same call).

  ASTRA_SITE=.astra/site ASTRA_SHIM=.astra/libcufft.so.11 \
      python3 scripts/astra_cone_sirt.py --n 256 --angles 360 --iters 5

(`.astra` as prepared by ../shared/bench/astra/setup.sh, its wheels
installed into .astra/site with pip --target, as .astra/run.sh does.)

Geometry (as the example): n³ volume fitted to an n × n detector of unit
pixels, angles over 2π, cone angle 10° (SDD = (n/2)/tan 5°, SOD = SDD/1.463),
mapped to ASTRA's `cone` as docs/cone.md says (same SOD, ODD, pixels; the
volume's voxel size through the volume geometry's extent). Random data in
[0, 1). Prints one JSON line per measurement; GU/s = voxels × projections / s.
"""
import argparse, ctypes, glob, json, math, os, sys, time
import numpy as np

site = os.environ["ASTRA_SITE"]
ctypes.CDLL(glob.glob(site + "/nvidia/cuda_runtime/lib/libcudart.so.12")[0], mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.environ["ASTRA_SHIM"], mode=ctypes.RTLD_GLOBAL)
sys.path.insert(0, site)
import astra
import astra.experimental
import cupy as cp

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=256)
p.add_argument("--angles", type=int, default=360)
p.add_argument("--iters", type=int, default=5)
p.add_argument("--reps", type=int, default=3)
a = p.parse_args()
n, na = a.n, a.angles

sdd = (n / 2.0) / math.tan(math.radians(5.0))
sod = sdd / 1.463
odd = sdd - sod
# ConeGeometry::fitting_volume for n × n × n voxels, principal point centred.
w = h = n / 2.0
r_max = sod * w / math.sqrt(sdd * sdd + w * w)
by_width = 2.0 * r_max / n
by_height = 2.0 * h * sod / (n * sdd + h * n)
vox = min(by_width, by_height) * (1.0 - 1e-9)
vox = float(np.float32(vox))
ang = (np.arange(na) * (2 * np.pi / na)).astype(np.float32).astype(np.float64)
pg = astra.create_proj_geom("cone", 1.0, 1.0, n, n, ang, sod, odd)
vg = astra.create_vol_geom(n, n, n, -n * vox / 2, n * vox / 2, -n * vox / 2, n * vox / 2,
                           -n * vox / 2, n * vox / 2)


def emit(**kw):
    kw["astra"] = getattr(astra, "__version__", "?")
    print(json.dumps(kw), flush=True)


def median_time(f, reps):
    f(); cp.cuda.runtime.deviceSynchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); cp.cuda.runtime.deviceSynchronize()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts))


gu = n ** 3 * na / 1e9
rng = np.random.default_rng(2)
proj = cp.asarray(rng.random((n, na, n), dtype=np.float32))
vol = cp.asarray(rng.random((n, n, n), dtype=np.float32))
pl = astra.data3d.GPULink(proj.data.ptr, n, na, n, n * 4)
vl = astra.data3d.GPULink(vol.data.ptr, n, n, n, n * 4)
pid = astra.create_projector("cuda3d", pg, vg)
tf = median_time(lambda: astra.experimental.direct_FP3D(pid, vl, pl), a.reps)
emit(what="cone_fp", n=n, angles=na, seconds=tf, GUps=gu / tf, voxel=vox, sod=sod, odd=odd)
tb = median_time(lambda: astra.experimental.direct_BP3D(pid, vl, pl), a.reps)
emit(what="cone_bp", n=n, angles=na, seconds=tb, GUps=gu / tb)
del proj, vol, pl, vl
astra.projector3d.delete(pid)

sino = rng.random((n, na, n), dtype=np.float32)
sid = astra.data3d.create("-sino", pg, sino)
rid = astra.data3d.create("-vol", vg, 0)
cfg = astra.astra_dict("SIRT3D_CUDA")
cfg["ReconstructionDataId"] = rid
cfg["ProjectionDataId"] = sid
cfg["option"] = {"MinConstraint": 0.0}
aid = astra.algorithm.create(cfg)
astra.algorithm.run(aid, 2)
t = time.perf_counter()
astra.algorithm.run(aid, a.iters)
dt = (time.perf_counter() - t) / a.iters
emit(what="cone_sirt", n=n, angles=na, iters=a.iters, seconds_per_iter=dt)
