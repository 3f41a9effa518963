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
    astra = val("astra:bp")
    rows = ["| kernel | interp | GU/s | model GU/s | × ASTRA `BP3D_CUDA` |", "|---|---|---|---|---|"]
    for k, f in figs.items():
        m = re.fullmatch(r"bp:([^:]+):(linear|nearest)", k)
        if not m:
            continue
        pred = val(k + ":predicted")
        ratio = f"{f['value'] / astra:.1f}×" if astra else "—"
        rows.append(f"| `{m.group(1)}` | {m.group(2)} | {f['value']:.0f} | {pred:.0f} | {ratio} |"
                    if pred else f"| `{m.group(1)}` | {m.group(2)} | {f['value']:.0f} | — | {ratio} |")
    rows.append("")
    rows.append(f"GPU-resident data on both sides (CUDA events, median); source {src}.")
    return rows


def e2e():
    rows = ["| figure | tomors | peer | timed as |", "|---|---|---|---|"]
    fbp = next((f for k, f in figs.items() if k.startswith("fbp-e2e:")), None)
    a2d = val("astra:fbp2d:s")
    if fbp:
        n = int(fbp["id"].split(":")[1].split("x")[0])
        peer = f"ASTRA `FBP_CUDA` {a2d * n:.1f} s ({a2d * 1e3:.1f} ms per slice × {n})" if a2d else "—"
        rows.append(f"| FBP {fbp['id'].split(':')[1]} | {fbp['value']:.2f} s | {peer} | host to host, wall |")
    if "fdk-cli" in figs:
        a = val("astra:fdk:s")
        rows.append(f"| FDK (CLI, fresh process) | {val('fdk-cli'):.2f} s | "
                    + (f"ASTRA `FDK_CUDA` {a:.3f} s" if a else "—") + " | file to file vs ASTRA host to host |")
    for k in ("cache-first", "cache-second"):
        if k in figs:
            rows.append(f"| CLI {k} (kernel cache) | {val(k):.2f} s | | fresh process, wall; "
                        f"{val(k + '-loaded')} loaded, {val(k + '-compiled')} compiled |")
    a = val("astra:sirt:s_per_iter")
    if a:
        rows.append(f"| parallel SIRT per iteration | see `sirt-parallel` log | ASTRA {a:.3f} s | host to host |")
    rows.append("")
    rows.append(f"Source {src}.")
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
