"""The report's inline style sheet and its one small script (no server, no network: everything is in the file).

Every rule is under ``.ares-view`` so that a notebook cell's fragment styles itself without touching the notebook.
The script only pages and filters cards that the server side rendered: it sets ``hidden`` and ``textContent``,
never HTML, so no text from the data is ever parsed as markup.
"""

from __future__ import annotations


__all__ = ["NOSCRIPT", "SCRIPT", "STYLE"]

STYLE = """
.ares-view{--bg:#fff;--fg:#1f2328;--muted:#59636e;--panel:#f6f8fa;--line:#d1d9e0;--bad:#cf222e;--good:#1a7f37;
--accent:#0969da;--track:#e3e8ee;--chosen:#fff8c5;--bar-l:42%;color-scheme:light dark;background:var(--bg);
color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
@media (prefers-color-scheme:dark){.ares-view{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--panel:#151b23;
--line:#3d444d;--bad:#ff7b72;--good:#3fb950;--accent:#4493f8;--track:#2a313c;--chosen:#2e2a12;--bar-l:52%}}
.ares-view *{box-sizing:border-box}
.ares-view h1{font-size:1.25rem;margin:.2rem 0}
.ares-view h2{font-size:1rem;margin:0 .4rem 0 0;display:inline;overflow-wrap:anywhere}
.ares-view .muted,.ares-view .note{color:var(--muted)}
.ares-view .note{font-style:italic;font-size:.85rem}
.ares-view .card{background:var(--panel);border:1px solid var(--line);border-radius:8px;padding:.7rem .9rem;
margin:.8rem 0}
.ares-view .card[hidden]{display:none}
.ares-view .badge{display:inline-block;border:1px solid var(--line);border-radius:999px;padding:0 .5rem;
font-size:.8rem;margin:.1rem .2rem .1rem 0;white-space:nowrap}
.ares-view .bad{color:var(--bad);border-color:var(--bad)}
.ares-view .good{color:var(--good);border-color:var(--good)}
.ares-view ol.steps{list-style:none;margin:.5rem 0 0;padding:0;counter-reset:step}
.ares-view .step{display:grid;grid-template-columns:2.2rem 6rem 6.6rem 1fr;gap:.5rem;align-items:start;
padding:.15rem .3rem;border-left:3px solid transparent;counter-increment:step}
.ares-view .step::before{content:counter(step);color:var(--muted);text-align:right;font-variant-numeric:tabular-nums}
.ares-view .step.flagged{border-left-color:var(--bad);background:color-mix(in srgb,var(--bad) 9%,transparent)}
.ares-view .bar{position:relative;height:.8rem;margin-top:.3rem;background:var(--track);border-radius:3px;
overflow:hidden}
.ares-view .bar::before{content:"";position:absolute;left:0;top:0;bottom:0;width:max(4%,calc(var(--t)*100%));
background:hsl(calc(var(--t)*120) 72% var(--bar-l))}
.ares-view .bounded .bar::after{content:"";position:absolute;top:0;bottom:0;left:calc(var(--lo)*100%);
width:calc((var(--hi) - var(--lo))*100%);background:var(--fg);opacity:.22}
.ares-view .tau{font-variant-numeric:tabular-nums;white-space:nowrap}
.ares-view .tau small{color:var(--muted)}
.ares-view .txt{white-space:pre-wrap;overflow-wrap:anywhere;min-width:0}
.ares-view .mark{display:inline-block;font-size:.72rem;font-weight:700;color:var(--bg);background:var(--bad);
border-radius:3px;padding:0 .3rem;margin-right:.3rem}
.ares-view .mark.first{background:transparent;color:var(--bad);border:1px solid var(--bad)}
.ares-view .gold{font-size:.75rem;margin-right:.3rem;white-space:nowrap}
.ares-view .gold::before{content:"gold: "}
.ares-view .gold.agree{color:var(--good)}
.ares-view .gold.disagree{color:var(--bad);font-weight:700}
.ares-view .cert{margin:.5rem 0 0;font-size:.85rem;word-spacing:.1rem}
.ares-view .cert b{color:var(--muted);font-weight:600;margin-left:.6rem}
.ares-view .cert b:first-child{margin-left:0}
.ares-view details{margin:.3rem 0}
.ares-view summary{cursor:pointer;color:var(--muted)}
.ares-view .claims{margin:.2rem 0;padding-left:1.5rem;white-space:pre-wrap;overflow-wrap:anywhere}
.ares-view .cands{display:grid;grid-auto-flow:column;grid-auto-columns:minmax(19rem,1fr);gap:.6rem;
overflow-x:auto;margin-top:.5rem;padding-bottom:.3rem}
.ares-view .cand{border:1px solid var(--line);border-radius:6px;padding:.5rem;background:var(--bg);min-width:0}
.ares-view .cand.chosen{border:2px solid var(--accent);background:var(--chosen)}
.ares-view .cand h3{font-size:.9rem;margin:0 0 .2rem}
.ares-view .cand .step{grid-template-columns:1.6rem 1fr 4.2rem;gap:.1rem .4rem}
.ares-view .cand .step .txt{grid-column:2/-1}
.ares-view .chosen-mark{color:var(--accent);font-weight:700}
.ares-view table{border-collapse:collapse;margin:.5rem 0;font-variant-numeric:tabular-nums}
.ares-view th,.ares-view td{border:1px solid var(--line);padding:.2rem .5rem;text-align:left;vertical-align:top}
.ares-view td.best{font-weight:700;color:var(--accent)}
.ares-view td .bar{width:5rem;display:inline-block;vertical-align:middle;margin:0 .3rem 0 0}
.ares-view .pager{position:sticky;top:0;z-index:1;background:var(--bg);padding:.4rem 0;display:flex;gap:.5rem;
align-items:center;flex-wrap:wrap;border-bottom:1px solid var(--line)}
.ares-view .pager input,.ares-view .pager select,.ares-view .pager button{font:inherit;color:var(--fg);
background:var(--panel);border:1px solid var(--line);border-radius:4px;padding:.1rem .4rem}
.ares-view .legend{display:inline-flex;align-items:center;gap:.3rem;font-size:.8rem;color:var(--muted)}
.ares-view .legend .scale{width:6rem;height:.6rem;border-radius:3px;
background:linear-gradient(90deg,hsl(0 72% var(--bar-l)),hsl(60 72% var(--bar-l)),hsl(120 72% var(--bar-l)))}
.ares-view .banner{border:1px solid var(--bad);color:var(--bad);border-radius:6px;padding:.3rem .6rem}
"""

