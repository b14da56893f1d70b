"""``ares-rerank view`` and the notebook views: the reports of real ``score`` / ``rank`` / ``search`` /
``eval --task bon`` runs (rule oracle, a tiny Qwen2 for search), every text escaped, one clear error line for each
bad input, and the reports loaded in a real headless Chromium (Debian's package, driven over the DevTools protocol
by ``eval/chromium.py``): the DOM counted, the pager and filter used, an injected script shown and never run, no
request beyond the file, light and dark mode, and screenshots that are not blank. No timing is asserted: the load
event of a 10,000-chain report is recorded as a measurement (``python -m eval.bench_viewer`` prints the numbers)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ares_rerank.chain import ChainScores
from ares_rerank.cli import main
from ares_rerank.viewer import detect_kind, render_file, view


REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "examples" / "claimtrees_demo.jsonl"
ORACLE = ["--backbone", "claimtrees-oracle", "--no-progress"]
HOSTILE = ('<script>window.__ares_injected = 1</script><img src=x onerror="window.__ares_injected = 2"> </script> '
           "\"quoted\" & 'single' <!-- comment")


class Classes(HTMLParser):
    """Counts the elements of an HTML text by their class sets, and collects every tag name."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.sets: list[frozenset[str]] = []
        self.hidden: list[frozenset[str]] = []  # the class sets of elements with the hidden attribute
        self.tags: Counter[str] = Counter()
        self.feed(text)

    def handle_starttag(self, tag, attrs):  # noqa: ANN001, ANN201 - HTMLParser's interface
        self.tags[tag] += 1
        classes = frozenset((dict(attrs).get("class") or "").split())
        self.sets.append(classes)
        if "hidden" in dict(attrs):
            self.hidden.append(classes)

    def count(self, *names: str) -> int:
        return sum(set(names) <= s for s in self.sets)


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture(scope="module")
def outputs(tmp_path_factory, tiny_causal_lm_path) -> dict[str, Path]:
    """What the README's commands write, on small inputs: score on the demo, rank with votes, beam search and
    early rejection with a tiny Qwen2, and eval --task bon on a generated set."""
    from ares_rerank.data.bon import claimtrees_bon

    folder = tmp_path_factory.mktemp("outputs")
    out = {"score": folder / "score.jsonl", "rank": folder / "rank.jsonl", "beam": folder / "beam.jsonl",
           "rejection": folder / "rejection.jsonl", "bon": folder / "bon" / "ct.json"}
    assert main(["score", str(DEMO), "--output", str(out["score"]), *ORACLE]) == 0
    problems = [{"id": p.id, "prompt": "\n".join(p.base_claims), "answer": p.answer,
                 "candidates": ["\n".join(c.steps) for c in p.candidates]} for p in claimtrees_bon(3, 5, seed=1)]
    ranked_in = write_jsonl(folder / "rank_in.jsonl", problems)
    assert main(["rank", str(ranked_in), "--output", str(out["rank"]), "--step-separator", "\\n", "--prompt-split",
                 "lines", "--selection", "weighted", "--answer-fn", "ares_rerank.data.bon:claimtrees_answer",
                 *ORACLE]) == 0
    prompts = write_jsonl(folder / "problems.jsonl", [{"id": f"p{i}", "prompt": p} for i, p in enumerate(
        ["I have AB. Rule: AB -> CD", "Let x = 3.", "We have pepper. We have garlic."])])
    tiny = [str(tiny_causal_lm_path), "--problems", str(prompts), "--backbone", "test_cli_search:Overlap",
            "--step-separator", " ", "--max-step-tokens", "5", "--num-iterations", "3", "--no-progress"]
    assert main(["search", *tiny, "--approach", "beam-search", "--n", "4", "--beam-width", "2", "--output",
                 str(out["beam"])]) == 0
    assert main(["search", *tiny, "--approach", "best-of-n", "--n", "3", "--rejection", "hard", "--threshold", "0.6",
                 "--output", str(out["rejection"])]) == 0
    assert main(["eval", "--backbone", "claimtrees-oracle",
                 "--task", "bon", "--generate", "claimtrees", "--n", "12", "--candidates", "4",
                 "--output-dir", str(out["bon"].parent), "--name", "ct", *ORACLE]) == 0
    return out


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_command_output_is_detected_and_drawn(outputs):
    score = render_file(outputs["score"], chains=_demo_chains())
    assert score.kind == "score" and score.shown == 6
    page = Classes(score.html)
    assert page.count("card", "chain") == 6 and page.count("step") == 30
    assert page.count("step", "flagged") == 11 and page.count("step", "first-error") == 6
    assert page.count("gold", "agree") == 30 and page.count("gold", "disagree") == 0
    assert page.count("cert") == 6 and "exact, bound 0" in score.html
    assert "flags agree with the gold labels on 30 of 30 steps" in score.summary

    rank = render_file(outputs["rank"], step_separator="\n")
    rows = read(outputs["rank"])
    page = Classes(rank.html)
    assert rank.kind == "rank" and page.count("cand") == sum(len(r["candidates"]) for r in rows) == 15
    assert page.count("cand", "chosen") == 3 and page.count("groups") == 3
    for row in rows:  # the chosen candidate is the one rank chose, shown first with its answer and votes
        best = row["best_index"]
        assert f'<div class="cand chosen" data-index="{best}">' in rank.html
        assert f"answer {row['answers'][best]}" in rank.html
    assert page.count("step") == sum(len(s) for r in rows for s in r["step_scores"])  # every step has its text
    assert "splits into" not in rank.html and not rank.warnings
    unsplit = render_file(outputs["rank"])  # rank's separator was a newline, not the default blank line
    assert unsplit.html.count("its text splits into 1 step at --step-separator") == 15
    assert unsplit.html.count("<details><summary>text</summary>") == 15  # shown whole
    assert unsplit.warnings == ["15 candidates do not split into one step per score at the step separator '\\n\\n': "
                                "their text is shown whole, beside their step scores. Pass the --step-separator the "
                                "command used."]

    for name in ("beam", "rejection"):
        found = render_file(outputs[name])
        rows = read(outputs[name])
        page = Classes(found.html)
        assert found.kind == "search" and page.count("cand") == sum(len(r["completions"]) for r in rows)
        assert page.count("cand", "chosen") == len(rows) and page.count("rounds") == len(rows)
        assert page.count("step") == sum(len(s) for r in rows for s in r["steps"])
    assert "stopped by early rejection" in render_file(outputs["rejection"]).html
    assert "pruned on the way are not in the output" in render_file(outputs["beam"]).html

    bon = render_file(outputs["bon"])
    results = json.loads(outputs["bon"].read_text())
    page = Classes(bon.html)
    assert bon.kind == "bon" and page.tags["tr"] == 1 + len(results["rows"])
    assert page.count("best") >= len(results["n_values"])  # the best selection at each N is marked


