#!/usr/bin/env python3
"""Turns the raw logs of scripts/bench-gpu.sh into NAME.json (every step: command, exit code, wall
seconds, log, and the figures parsed from it) and NAME.md (a readable summary).

  bench_gpu_report.py RAW_DIR OUT_BASE [--quick 0|1]
"""
import json, re, sys
from pathlib import Path

raw, base = Path(sys.argv[1]), Path(sys.argv[2])
quick = len(sys.argv) > 4 and sys.argv[4] == "1"
steps = []
for line in (raw / "steps.tsv").read_text().splitlines():
    name, rc, wall, cmd = line.split("\t", 3)
    log = (raw / f"{name}.log").read_text(errors="replace") if (raw / f"{name}.log").exists() else ""
    steps.append({"name": name, "rc": int(rc), "wall_s": float(wall), "cmd": cmd, "log": log})

figures = []  # {"id", "value", "unit", "basis", "step"}


def fig(id_, value, unit, basis, step):
    figures.append({"id": id_, "value": value, "unit": unit, "basis": basis, "step": step})


for s in steps:
    if s["rc"] != 0:
        continue
    log, n = s["log"], s["name"]
    if n in ("cache-first", "cache-second"):
        fig(n, s["wall_s"], "s", "fresh CLI process, wall time (includes loading and I/O)", n)
        m = re.search(r"kernel cache: (\d+) modules loaded from cache, (\d+) compiled", log)
        if m:
            fig(n + "-loaded", int(m.group(1)), "modules", "log line", n)
            fig(n + "-compiled", int(m.group(2)), "modules", "log line", n)
    elif n == "bp-model":
        for line in log.splitlines():
            p = line.split()
            if len(p) == 8 and p[1] in ("linear", "nearest"):
                try:
                    vals = [float(x) for x in (p[2], p[3], p[5], p[6], p[7])]
                except ValueError:
                    continue
                key = f"bp:{p[0]}:{p[1]}"
                fig(key, vals[3], "GU/s", "GPU-resident, CUDA events, median", n)
                fig(key + ":predicted", vals[1], "GU/s", f"model, limit {p[4]}", n)
    elif n == "fbp-e2e":
        m = re.search(r"end-to-end FBP of (\d+) slices (\d+)² from (\d+) angles: ([\d.]+) s", log)
        if m:
            fig(f"fbp-e2e:{m.group(1)}x{m.group(2)}", float(m.group(4)), "s", "host to host, wall", n)
    elif n in ("fbp-file", "fdk-cli"):
        fig(n, s["wall_s"], "s", "fresh CLI process, file to file, wall", n)
    elif n.startswith("astra-"):
        for line in log.splitlines():
            if line.startswith("{"):
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                w = j.get("what", n)
                if "GUps" in j:
                    fig(f"astra:{w}", j["GUps"], "GU/s", "ASTRA " + n, n)
                if "seconds" in j:
                    fig(f"astra:{w}:s", j["seconds"], "s", "ASTRA " + n, n)
                if "seconds_per_iter" in j:
                    fig(f"astra:{w}:s_per_iter", j["seconds_per_iter"], "s", "ASTRA host to host", n)
    elif n == "tomocupy":
        res = raw / "tomocupy" / "results.json"
        if res.exists():
            for r in json.loads(res.read_text()):
                fig("tomocupy:" + ":".join(str(r.get(k, "")) for k in ("alg", "dtype")),
                    r, "record", "GPU-resident, cupy events, median", n)

run = {"name": base.name, "quick": quick, "steps": steps, "figures": figures}
base.with_suffix(".json").write_text(json.dumps(run, indent=1))
md = [f"# GPU benchmark run {base.name}", "",
      "Raw logs: `" + raw.name + "/`. Produced by `scripts/bench-gpu.sh`" + (" --quick" if quick else "") + ".", "",
      "| step | exit | wall s | command |", "|---|---|---|---|"]
md += [f"| {s['name']} | {s['rc']} | {s['wall_s']:.2f} | `{s['cmd']}` |" for s in steps]
md += ["", "| figure | value | unit | timed as |", "|---|---|---|---|"]
md += [f"| {f['id']} | {f['value'] if not isinstance(f['value'], float) else round(f['value'], 4)} | {f['unit']} | {f['basis']} |"
       for f in figures if f["unit"] != "record"]
md += ["", "## Log tails", ""]
for s in steps:
    md += [f"### {s['name']}", "```", *s["log"].splitlines()[-15:], "```", ""]
base.with_suffix(".md").write_text("\n".join(md))
print(f"wrote {base}.json and {base}.md ({len(figures)} figures, "
      f"{sum(s['rc'] != 0 for s in steps)} failed steps)")
