#!/usr/bin/env python3
"""Regenerates the README's speed tables from the latest docs/runs/*.json written by
scripts/bench-gpu.sh (full runs only). Each table sits between marker comments:

  <!-- bench:kernels:begin -->  ...  <!-- bench:kernels:end -->   back-projection kernels, × ASTRA BP3D_CUDA
  <!-- bench:e2e:begin -->      ...  <!-- bench:e2e:end -->       end-to-end figures beside the peers

  scripts/readme-tables.py [RUN.json] [--check]    (--check: exit 1 if the README would change)
"""
import json, re, sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent
args = [a for a in sys.argv[1:] if not a.startswith("--")]
if args:
    path = Path(args[0])
else:
    runs = sorted(p for p in (root / "docs/runs").glob("*.json") if not p.stem.endswith("quick"))
    if not runs:
        sys.exit("no docs/runs/*.json from a full scripts/bench-gpu.sh run yet: README left as it is")
    path = runs[-1]
run = json.loads(path.read_text())
figs = {f["id"]: f for f in run["figures"]}
src = f"`docs/runs/{path.name}`"


def val(k):
    return figs[k]["value"] if k in figs else None


def kernels():
    """The fastest configuration of each kernel family per interpolation, × ASTRA BP3D_CUDA."""
    astra = val("astra:bp")
    best = {}
    for k, f in figs.items():
        m = re.fullmatch(r"bp:([^:@]+)(@[^:]*)?:(linear|nearest)", k)
        if not m:
            continue
        interp = m.group(3)
        if ",o1" in (m.group(2) or ""):
            interp = "linear, oversampled ×4 (approximate)"
        fam = (m.group(1), interp)
        if fam not in best or f["value"] > best[fam][1]["value"]:
            best[fam] = (k, f)
    rows = ["| kernel (fastest configuration of its family) | interp | GU/s | model GU/s | × ASTRA `BP3D_CUDA` |",
            "|---|---|---|---|---|"]
    for (fam, interp), (k, f) in sorted(best.items(), key=lambda kv: -kv[1][1]["value"]):
        pred = val(k + ":predicted")
        name = k.split(":")[1]
        ratio = f"{f['value'] / astra:.1f}×" if astra else "—"
        rows.append(f"| `{name}` | {interp} | {f['value']:.0f} | {pred:.0f} | {ratio} |" if pred
                    else f"| `{name}` | {interp} | {f['value']:.0f} | — | {ratio} |")
    rows.append("")
    rows.append(f"{run_gpu()}; GPU-resident data on both sides (tomors: CUDA events, median; ASTRA: "
                f"wall time of a synchronised `direct_BP3D` on cupy arrays, median), 2048 bins × 2048 angles → "
                f"32 slices of 2048²{'; ASTRA ' + format(astra, '.0f') + ' GU/s' if astra else ''}. Source {src}.")
    return rows


def run_gpu():
    gpu = next((s["log"] for s in run["steps"] if s["name"] == "gpu"), "")
    line = [l for l in gpu.splitlines() if l and not l.startswith("name")]
    return "On one " + line[0].split(",")[0] if line else "GPU unknown"


def ratio(ours, peer):
    if not (ours and peer):
        return "—"
    r = peer / ours if peer >= ours else ours / peer
    r = f"{r:.2f}×" if r < 1.95 else f"{r:.1f}×"
    return f"**{r}**" if peer >= ours else f"{r} slower"


