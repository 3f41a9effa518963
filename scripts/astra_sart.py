"""ASTRA SART_CUDA (2D, slice by slice) on the geometry of
`cargo run --release -p tomors-cuda --example sart_bench [n] [angles] [slices] [sweeps]`,
to put beside its numbers (run on the GPU machine, in the same call).

  ASTRA_SITE=.astra/site ASTRA_SHIM=.astra/libcufft.so.11 \
      python3 scripts/astra_sart.py --n 256 --angles 256 --slices 16 --sweeps 5

(`.astra` as prepared by ../shared/bench/astra/setup.sh, its wheels installed
into .astra/site with pip --target, as .astra/run.sh does.)

ASTRA's SART is 2D only: each slice is its own data objects and algorithm run.
One sweep = `angles` SART iterations (one projection each), projection order
sequential, x >= 0 (MinConstraint 0), relaxation 1 — tomors' SART (one
projection per block, row/column-sum weights, lambda 1, x >= 0). Host to host:
per slice, create the sinogram and volume objects from numpy, run, read the
volume back; the figure is the wall time of all slices / sweeps (one warm-up
slice first, not timed). Random sinograms in [0, 1) as the example's.
Prints one JSON line.
"""
import argparse, ctypes, glob, json, os, sys, time
import numpy as np

site = os.environ["ASTRA_SITE"]
ctypes.CDLL(glob.glob(site + "/nvidia/cuda_runtime/lib/libcudart.so.12")[0], mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(os.environ["ASTRA_SHIM"], mode=ctypes.RTLD_GLOBAL)
sys.path.insert(0, site)
import astra

p = argparse.ArgumentParser()
p.add_argument("--n", type=int, default=256)
p.add_argument("--angles", type=int, default=256)
p.add_argument("--slices", type=int, default=16)
p.add_argument("--sweeps", type=int, default=5)
a = p.parse_args()
n, na, ns = a.n, a.angles, a.slices
ang = (np.arange(na) * (np.pi / na)).astype(np.float32).astype(np.float64)
vg = astra.create_vol_geom(n, n)
pg = astra.create_proj_geom("parallel", 1.0, n, ang)
rng = np.random.default_rng(2)
sinos = rng.random((ns, na, n), dtype=np.float32)


def one(sino):
    sid = astra.data2d.create("-sino", pg, sino)
    rid = astra.data2d.create("-vol", vg, 0)
    cfg = astra.astra_dict("SART_CUDA")
    cfg["ReconstructionDataId"] = rid
    cfg["ProjectionDataId"] = sid
    cfg["option"] = {"ProjectionOrder": "sequential", "MinConstraint": 0.0}
    aid = astra.algorithm.create(cfg)
    astra.algorithm.run(aid, na * a.sweeps)
    x = astra.data2d.get(rid)
    astra.algorithm.delete(aid)
    astra.data2d.delete([sid, rid])
    return x


one(sinos[0])
t = time.perf_counter()
for s in range(ns):
    one(sinos[s])
dt = time.perf_counter() - t
print(json.dumps({"what": "sart2d", "astra": getattr(astra, "__version__", "?"), "n": n,
                  "angles": na, "slices": ns, "sweeps": a.sweeps,
                  "seconds_per_sweep": dt / a.sweeps,
                  "seconds_per_sweep_per_slice": dt / a.sweeps / ns}), flush=True)