def _demo_chains():
    from ares_rerank.chain import read_chains

    return read_chains(DEMO)


def test_the_command_writes_one_file_atomically_and_refuses_to_overwrite(outputs, tmp_path, capsys):
    out = tmp_path / "report.html"
    args = ["view", str(outputs["score"]), "--chains", str(DEMO), "-o", str(out)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"wrote {out}" in err and "score report, 6 chains, 30 steps" in err
    text = out.read_text()
    assert text.startswith("<!DOCTYPE html>") and "http://" not in text and "https://" not in text  # nothing fetched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]  # no temporary file left beside it
    assert main(args) == 2
    assert "already exists: pass --overwrite" in capsys.readouterr().err and out.read_text() == text
    assert main(args + ["--overwrite", "--page-size", "2"]) == 0
    page = Classes(out.read_text())
    assert page.count("card") == 6 and page.hidden.count(frozenset({"card", "chain"})) == 4  # pages of 2 cards
    assert main(["view", str(outputs["bon"])]) == 0  # default: INPUT with the suffix .html
    assert outputs["bon"].with_suffix(".html").is_file()


def _bad_cases(tmp_path: Path, outputs: dict[str, Path]) -> list[tuple[list[str], str]]:
    score = outputs["score"]
    line = read(score)[0]
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text(json.dumps(line) + "\n\n{not json\n")
    not_utf8 = tmp_path / "latin1.jsonl"
    not_utf8.write_bytes(json.dumps(line).encode() + b"\n" + '{"id": "caf\u00e9"}\n'.encode("latin-1"))
    as_text = write_jsonl(tmp_path / "as_text.jsonl", [  # the demo as prompt / completion: split by the separator
        {"id": c["id"], "prompt": "\n".join(c["base_claims"]), "completion": "\n\n".join(c["steps"])}
        for c in read(DEMO)])
    return [
        ([str(write_jsonl(tmp_path / "other.jsonl", [{"question": "q", "label": 1}]))],
         "other.jsonl:1 is none of the records ares-rerank view reads"),
        ([str(bad_json)], "bad.jsonl:3 is not valid JSON"),
        ([str(not_utf8)], "latin1.jsonl:2 is not UTF-8 text"),
        ([str(write_jsonl(tmp_path / "mixed.jsonl", [line, read(outputs["rank"])[0]]))],
         "mixed.jsonl:2 is a rank record, but line 1 is a score record"),
        ([str(write_jsonl(tmp_path / "range.jsonl", [{**line, "step_scores": [1.0, 1.5, 1, 0, 0]}]))],
         "'step_scores'[1] is 1.5: expected a number in [0, 1]"),
        ([str(write_jsonl(tmp_path / "flags.jsonl", [{**line, "flags": [True]}]))],
         "'flags' is [True]: expected 5 true/false flags"),
        ([str(tmp_path / "missing.jsonl")], "missing.jsonl' does not exist"),
        ([str(write_jsonl(tmp_path / "empty.jsonl", []))], "holds no records: nothing to view"),
        ([str(score), "-o", str(tmp_path)], "is a folder: name a file inside it"),
        ([str(tmp_path)], "is a folder: give the JSONL file"),
        ([str(score), "--chains", str(as_text), "--step-separator", ",", "-o", str(tmp_path / "a.html")],
         "5 step scores, but chain 'claimtrees-L6-90003' of"),
        ([str(score), "--chains", str(write_jsonl(tmp_path / "few.jsonl", read(DEMO)[:2])), "-o",
          str(tmp_path / "b.html")], "id 'claimtrees-L6-90007' is not a chain of"),
        ([str(outputs["rank"]), "--chains", str(DEMO), "-o", str(tmp_path / "c.html")], "drop --chains"),
        ([str(score), "--page-size", "0"], "--page-size=0 must be a positive integer"),
        ([str(score), "--threshold", "2"], "--threshold=2.0 must lie in [0, 1]"),
        ([str(score), "--kind", "rank", "-o", str(tmp_path / "d.html")], "has no 'prompt' or no list 'candidates'"),
        (["-", "-o", "-"], "the report is a file to open in a browser"),
    ]


def test_bad_input_is_one_error_line_naming_the_fix(outputs, tmp_path, capsys):
    for args, message in _bad_cases(tmp_path, outputs):
        assert main(["view", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("ares-rerank view: error: "), err
        assert message in err, (message, err)
    assert not list(tmp_path.glob("*.html"))  # nothing written by a refused run


def test_the_command_never_prints_a_traceback(outputs, tmp_path):
    """The installed entry point on a bad file: one line, exit status 2, from a fresh process."""
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"step_scores": "high", "evaluations": 1}])
    done = subprocess.run([sys.executable, "-m", "ares_rerank.cli", "view", str(bad)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "ARES_DEBUG": ""})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == (f"ares-rerank view: error: {bad}:1: 'step_scores' is 'high': expected a list of "
                                   "step scores in [0, 1].")