def e2e():
    rows = ["| job | tomors | peer | tomors vs peer | both timed as |", "|---|---|---|---|---|"]
    fbp = next((f for k, f in figs.items() if k.startswith("fbp-e2e:")), None)
    a2d = val("astra:fbp2d:s")
    if fbp:
        n = int(fbp["id"].split(":")[1].split("x")[0])
        peer = a2d * n if a2d else None
        rows.append(f"| FBP of {n} slices of {n}² from {n} angles | {fbp['value']:.2f} s | "
                    + (f"ASTRA `FBP_CUDA` {peer:.1f} s ({a2d * 1e3:.1f} ms per 2-D slice × {n})" if peer else "—")
                    + f" | {ratio(fbp['value'], peer)} | host to host, wall |")
    lp = val("tomocupy:lprec:float32:nz32:s_2048")
    fr = val("tomocupy:fourierrec:float32:nz32:s_2048")
    lr = val("tomocupy:linerec:float32:nz32:s_2048")
    bpk = [f["value"] for k, f in figs.items()
           if re.fullmatch(r"bp:alu-float2[^:]*:linear", k) and ",o1" not in k]
    if lp and bpk:
        ours = 2048 ** 4 / max(bpk) / 1e9
        rows.append(f"| the same, back projection of GPU-resident data only (linear, exact) | {ours:.2f} s "
                    f"(`alu-float2`, {max(bpk):.0f} GU/s) | tomocupy `linerec` {lr:.1f} s (direct); "
                    f"`fourierrec` {fr:.1f} s; `lprec` {lp:.2f} s (approximate methods, filter included) | "
                    f"{ratio(ours, lr)} vs `linerec` | GPU-resident, events (32 slices scaled to 2048) |")
    fl, af = val("fdk-lib:512"), val("astra:fdk:s")
    if fl:
        rows.append(f"| FDK 512³ from 720 projections (library) | {fl:.3f} s | "
                    + (f"ASTRA `FDK_CUDA` {af:.3f} s" if af else "—") + f" | {ratio(fl, af)} | host to host, warm |")
    if "fdk-cli" in figs:
        rows.append(f"| FDK 512³ / 720, `tomors recon` (fresh process) | {val('fdk-cli'):.2f} s file to file, "
                    f"{val('fdk-cli:recon'):.2f} s of it reconstructing | — | — | CLI, wall |")
    sp, asp = val("sirt-parallel:h2h"), val("astra:sirt:s_per_iter")
    vox = val("sirt-parallel:tensor:h2h")
    if vox and sp:
        rows.append(f"| parallel SIRT 512³ / 512 angles, per iteration, voxel pair (Joseph pair) | {vox:.4f} s "
                    f"({sp:.4f} s) | " + (f"ASTRA `SIRT3D_CUDA` {asp:.3f} s" if asp else "—")
                    + f" | {ratio(vox, asp)} ({ratio(sp, asp)}) | host to host (call / iterations) |")
    elif sp:
        rows.append(f"| parallel SIRT 512³ / 512 angles, per iteration | {sp:.4f} s "
                    f"(device loop {val('sirt-parallel:device'):.4f} s) | "
                    + (f"ASTRA `SIRT3D_CUDA` {asp:.3f} s" if asp else "—") + f" | {ratio(sp, asp)} | host to host (call / iterations) |")
    for size, angles in (("256", 360), ("512", 512)):
        ours = val(f"sirt-cone:{size}:voxel:h2h")
        jos = val(f"sirt-cone:{size}:joseph:h2h")
        peer = val(f"astra:cone_sirt:{size}:s_per_iter")
        if ours:
            rows.append(f"| cone SIRT {size}³ / {angles} angles, per iteration, voxel pair (Joseph pair) | "
                        f"{ours:.4f} s ({jos:.4f} s) | " + (f"ASTRA `SIRT3D_CUDA` {peer:.4f} s" if peer else "—")
                        + f" | {ratio(ours, peer)} ({ratio(jos, peer)}) | host to host (call / iterations) |")
    for k in ("cache-first", "cache-second"):
        if k in figs:
            rows.append(f"| CLI {k.split('-')[1]} run, small FBP (kernel cache) | {val(k):.2f} s | — | — | fresh process, "
                        f"wall; {val(k + '-loaded')} modules loaded from cache, {val(k + '-compiled')} compiled |")
    cpu = next((f for k, f in figs.items() if k.startswith("cpu-bp:")), None)
    if cpu:
        rows.append(f"| CPU back projection, 16 slices of 1024² / 1024 angles | {cpu['value']:.1f} GU/s | — | — | "
                    "wall, the GPU machine's 16 CPU cores |")
    rows.append("")
    rows.append(f"{run_gpu()}, one call; source {src} (raw logs beside it).")
    return rows


readme = root / "README.md"
text = readme.read_text()
new = text
for name, gen in (("kernels", kernels), ("e2e", e2e)):
    pat = re.compile(rf"(<!-- bench:{name}:begin -->\n).*?(<!-- bench:{name}:end -->)", re.S)
    if not pat.search(new):
        sys.exit(f"README.md has no bench:{name} markers")
    new = pat.sub(lambda m: m.group(1) + "\n".join(gen()) + "\n" + m.group(2), new)
if "--check" in sys.argv:
    sys.exit(0 if new == text else 1)
readme.write_text(new)
print(f"README tables regenerated from {path}")
