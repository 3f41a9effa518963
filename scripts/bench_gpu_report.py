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
        m = re.search(r"reconstructed (?:\d+ slices )?in ([\d.]+) s", log)
        if m:
            fig(n + ":recon", float(m.group(1)), "s", "the CLI's own reconstruction time (log line)", n)
    elif n.startswith("astra-"):
        size = "512" if n.endswith("-512") else None
        for line in log.splitlines():
            if line.startswith("{"):
                try:
                    j = json.loads(line)
                except ValueError:
                    continue
                w = j.get("what", n)
                if w.startswith("cone_"):
                    w = f"{w}:{j.get('n')}"
                if "GUps" in j:
                    fig(f"astra:{w}", j["GUps"], "GU/s", "ASTRA " + n, n)
                if "seconds" in j:
                    fig(f"astra:{w}:s", j["seconds"], "s", "ASTRA " + n, n)
                if "seconds_per_iter" in j:
                    fig(f"astra:{w}:s_per_iter", j["seconds_per_iter"], "s", "ASTRA host to host", n)
    elif n == "tomocupy":
        # One JSON line per method and precision in its log (bench.py).
        for line in log.splitlines():
            if not line.startswith('{"method"'):
                continue
            try:
                r = json.loads(line)
            except ValueError:
                continue
            key = f"tomocupy:{r['method']}:{r['dtype']}:nz{r['nz']}"
            basis = f"GPU-resident filter + back projection of {r['nz']} slices, cupy events, median"
            fig(key + ":ms", r["ms_total"], "ms", basis, n)
            fig(key + ":s_2048", r["est_s_2048_slices"], "s", "2048 slices estimated from " + basis, n)
            fig(key + ":GUps", r["GUps_total"], "GU/s", basis, n)
    elif n == "fdk-lib":
        # The default configuration's median where the bench names it; else all timed reps.
        d = re.search(r"\(the default\) median ([\d.]+) s", log)
        t = [float(x) for x in re.findall(r"\(timed\): ([\d.]+) s host to host", log)]
        if d:
            fig("fdk-lib:512", float(d.group(1)), "s", "host to host, warm, median of the default's timed reps", n)
        elif t:
            t.sort()
            fig("fdk-lib:512", t[len(t) // 2], "s", "host to host, warm, median of timed reps", n)
    elif n == "sirt-parallel":
        # Per pair (`bench sirt PAIR rep K: ...`): joseph (the exact default), tensor / sweep (the
        # voxel pair, ASTRA's pairing); the un-suffixed figures are the Joseph pair's.
        best = {}
        for pair, dev, h2h in re.findall(r"bench sirt (\S+) rep \d+: ([\d.]+) s/iteration device-resident loop, "
                                         r"([\d.]+) s/iteration host to host", log):
            if pair not in best or float(h2h) < best[pair][1]:
                best[pair] = (float(dev), float(h2h))
        if not best:
            m = re.findall(r"([\d.]+) s/iteration device-resident loop, ([\d.]+) s/iteration host to host", log)
            if m:
                best["joseph"] = (min(float(a) for a, _ in m), min(float(b) for _, b in m))
        for pair, (dev, h2h) in best.items():
            fig(f"sirt-parallel:{pair}:device", dev, "s/iter", "device loop, CUDA events", n)
            fig(f"sirt-parallel:{pair}:h2h", h2h, "s/iter", "host to host (whole call / iterations)", n)
        if "joseph" in best:
            fig("sirt-parallel:device", best["joseph"][0], "s/iter", "device loop, CUDA events (Joseph pair)", n)
            fig("sirt-parallel:h2h", best["joseph"][1], "s/iter", "host to host (whole call / iterations; Joseph pair)", n)
    elif n.startswith("sirt-cone"):
        size = "512" if n.endswith("512") else "256"
        best = {}
        for pair, dev, h2h in re.findall(r"sirt \((\w+) pair[^)]*\)(?: rep \d+)?: ([\d.]+) s/iteration device loop.*?, ([\d.]+) s/iteration host to host", log):
            if pair not in best or float(h2h) < best[pair][1]:
                best[pair] = (float(dev), float(h2h))
        for pair, (dev, h2h) in best.items():
            fig(f"sirt-cone:{size}:{pair}:device", dev, "s/iter", "device loop", n)
            fig(f"sirt-cone:{size}:{pair}:h2h", h2h, "s/iter", "host to host (whole call / iterations)", n)
    elif n == "cpu-bp":
        m = re.search(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\w+)\s+([\d.]+)\s+([\d.]+)\s*$", log, re.M)
        if m:
            fig(f"cpu-bp:{m.group(1)}", float(m.group(6)), "GU/s", "CPU, all cores, " + log.splitlines()[0].strip(), n)

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