def hostile_files(folder: Path) -> tuple[Path, Path]:
    """A score file and its chains whose id, base claim and steps carry markup and a script."""
    chains = write_jsonl(folder / "hostile_chains.jsonl", [
        {"id": f"x{HOSTILE}", "base_claims": [HOSTILE], "steps": ["a sound step", HOSTILE], "labels": [0, 1]}])
    scores = ChainScores([0.9, 0.1], 2, [1, 1], mode="exact", error_bounds=[0.0, 0.0], chain_id=f"x{HOSTILE}")
    return write_jsonl(folder / "hostile.jsonl", [{"id": f"x{HOSTILE}", **scores.to_dict(),
                                                  "flags": scores.flags()}]), chains


def test_every_text_is_escaped(tmp_path):
    from ares_rerank.chain import read_chains

    scores, chains = hostile_files(tmp_path)
    html = render_file(scores, chains=read_chains(chains)).html
    page = Classes(html)
    assert page.tags["script"] == 1 and page.tags["img"] == 0  # only the pager's own script
    assert "<!-- comment" not in html and "&lt;script&gt;window.__ares_injected = 1&lt;/script&gt;" in html
    assert "onerror=&quot;window" in html and "&quot;quoted&quot; &amp; &#x27;single&#x27;" in html
    rank = write_jsonl(tmp_path / "rank.jsonl", [{
        "id": HOSTILE, "prompt": HOSTILE, "candidates": [HOSTILE, "fine"], "scores": [0.2, 0.8],
        "step_scores": [[0.2], [0.8]], "first_errors": [0, -1], "best_index": 1, "answers": [HOSTILE, "ok"],
        "ranking": [{"corpus_id": 1, "index": 1, "score": 0.8, "answer": "ok", "group": 0, "votes": 1.0},
                    {"corpus_id": 0, "index": 0, "score": 0.2, "answer": HOSTILE, "group": 1, "votes": 0.0}],
        "groups": [{"group": 0, "answer": "ok", "votes": 1.0, "members": [1]},
                   {"group": 1, "answer": HOSTILE, "votes": 0.0, "members": [0]}]}])
    page = Classes(render_file(rank).html)
    assert page.tags["script"] == 1 and page.tags["img"] == 0 and page.count("cand") == 2


