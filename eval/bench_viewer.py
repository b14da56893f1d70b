"""How fast ``ares-rerank view`` renders a big score file and how the report behaves in Chromium (a script, not a
test: timings are printed, never asserted).

    python -m eval.bench_viewer                      # 10,000 chains
    python -m eval.bench_viewer --chains 2000 --no-browser
    python -m eval.bench_viewer --figure docs/figures/viewer_demo.png   # the README's screenshot

Writes a seeded synthetic score file and the chains file it scored (ClaimTrees-style steps, 3-12 a chain, labels;
exact, sampled and stratified certificates mixed) into ``--out``, runs the real command
``python -m ares_rerank.cli view scores.jsonl --chains chains.jsonl -o report.html`` in a fresh process and times it
(Python's start and imports included), then loads the report in headless Chromium (``eval/chromium.py``) and reports
its DOMContentLoaded and load events, a page flip and a filter (each timed in the page up to the next layout).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence


__all__ = ["main", "write_inputs"]

REPO = Path(__file__).resolve().parents[1]


def write_inputs(folder: Path, count: int, seed: int = 0) -> tuple[Path, Path]:
    """``(scores.jsonl, chains.jsonl)`` of ``count`` synthetic chains, as ``ares-rerank score`` writes them."""
    from ares_rerank.chain import ChainScores

    rng = random.Random(seed)
    names = [f"{a}{b}" for a in "ABCDEFGHJK" for b in "0123456789"]
    folder.mkdir(parents=True, exist_ok=True)
    scores_path, chains_path = folder / "scores.jsonl", folder / "chains.jsonl"
    with scores_path.open("w") as scores_out, chains_path.open("w") as chains_out:
        for i in range(count):
            length = rng.randint(3, 12)
            path = rng.sample(names, length + 1)
            wrong = rng.randint(1, length) if rng.random() < 0.6 else length + 1  # the first unsound step (1-based)
            pairs = list(zip(path, path[1:]))
            steps = [f"I have {a}, I use rule ({a} -> {b}) to derive {b}, now I have {b}" for a, b in pairs]
            labels = [int(k + 1 >= wrong) for k in range(length)]
            # about 5% of the steps scored on the wrong side of 0.5, so that some flags disagree with gold
            taus = [min(1.0, max(0.0, (0.05 if y != (rng.random() < 0.05) else 0.95) + rng.uniform(-0.1, 0.1)))
                    for y in labels]
            mode = rng.choice(["exact", "sample", "stratified"])
            scores = ChainScores(
                step_scores=taus, evaluations=rng.randint(length, 40 * length),
                evaluations_per_step=[rng.randint(1, 40) for _ in range(length)], mode=mode,
                eps=None if mode == "exact" else 0.1, delta=None if mode == "exact" else 0.1,
                num_samples=None if mode == "exact" else 1498, chain_id=f"synthetic-{i}",
                error_bounds=None if mode == "sample" else [0.0 if mode == "exact" else 0.08] * length)
            base = [f"Rule: {a} -> {b} (meaning that if I have {a}, I can derive {b})" for a, b in pairs]
            chains_out.write(json.dumps({"id": f"synthetic-{i}", "base_claims": base + [f"I have {path[0]}"],
                                         "steps": steps, "labels": labels}) + "\n")
            scores_out.write(json.dumps({"id": f"synthetic-{i}", **scores.to_dict(),
                                         "flags": scores.flags(0.5)}) + "\n")
    return scores_path, chains_path


def browser_numbers(report: Path) -> dict[str, Any]:
    """The report's timings in Chromium (milliseconds) and what it shows."""
    from eval.chromium import Chromium

    with Chromium() as browser:
        browser.watch_long_tasks()
        timing = browser.open(report)
        long_tasks = browser.evaluate("window.__ares_long_tasks") or []
        flip = browser.evaluate("(() => { const t = performance.now(); document.getElementById('ares-next').click();"
                                " document.body.offsetHeight; return performance.now() - t; })()")
        filtered = browser.evaluate(
            "(() => { const t = performance.now(); const s = document.getElementById('ares-only'); s.value = "
            "'disagree'; s.dispatchEvent(new Event('change')); document.body.offsetHeight; return performance.now() - "
            "t; })()")
        shown = browser.evaluate("document.querySelectorAll('.card:not([hidden])').length")
        cards = browser.evaluate("document.querySelectorAll('.card').length")
        heap = browser.evaluate("performance.memory ? performance.memory.usedJSHeapSize : null")
    return {**timing, "longest_task": max(long_tasks, default=0.0), "long_tasks": len(long_tasks),
            "page_flip": flip, "filter": filtered, "cards": cards, "cards_shown": shown,
            "js_heap_mb": None if heap is None else heap / 1e6}