#: Without a script every card shows (no paging), and the controls that need one hide.
NOSCRIPT = "<noscript><style>.ares-view .card[hidden]{display:block}.ares-view .pager{display:none}</style></noscript>"

SCRIPT = """
(function () {
  "use strict";
  var root = document.getElementById("ares-report");
  var cards = Array.prototype.slice.call(root.querySelectorAll(".card"));
  var size = parseInt(root.getAttribute("data-page-size"), 10) || 50;
  var query = document.getElementById("ares-q"), only = document.getElementById("ares-only");
  var info = document.getElementById("ares-info");
  var prev = document.getElementById("ares-prev"), next = document.getElementById("ares-next");
  var matched = cards, shown = cards.slice(0, size), page = 0, timer = null;
  function draw() {
    var pages = Math.max(1, Math.ceil(matched.length / size));
    page = Math.min(Math.max(page, 0), pages - 1);
    shown.forEach(function (c) { c.hidden = true; });
    shown = matched.slice(page * size, (page + 1) * size);
    shown.forEach(function (c) { c.hidden = false; });
    info.textContent = matched.length ? "page " + (page + 1) + " of " + pages + " (" + matched.length + " of " +
      cards.length + " shown by the filter)" : "no card matches the filter";
    prev.disabled = page === 0;
    next.disabled = page >= pages - 1;
  }
  function filter() {
    var text = query.value.trim().toLowerCase(), mode = only.value;
    matched = cards.filter(function (c) {
      return (!text || c.getAttribute("data-key").indexOf(text) >= 0) &&
        (mode === "all" || c.getAttribute("data-" + mode) === "1");
    });
    page = 0;
    draw();
  }
  query.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(filter, 150); });
  only.addEventListener("change", filter);
  prev.addEventListener("click", function () { page -= 1; draw(); window.scrollTo(0, 0); });
  next.addEventListener("click", function () { page += 1; draw(); window.scrollTo(0, 0); });
  draw();
  root.setAttribute("data-ready", "1");
})();
"""
