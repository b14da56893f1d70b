"""Markdown tables from the runner's results (one function per table, shared by the runner and make_results)."""

from __future__ import annotations

from typing import Any, Sequence


__all__ = ["METHOD_NAMES", "markdown_table", "pm", "results_markdown"]

METHOD_NAMES = {
    "ares": "ARES",
    "entail-base": "Entail-Base",
    "entail-prev": "Entail-Prev",
    "llm-judge": "LLM-Judge",
    "prm-chain": "PRM (whole chain)",
    "receval-inter": "ReCEval-Inter",
    "roscoe-li-self": "ROSCOE-LI-Self",
    "roscoe-li-source": "ROSCOE-LI-Source",
}


def pm(mean: float, se: float | None = None, digits: int = 3) -> str:
    """``0.903 ± 0.020`` (or just the mean)."""
    return f"{mean:.{digits}f}" if se is None else f"{mean:.{digits}f} ± {se:.{digits}f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table."""
    lines = ["| " + " | ".join(map(str, header)) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def results_markdown(results: dict[str, Any]) -> str:
    """The runner's results as a heading line and one table row per method."""
    task, cfg = results["task"], results["config"]
    methods = results["methods"]
    any_pb = any("processbench" in m for m in methods.values())
    any_bo2 = any("best_of_2" in m for m in methods.values())
    header = ["Method", "Macro-P", "Macro-R", "Macro-F1"]
    header += ["ProcessBench F1"] if any_pb else []
    header += ["Best-of-2 step avg", "Best-of-2 final step"] if any_bo2 else []
    header += ["evals / chain", "ARES evals / (m N)"]
    rows = []
    for name, m in methods.items():
        macro = m["macro"]
        row = [METHOD_NAMES.get(name, name), pm(macro["precision"], macro["precision_se"]),
               pm(macro["recall"], macro["recall_se"]), pm(macro["f1"], macro["f1_se"])]
        if any_pb:
            row.append(pm(m["processbench"]["f1"], m["processbench"]["f1_se"]) if "processbench" in m else "")
        if any_bo2:
            b = m.get("best_of_2")
            row += [pm(b["step_avg"]["accuracy"], b["step_avg"]["se"]), pm(b["final_step"]["accuracy"],
                    b["final_step"]["se"])] if b else ["", ""]
        row.append(f"{m['evaluations_per_chain']:.1f}")
        row.append(f"{m['efficiency']['ratio_per_chain']:.4f}" if "efficiency" in m else "")
        rows.append(row)
    prior = cfg["prior"]
    heading = (
        f"**{task['name']}** — N = {task['num_chains']} chains, {task['num_steps']} steps; backbone "
        f"`{results['backbone']}`; ARES p = {prior}, eps = {cfg['eps']}, delta = {cfg['delta']}, mode {cfg['mode']}. "
        "Macro scores: mean over 5 folds ± bootstrap SE (thresholds fit on the other folds)."
    )
    return heading + "\n\n" + markdown_table(header, rows)