def demo_figure(path: Path, folder: Path) -> None:
    """The README's screenshot: the demo scored as the README's quick start scores it (``--backbone default``),
    its report in Chromium (light mode, 1100 x 760), stored as a 64-colour PNG to stay small."""
    import io

    from PIL import Image

    from eval.chromium import Chromium

    demo = REPO / "examples" / "claimtrees_demo.jsonl"
    for command in (["score", str(demo), "--backbone", "default", "--output", "scores.jsonl", "--no-progress"],
                    ["view", "scores.jsonl", "--chains", str(demo), "-o", "report.html"]):
        done = subprocess.run([sys.executable, "-m", "ares_rerank.cli", *command, "--overwrite"], cwd=folder,
                              capture_output=True, text=True, check=False)  # relative names: the page shows them
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr}")
    with Chromium(width=1100, height=760) as browser:
        browser.open(folder / "report.html")
        png = browser.screenshot()
    image = Image.open(io.BytesIO(png)).convert("RGB").quantize(colors=64)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path, optimize=True)
    print(f"wrote {path} ({path.stat().st_size / 1e3:.0f} kB)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.bench_viewer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chains", type=int, default=10_000, help="Chains in the score file (default 10,000).")
    parser.add_argument("--out", type=Path, default=None,
                        help="Folder for the files (default: a new temporary folder, named in the output).")
    parser.add_argument("--no-browser", action="store_true", help="Render only; do not load it in Chromium.")
    parser.add_argument("--figure", type=Path, default=None, metavar="PNG",
                        help="Instead: write the README's screenshot of the demo report here "
                             "(docs/figures/viewer_demo.png).")
    args = parser.parse_args(argv)
    if args.out is None:  # some 30 MB of files: never in the checkout unless asked
        args.out = Path(tempfile.mkdtemp(prefix="ares-bench-viewer-"))
    if args.figure is not None:
        demo_figure(args.figure, args.out)
        return 0
    scores, chains = write_inputs(args.out, args.chains)
    report = args.out / "report.html"
    command = [sys.executable, "-m", "ares_rerank.cli", "view", str(scores), "--chains", str(chains), "-o",
               str(report), "--overwrite"]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, check=False)
    seconds = time.perf_counter() - start
    if done.returncode:
        print(done.stderr, file=sys.stderr)
        return done.returncode
    with scores.open() as lines:
        steps = sum(len(json.loads(line)["step_scores"]) for line in lines)
    print(f"chains: {args.chains:,}; steps: {steps:,}")
    print(f"ares-rerank view (a fresh process, imports included): {seconds:.2f} s")
    print(f"report: {report} ({report.stat().st_size / 1e6:.1f} MB)")
    if not args.no_browser:
        numbers = browser_numbers(report)
        paint = numbers["first_contentful_paint"]
        print(f"chromium: first contentful paint {'-' if paint is None else f'{paint:.0f}'} ms, DOMContentLoaded "
              f"{numbers['dom_content_loaded']:.0f} ms, load event {numbers['load_event']:.0f} ms; longest main-thread "
              f"task while loading {numbers['longest_task']:.0f} ms ({numbers['long_tasks']} over 50 ms); next page "
              f"{numbers['page_flip']:.1f} ms; filter (disagreeing with "
              f"gold) {numbers['filter']:.1f} ms; {numbers['cards']:,} cards, {numbers['cards_shown']} shown"
              + (f"; JS heap {numbers['js_heap_mb']:.1f} MB" if numbers["js_heap_mb"] is not None else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