def test_only_max_records_are_read_and_the_cut_is_said(outputs, tmp_path, capsys):
    out = tmp_path / "cut.html"
    assert main(["view", str(outputs["score"]), "--max-records", "2", "-o", str(out)]) == 0
    assert "WARNING: 4 more records of this file are not shown: only the first 2 are read" in capsys.readouterr().err
    html = out.read_text()
    assert Classes(html).count("card") == 2 and "4 more records of this file are not shown" in html


def test_long_text_is_cut_with_a_note(tmp_path):
    chains = write_jsonl(tmp_path / "long_chains.jsonl", [{"id": "c", "base_claims": [], "steps": ["x" * 5000]}])
    scores = ChainScores([0.7], 1, [1], mode="exact", error_bounds=[0.0])
    path = write_jsonl(tmp_path / "long.jsonl", [{"id": "c", **scores.to_dict(), "flags": [False]}])
    from ares_rerank.chain import read_chains

    html = render_file(path, chains=read_chains(chains), max_text=100).html
    assert "x" * 100 + "<" in html and "x" * 101 not in html and "4,900 more characters" in html


def test_notebook_views_of_chain_scores_and_rankings():
    from ares_rerank.backbones.oracle import ClaimTreesOracle
    from ares_rerank.rerank.reranker import AresReranker
    from test_rerank import claimtrees_reranking_problem

    scores = ChainScores([0.95, 0.3, 0.8], 7, [2, 3, 2], mode="sample", eps=0.1, delta=0.05, num_samples=600)
    html = scores._repr_html_()
    page = Classes(html)
    assert page.count("step") == 3 and page.count("step", "flagged") == 1 and page.count("step", "first-error") == 1
    assert page.tags["script"] == 0 and page.tags["style"] == 1 and html.startswith('<div class="ares-view"')
    assert "sampled N=600, eps=0.1, delta=0.05" in html and "<b>delta</b> 0.05" in html

    prompt, candidates, sound = claimtrees_reranking_problem(0)
    reranker = AresReranker(ClaimTreesOracle(), step_separator="\n", prompt_split="lines")
    shown = view(reranker.rank(prompt, candidates), prompt)
    page = Classes(shown._repr_html_())
    assert page.count("cand") == 4 and page.count("cand", "chosen") == 1
    assert f'<div class="cand chosen" data-index="{sound}">' in shown.html
    assert "not scored" not in shown.html and Classes(shown.html).count("txt") == 4  # each text, with its score
    records = reranker.score_batch([prompt], [candidates])[0]  # with their steps: each step drawn
    assert Classes(view(records, prompt).html).count("step") == sum(len(r["steps"]) for r in records)
    assert detect_kind(records[0]) is None and view([scores, scores]).shown == 2
    with pytest.raises(TypeError, match="view\\(int\\) shows ChainScores"):
        view(3)


