#!/usr/bin/env python3
"""Summarises bundle/run.sh's output: residuals against the reference, time
per iteration, per-loop GB/s and percent of the measured copy bandwidth."""
import json
import re
import sys
from pathlib import Path

# shared/data/airfoil/README.md
REFERENCE = {
    "400,600": [5.02186124974762478e-04, 3.41746033137403117e-04, 2.63430155018145337e-04,
                2.16287788651008171e-04, 1.84659329688738029e-04, 1.60866472600848038e-04,
                1.42252960297172015e-04, 1.27627049521356040e-04, 1.15810163170279376e-04,
                1.06011463757808209e-04],
    "100,150": [5.09639642815112545e-04, 3.03392277048367197e-04, 2.11974917137214047e-04,
                1.55293568002390435e-04, 1.24173086812545886e-04, 9.96295075730660473e-05,
                8.10373378319785548e-05, 6.81040372829913479e-05, 5.84972493393808742e-05,
                5.10296733643125940e-05],
}

out = Path(sys.argv[1])
grid = sys.argv[2] if len(sys.argv) > 2 else "400,600"
ref = REFERENCE.get(grid)
device = (out / "device.txt").read_text() if (out / "device.txt").exists() else ""
m = re.search(r"copy bandwidth: ([0-9.]+) GB/s", device)
copy = float(m.group(1)) if m else None
print(f"# parloop on the GPU: airfoil {grid}\n")
print("```\n" + device.strip() + "\n```\n")
print("| strategy | residuals | worst rel. error | wall s | planning s | ms/iter | GB/s | % of copy |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
loops = {}
for f in sorted(out.glob("airfoil-*.txt")):
    s = f.stem.removeprefix("airfoil-")
    text = f.read_text()
    rms = [float(v) for _, v in re.findall(r"^\s+(\d+)\s+(\S+)$", text, re.M)]
    worst = max((abs(a - b) / b for a, b in zip(rms, ref or [])), default=float("nan"))
    ok = "ok" if ref and len(rms) == len(ref) and worst <= 1e-10 else "FAIL"
    w = re.search(r"wall time ([0-9.]+) s \(([0-9.]+) s planning", text)
    t = re.search(r"([0-9.]+) ms per iteration, ([0-9.]+) GB/s", text)
    if not (w and t):
        print(f"| {s} | no result | | | | | | |")
        continue
    gbs = float(t.group(2))
    pct = f"{100 * gbs / copy:.0f}" if copy else ""
    print(f"| {s} | {ok} | {worst:.1e} | {w.group(1)} | {w.group(2)} | {t.group(1)} | {gbs:.0f} | {pct} |")
    p = out / f"profile-{s}.json"
    if p.exists():
        loops[s] = json.loads(p.read_text())["loops"]
print("\nPer loop (GB/s at the minimum-bytes model; % of the copy bandwidth):\n")
names = [l["name"] for l in next(iter(loops.values()), [])]
print("| loop | " + " | ".join(loops) + " |")
print("| --- |" + " --- |" * len(loops))
for n in names:
    row = []
    for s, ls in loops.items():
        l = next((x for x in ls if x["name"] == n), None)
        if l is None:
            row.append("")
        else:
            pct = f" ({100 * l['gb_per_s'] / copy:.0f} %)" if copy else ""
            row.append(f"{l['gb_per_s']:.0f}{pct}, {l['mean_seconds'] * 1e6:.1f} us")
    print(f"| {n} | " + " | ".join(row) + " |")
