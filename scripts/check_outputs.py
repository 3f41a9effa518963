#!/usr/bin/env python3
"""Structural checks of tomors outputs with the readers people use.

    check_outputs.py nexus FILE.nxs NZ NY NX
    check_outputs.py zarr STORE.zarr NZ NY NX VOXEL

nexus: h5py opens the file; /entry is NXentry, its default NXdata has a
signal dataset of shape (NZ, NY, NX) and axes z, y, x that exist with one
value per voxel; the recorded configuration is in the NXprocess.

zarr: the `zarr` package opens every level of the OME-Zarr pyramid; the
`ome-zarr` package reads it as a multiscale image with the axes z, y, x and,
per level, a scale of VOXEL × 2^level on the halved axes; level k is the
2×2×2 mean of level k−1.

Exit 0 when every check passes, 1 with the failed check on stderr, 77 when a
package is missing (the caller skips).
"""
import json
import sys


def need(name):
    try:
        return __import__(name)
    except ImportError:
        print(f"python package {name} missing", file=sys.stderr)
        sys.exit(77)


def check(cond, msg):
    if not cond:
        print(f"FAILED: {msg}", file=sys.stderr)
        sys.exit(1)


def as_str(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def nexus(path, shape):
    h5py = need("h5py")
    with h5py.File(path, "r") as f:
        check(as_str(f.attrs.get("default")) == "entry", "root default = entry")
        entry = f["entry"]
        check(as_str(entry.attrs["NX_class"]) == "NXentry", "entry is NXentry")
        data = entry[as_str(entry.attrs["default"])]
        check(as_str(data.attrs["NX_class"]) == "NXdata", "default of entry is NXdata")
        signal = data[as_str(data.attrs["signal"])]
        check(signal.shape == shape, f"signal shape {signal.shape} != {shape}")
        check(signal.dtype.kind == "f", "signal is float")
        axes = [as_str(a) for a in data.attrs["axes"]]
        check(axes == ["z", "y", "x"], f"axes {axes}")
        for i, a in enumerate(axes):
            check(data[a].shape == (shape[i],), f"axis {a} has one value per voxel")
            check(int(data.attrs[f"{a}_indices"]) == i, f"{a}_indices")
        proc = entry["reconstruction"]
        check(as_str(proc.attrs["NX_class"]) == "NXprocess", "reconstruction is NXprocess")
        conf = proc["configuration/data"][()]
        check(as_str(conf).startswith("# tomors recon configuration"), "configuration recorded")


def zarr_store(path, shape, voxel):
    zarr = need("zarr")
    need("ome_zarr")
    import numpy as np
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Multiscales, Reader

    root = zarr.open_group(path, mode="r")
    ms = root.attrs["multiscales"][0]
    check(ms["version"] == "0.4", "NGFF 0.4")
    check([a["name"] for a in ms["axes"]] == ["z", "y", "x"], "axes z, y, x")
    levels = [root[d["path"]][...] for d in ms["datasets"]]
    check(levels[0].shape == shape, f"level 0 shape {levels[0].shape} != {shape}")
    check(len(levels) >= 2, "a pyramid of at least two levels")
    for k, (d, lev) in enumerate(zip(ms["datasets"], levels)):
        scale = d["coordinateTransformations"][0]["scale"]
        want = [voxel * 2 ** k if lev.shape[a] < shape[a] else voxel for a in range(3)]
        check(np.allclose(scale, want), f"level {k} scale {scale} != {want}")
    # Level 1 is the 2×2×2 mean of level 0 (where the windows are whole).
    l0, l1 = levels[0].astype(np.float64), levels[1].astype(np.float64)
    z, y, x = (n // 2 for n in l0.shape)
    mean = l0[: 2 * z, : 2 * y, : 2 * x].reshape(z, 2, y, 2, x, 2).mean(axis=(1, 3, 5))
    check(np.allclose(l1[:z, :y, :x], mean, rtol=1e-5, atol=1e-6), "level 1 = mean of level 0")
    # The ome-zarr reader sees a multiscale image with the same pyramid.
    nodes = list(Reader(parse_url(path))())
    check(nodes, "ome-zarr finds an image")
    node = nodes[0]
    check(any(isinstance(s, Multiscales) for s in node.specs), "ome-zarr sees multiscales")
    check(len(node.data) == len(levels), "ome-zarr sees every level")
    check(tuple(node.data[0].shape) == shape, "ome-zarr level 0 shape")
    check(np.array_equal(np.asarray(node.data[0]), levels[0]), "ome-zarr level 0 data")
    check(root.attrs["tomors"]["config"].startswith("# tomors recon configuration"), "config recorded")


def main():
    kind, path, *rest = sys.argv[1:]
    shape = tuple(int(v) for v in rest[:3])
    if kind == "nexus":
        nexus(path, shape)
    elif kind == "zarr":
        zarr_store(path, shape, float(rest[3]))
    else:
        sys.exit(f"unknown check {kind}")
    print(json.dumps({"check": kind, "path": path, "ok": True}))


if __name__ == "__main__":
    main()