def test_the_viewer_imports_nothing_heavy():
    code = ("import sys, ares_rerank.viewer, ares_rerank.commands.view; "
            "print(sorted(m for m in ('torch', 'transformers', 'matplotlib', 'sklearn') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# -- in a real browser ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    from eval.chromium import Chromium, ChromiumError, find_chromium

    reason, started = None, None
    if find_chromium() is None:
        reason = ("chromium is not installed: scripts/install_chromium.sh installs Debian's package (scripts/test.sh "
                  "runs it), or set ARES_CHROMIUM to a Chromium binary")
    else:
        try:
            started = Chromium()
        except ChromiumError as err:
            reason = f"chromium did not start: {err}"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI runs the browser test)")
        pytest.skip(reason)
    yield started
    started.close()


def colours(png: bytes) -> tuple[int, tuple[int, int, int]]:
    """How many distinct colours a screenshot has, and its top-left pixel."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    return len(image.getcolors(maxcolors=1 << 24)), image.getpixel((2, 2))


def count(browser, selector: str) -> int:
    return browser.evaluate(f"document.querySelectorAll({json.dumps(selector)}).length")


def test_the_demo_report_in_chromium_light_and_dark(browser, outputs, tmp_path):
    report = tmp_path / "demo.html"
    assert main(["view", str(outputs["score"]), "--chains", str(DEMO), "-o", str(report)]) == 0
    timing = browser.open(report)
    assert timing["load_event"] > 0 and browser.requests() == [report.resolve().as_uri()]  # nothing else fetched
    assert browser.evaluate("document.getElementById('ares-report').dataset.ready") == "1"  # the pager ran
    assert count(browser, ".step") == 30 and count(browser, ".step.flagged") == 11
    assert count(browser, ".step.first-error") == 6 and count(browser, ".gold.agree") == 30
    assert count(browser, ".card:not([hidden])") == 6 and count(browser, ".cert") == 6
    assert browser.evaluate("document.getElementById('ares-info').textContent") == "page 1 of 1 (6 of 6 shown by the " \
                                                                                   "filter)"
    light, corner = colours(browser.screenshot())
    assert light >= 30 and sum(corner) > 600  # drawn (bars, marks, text), on a light page
    browser.open(report, dark=True)
    dark, corner = colours(browser.screenshot())
    assert dark >= 30 and sum(corner) < 150  # prefers-color-scheme: dark gives a dark page
    assert browser.evaluate("getComputedStyle(document.querySelector('.step.flagged')).borderLeftColor") != \
        browser.evaluate("getComputedStyle(document.querySelector('.step:not(.flagged)')).borderLeftColor")


def test_rank_and_search_reports_in_chromium(browser, outputs, tmp_path):
    report = tmp_path / "rank.html"
    assert main(["view", str(outputs["rank"]), "--step-separator", "\\n", "-o", str(report)]) == 0
    browser.open(report)
    rows = read(outputs["rank"])
    assert count(browser, ".cand") == 15 and count(browser, ".cand.chosen") == 3
    chosen = browser.evaluate("Array.from(document.querySelectorAll('.cand.chosen')).map(c => [c.dataset.index, "
                              "c.querySelector('h3').textContent])")
    assert [int(i) for i, _ in chosen] == [r["best_index"] for r in rows]
    assert all(head.endswith("\u2714 chosen") and "rank 1" in head for _, head in chosen)
    assert count(browser, "table.groups tr") == 3 + sum(len(r["groups"]) for r in rows)
    assert colours(browser.screenshot())[0] >= 30
    for name in ("beam", "rejection"):
        report = tmp_path / f"{name}.html"
        assert main(["view", str(outputs[name]), "-o", str(report)]) == 0
        browser.open(report)
        rows = read(outputs[name])
        assert count(browser, ".cand") == sum(len(r["completions"]) for r in rows)
        assert count(browser, ".cand.chosen") == 3 and count(browser, "details.rounds") == 3
        chosen = browser.evaluate("Array.from(document.querySelectorAll('.cand.chosen')).map(c => +c.dataset.index)")
        assert chosen == [r["best_index"] for r in rows]


def test_an_injected_script_is_shown_as_text_and_never_run(browser, tmp_path):
    scores, chains = hostile_files(tmp_path)
    report = tmp_path / "hostile.html"
    assert main(["view", str(scores), "--chains", str(chains), "-o", str(report)]) == 0
    browser.open(report)
    assert browser.evaluate("typeof window.__ares_injected") == "undefined"
    assert count(browser, "img") == 0 and browser.evaluate("document.scripts.length") == 1
    assert browser.requests() == [report.resolve().as_uri()]  # the <img src=x> never became a request
    texts = browser.evaluate("Array.from(document.querySelectorAll('.step .txt')).map(t => t.textContent)")
    assert texts[1].endswith(HOSTILE) and count(browser, ".step") == 2
    assert browser.evaluate("document.querySelector('h2').textContent") == f"x{HOSTILE}"


def test_paging_and_the_filter_in_chromium(browser, tmp_path):
    from eval.bench_viewer import write_inputs

    scores, chains = write_inputs(tmp_path, 120, seed=3)
    report = tmp_path / "paged.html"
    assert main(["view", str(scores), "--chains", str(chains), "-o", str(report)]) == 0
    browser.open(report)
    shown = "Array.from(document.querySelectorAll('.card:not([hidden]) h2')).map(h => h.textContent)"
    assert browser.evaluate(shown) == [f"synthetic-{i}" for i in range(50)]
    browser.evaluate("document.getElementById('ares-next').click()")
    assert browser.evaluate(shown) == [f"synthetic-{i}" for i in range(50, 100)]
    browser.evaluate("document.getElementById('ares-next').click()")
    assert browser.evaluate(shown) == [f"synthetic-{i}" for i in range(100, 120)]
    assert browser.evaluate("document.getElementById('ares-next').disabled") is True
    disagree = [r["id"] for r, c in zip(read(scores), read(chains)) if r["flags"] != [bool(y) for y in c["labels"]]]
    assert disagree  # the synthetic scores put some steps on the wrong side
    browser.evaluate("(() => { const s = document.getElementById('ares-only'); s.value = 'disagree'; "
                     "s.dispatchEvent(new Event('change')); })()")
    assert browser.evaluate(shown) == disagree[:50]
    browser.evaluate("(() => { const s = document.getElementById('ares-only'); s.value = 'all'; "
                     "s.dispatchEvent(new Event('change')); const q = document.getElementById('ares-q'); "
                     "q.value = 'SYNTHETIC-11'; q.dispatchEvent(new Event('input')); })()")
    browser.evaluate("new Promise(r => setTimeout(r, 400))")  # the text filter waits for typing to pause
    assert browser.evaluate(shown) == ["synthetic-11"] + [f"synthetic-{i}" for i in range(110, 120)]


def test_a_10000_chain_report_loads_and_pages_in_chromium(browser, tmp_path, record_property):
    """The done-when's file: one HTML file, loaded, paged. Its load event is recorded, not asserted (no timed
    tests): ``python -m eval.bench_viewer`` prints the timings."""
    from eval.bench_viewer import write_inputs

    scores, chains = write_inputs(tmp_path, 10_000)
    report = tmp_path / "big.html"
    assert main(["view", str(scores), "--chains", str(chains), "-o", str(report)]) == 0
    timing = browser.open(report)
    record_property("load_event_ms", timing["load_event"])
    print(f"10,000-chain report: {report.stat().st_size / 1e6:.1f} MB, load event {timing['load_event']:.0f} ms")
    assert count(browser, ".card") == 10_000 and count(browser, ".card:not([hidden])") == 50
    browser.evaluate("document.getElementById('ares-next').click()")
    assert browser.evaluate("document.querySelector('.card:not([hidden]) h2').textContent") == "synthetic-50"
    assert colours(browser.screenshot())[0] >= 30
