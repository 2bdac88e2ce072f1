"""The question explorer's style and script (`hoprag.compare.explorer`), inlined into explorer.html: plain CSS and
vanilla JavaScript, no library. The script reads the page's embedded JSON (`#data`), draws the filters that the
data has fields for, the list of matching questions and, for a clicked question, each run's answer, cost,
passages and drawn trace. Every text from the data goes in through `textContent`, never as HTML."""

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 1.5em 2em; color: #222; }
h1 { font-size: 1.4em; margin: 0.6em 0 0.2em; }
#summary { color: #555; margin: 0 0 0.6em; font-size: 0.9em; }
#filters { display: flex; flex-wrap: wrap; gap: 0.4em 1.2em; align-items: center; padding: 0.6em;
  background: #f5f5f7; border: 1px solid #ddd; border-radius: 6px; font-size: 0.9em; }
#filters label { white-space: nowrap; }
#filters input[type=search] { width: 18em; }
#count { font-weight: 600; }
main { display: grid; grid-template-columns: minmax(20em, 2fr) 3fr; gap: 1.2em; margin-top: 0.8em; }
#list table { border-collapse: collapse; width: 100%; font-size: 0.88em; }
#list th, #list td { border-bottom: 1px solid #e3e3e3; padding: 0.25em 0.4em; text-align: left; vertical-align: top; }
#list tbody tr { cursor: pointer; }
#list tbody tr:hover { background: #eef4ff; }
#list tbody tr.open { background: #dde9ff; }
#list td.mark { text-align: center; width: 1.6em; }
#list td.num { color: #666; text-align: right; }
details.read > summary { color: #555; cursor: pointer; margin: 0.3em 0; }
.right { color: #137333; font-weight: 700; }
.wrong { color: #b3261e; font-weight: 700; }
.none { color: #999; }
#legend { font-size: 0.85em; color: #444; margin: 0.3em 0; }
#detail { font-size: 0.92em; }
#detail h2 { font-size: 1.15em; margin: 0.2em 0; }
.meta { color: #555; margin: 0.2em 0; }
.run { border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 0.8em; margin: 0.7em 0; }
.run h3 { font-size: 1em; margin: 0.1em 0 0.4em; }
.answer { font-size: 1.02em; margin: 0.2em 0; }
.cost { border-collapse: collapse; font-size: 0.85em; margin: 0.3em 0; }
.cost td, .cost th { border: 1px solid #ddd; padding: 0.1em 0.4em; text-align: right; }
ol.passages { padding-left: 1.8em; margin: 0.3em 0; }
ol.passages li { margin: 0.2em 0; }
.gold { background: #fff4c2; }
.badge { display: inline-block; font-size: 0.78em; padding: 0 0.35em; border-radius: 3px; background: #e6e6ee;
  color: #333; margin-right: 0.3em; }
.badge.goldmark { background: #f2c200; color: #000; }
.ptext { color: #333; cursor: pointer; }
.ptext.cut::after { content: " [more]"; color: #1a5fb4; }
.tree ul { list-style: none; margin: 0; padding-left: 1.1em; border-left: 1px dotted #bbb; }
.tree li { margin: 0.15em 0; }
.tree summary { cursor: pointer; }
.tree .chosen > summary, .tree .chosen > .label { color: #137333; font-weight: 600; }
.tree .cutoff > summary, .tree .cutoff > .label { color: #888; text-decoration: line-through; }
.tree dl { margin: 0.1em 0 0.2em 1.2em; font-size: 0.88em; color: #444; display: grid;
  grid-template-columns: max-content 1fr; gap: 0 0.6em; }
.tree dt { font-weight: 600; }
.tree dd { margin: 0; white-space: pre-wrap; word-break: break-word; }
button.more { margin: 0.5em 0; }
"""

SCRIPT = r"""
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("data").textContent);
  const RUNS = DATA.runs, QS = DATA.questions, PAGE = 200;
  const state = { rule: DATA.rules.length ? 0 : -1, shown: PAGE, open: -1 };
  const letter = (i) => (i < 26 ? String.fromCharCode(65 + i) : "R" + (i + 1));
  const fmt = (n) => Number(n).toLocaleString("en-US");
  const runTitle = (r, i) => letter(i) + ": " + r.name + (r.method ? " (" + r.method + ")" : "");
  const asList = (v) => (Array.isArray(v) ? v : [v]);

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }

  // right (1), wrong (0) or no verdict (null: no record, retrieval only, or no score of the rule)
  function verdict(entry) {
    if (!entry || entry.g === 0 || state.rule < 0) return null;
    const rule = DATA.rules[state.rule], score = entry.s[rule.key];
    return score === undefined ? null : (score >= rule.at ? 1 : 0);
  }
  function mark(v) {
    if (v === 1) return el("span", { class: "right", text: "✓", title: "right" });
    if (v === 0) return el("span", { class: "wrong", text: "✗", title: "wrong" });
    return el("span", { class: "none", text: "–", title: "no verdict" });
  }

  // ---- filters: the search, each run's outcome, runs disagreeing, the plugged-in fields, the tags
  const F = { search: null, outcome: [], disagree: null, extra: [], tag: null };
  function select(id, options, onchange) {
    const s = el("select", { id });
    for (const [value, text] of options) s.append(el("option", { value, text }));
    s.addEventListener("change", onchange);
    return s;
  }
  function buildFilters() {
    const box = document.getElementById("filters");
    F.search = el("input", { type: "search", id: "search", placeholder: "search questions, ids, golds, answers" });
    F.search.addEventListener("input", refresh);
    box.append(el("label", {}, F.search));
    if (DATA.rules.length > 1) {
      const rules = DATA.rules.map((r, i) => [String(i), r.name]);
      const s = select("rule", rules, (e) => { state.rule = +e.target.value; refresh(); });
      box.append(el("label", { text: "right means " }, s));
    } else {
      box.append(el("span", { text: DATA.rules.length ? "right means " + DATA.rules[0].name : "no answer scores" }));
    }
    RUNS.forEach((run, i) => {
      const s = select("outcome-" + i, [["", "any"], ["1", "right"], ["0", "wrong"]], refresh);
      F.outcome.push(s);
      box.append(el("label", { title: run.name, text: letter(i) + " " }, s));
    });
    if (RUNS.length > 1) {
      F.disagree = el("input", { type: "checkbox", id: "disagree" });
      F.disagree.addEventListener("change", refresh);
      box.append(el("label", {}, F.disagree, " runs disagree"));
    }
    DATA.filters.forEach((f, j) => {
      const value = select("field-" + j, [["", "any"], ...f.values.map((v, k) => [String(k), String(v)])], refresh);
      const runs = RUNS.map((r, i) => [String(i), "in " + letter(i)]);
      const where = select("field-run-" + j, [["", "in any run"], ...runs], refresh);
      F.extra.push({ f, value, where });
      box.append(el("label", { text: f.key + " " }, value, " ", where));
    });
    if (DATA.tags.length) {
      F.tag = select("tag", [["", "any"], ...DATA.tags.map((t) => [t, t])], refresh);
      box.append(el("label", { text: "tag " }, F.tag));
    }
    box.append(el("span", { id: "count" }));
  }

  function haystack(q) {
    if (q._h === undefined) {
      const parts = [q.i, q.q, ...q.g, ...q.st, ...(q.tg || [])];
      q.r.forEach((e) => { if (e) parts.push(e.a); });
      q._h = parts.join("\n").toLowerCase();
    }
    return q._h;
  }
  function fieldHit(entry, key, want) {
    return !!entry && !!entry.x && key in entry.x && asList(entry.x[key]).some((x) => JSON.stringify(x) === want);
  }
  function matches(q) {
    const text = F.search.value.trim().toLowerCase();
    if (text && !text.split(/\s+/).every((w) => haystack(q).includes(w))) return false;
    const v = q.r.map(verdict);
    for (let i = 0; i < RUNS.length; i++) {
      const want = F.outcome[i].value;
      if (want !== "" && v[i] !== +want) return false;
    }
    if (F.disagree && F.disagree.checked) {
      const known = v.filter((x) => x !== null);
      if (!(known.includes(0) && known.includes(1))) return false;
    }
    for (const { f, value, where } of F.extra) {
      if (value.value === "") continue;
      const want = JSON.stringify(f.values[+value.value]);
      const runs = where.value === "" ? q.r : [q.r[+where.value]];
      if (!runs.some((e) => fieldHit(e, f.key, want))) return false;
    }
    if (F.tag && F.tag.value !== "" && !(q.tg || []).includes(F.tag.value)) return false;
    return true;
  }

  // ---- the list of matching questions, PAGE at a time
  function refresh() { state.shown = PAGE; drawList(); }
  function drawList() {
    const hits = [];
    QS.forEach((q, k) => { if (matches(q)) hits.push(k); });
    document.getElementById("count").textContent = fmt(hits.length) + " of " + fmt(QS.length) + " questions";
    const box = document.getElementById("list");
    box.replaceChildren(el("div", { id: "legend" }, ...RUNS.map((r, i) => el("div", { text: runTitle(r, i) }))));
    const head = el("tr", {}, el("th", { text: "#" }), el("th", { text: "question" }),
      ...RUNS.map((r, i) => el("th", { text: letter(i), title: r.name })));
    const body = el("tbody", { id: "rows" });
    for (const k of hits.slice(0, state.shown)) {
      const q = QS[k];
      const row = el("tr", { "data-k": String(k), class: k === state.open ? "open" : "" },
        el("td", { class: "num", text: String(k + 1), title: q.i }), el("td", { text: q.q }),
        ...q.r.map((e) => el("td", { class: "mark" }, mark(verdict(e)))));
      row.addEventListener("click", () => openQuestion(k));
      body.append(row);
    }
    box.append(el("table", {}, el("thead", {}, head), body));
    if (hits.length > state.shown) {
      const next = Math.min(PAGE, hits.length - state.shown);
      const more = el("button", { class: "more", text: "show " + fmt(next) + " more" });
      more.addEventListener("click", () => { state.shown += PAGE; drawList(); });
      box.append(more);
    }
  }

  // ---- one question: each run's answer, cost, passages and drawn trace
  function drawTree(n, depth) {
    const label = [];
    if (n.b) label.push(el("span", { class: "badge", text: n.b }));
    label.push(document.createTextNode(n.t));
    const dl = n.d ? el("dl", {}) : null;
    if (dl) for (const [k, v] of n.d) dl.append(el("dt", { text: k }), el("dd", { text: v }));
    const cls = (n.x ? "chosen " : "") + (n.n ? "cutoff" : "");
    if (!n.c) return el("li", { class: cls }, el("span", { class: "label" }, ...label), dl);
    const list = el("ul", {}, ...n.c.map((c) => drawTree(c, depth + 1)));
    const d = el("details", { class: cls }, el("summary", {}, ...label), dl, list);
    if (depth < 4) d.open = true;
    return el("li", {}, d);
  }
  function passageItem([pid, gold, hop, chainHop]) {
    const p = DATA.passages[pid] || [pid, "", 0];
    const short = p[1].length > 240 ? p[1].slice(0, 240) + "…" : p[1];
    const full = p[1] + (p[2] ? " … [" + fmt(p[2]) + " more characters not kept in this page]" : "");
    const text = el("span", { class: "ptext" + (full !== short ? " cut" : ""), text: short });
    if (full !== short) {
      text.addEventListener("click", () => {
        const open = text.textContent !== full;
        text.textContent = open ? full : short;
        text.classList.toggle("cut", !open);
      });
    }
    return el("li", { class: gold ? "gold" : "" },
      gold || chainHop ? el("span", { class: "badge goldmark", text: chainHop ? "gold hop " + chainHop : "gold",
        title: "a supporting passage" + (chainHop ? " of the gold chain's hop " + chainHop : "") }) : null,
      hop ? el("span", { class: "badge", text: hop }) : null,
      el("strong", { text: p[0] }), " ", text);
  }
  const COST = [["llm_calls", "LLM calls"], ["prompt_tokens", "prompt tokens"],
    ["completion_tokens", "completion tokens"], ["retrieval_calls", "retrievals"],
    ["passages_read", "passages read"], ["seconds", "seconds"]];
  function costTable(c) {
    const keys = COST.filter(([k]) => k in c);
    const stages = c.stages ? Object.entries(c.stages).map(([k, v]) => k + " " + v).join(", ") : "";
    const cell = (k) => (k === "seconds" && stages ? c[k] + " (" + stages + ")" : fmt(c[k]));
    return el("table", { class: "cost" },
      el("tr", {}, ...keys.map(([, n]) => el("th", { text: n }))),
      el("tr", {}, ...keys.map(([k]) => el("td", { text: cell(k) }))));
  }
  function runCard(run, i, e) {
    const card = el("section", { class: "run", "data-run": String(i) }, el("h3", { text: runTitle(run, i) }));
    if (!e) {
      card.append(el("p", { class: "none", text: "no record of this question in this run" }));
      return card;
    }
    card.append(el("p", { class: "answer" }, mark(verdict(e)), " ", el("strong", { text: e.a || "(empty answer)" }),
      e.f ? el("span", { class: "badge", text: "parse failed" }) : null));
    const scores = Object.entries(e.s).map(([k, s]) => k + " " + s).join(" · ");
    if (scores) card.append(el("p", { class: "meta", text: scores }));
    card.append(costTable(e.c));
    for (const [k, val] of Object.entries(e.x || {})) {
      card.append(el("p", { class: "meta" }, el("strong", { text: k + ": " }), asList(val).join(", ")));
    }
    for (const view of e.t) {
      const top = view.flat && view.root.c ? view.root.c : [view.root];  // a raw trace: its keys at the top
      const drawing = el("ul", {}, ...top.map((n) => drawTree(n, 0)));
      const d = el("details", { class: "tree" }, el("summary", { text: view.name }), drawing);
      d.open = !(view.name === "rest of the trace");  // the method's drawing open; the raw rest folded
      card.append(d);
    }
    const golds = e.p.filter((p) => p[1]).length;
    const read = el("summary", { text: e.p.length + " passages read, in order; " + golds + " gold" });
    const passages = el("details", { class: "read" }, read, el("ol", { class: "passages" }, ...e.p.map(passageItem)));
    passages.open = true;
    card.append(passages);
    return card;
  }
  function openQuestion(k) {
    state.open = k;
    for (const r of document.querySelectorAll("#rows tr")) r.classList.toggle("open", r.dataset.k === String(k));
    const q = QS[k], box = document.getElementById("detail");
    box.replaceChildren(el("h2", { text: q.q }), el("p", { class: "meta", text: "id " + q.i }),
      el("p", {}, el("strong", { text: "gold answers: " }), q.g.join(" | ") || "–"),
      el("p", {}, el("strong", { text: "supporting titles: " }), q.st.join(" | ") || "– (the data gives none)"));
    if (q.gh) {
      const hop = ([sub, answer, title]) => sub + " → " + answer + (title ? " (" + title + ")" : "");
      const steps = q.gh.map((h) => el("li", { text: hop(h) }));
      box.append(el("p", {}, el("strong", { text: "gold chain:" })), el("ol", { class: "chain" }, ...steps));
    }
    if (q.tg) box.append(el("p", {}, el("strong", { text: "tags: " }), q.tg.join(", ")));
    RUNS.forEach((run, i) => box.append(runCard(run, i, q.r[i])));
  }

  const summary = [fmt(QS.length) + " questions, " + RUNS.length + (RUNS.length === 1 ? " run" : " runs")];
  if (DATA.total > QS.length) {
    summary.push("the page keeps at most " + fmt(DATA.limit) + " questions: the first " + fmt(QS.length) +
      " of " + fmt(DATA.total));
  }
  if (DATA.stamp) summary.push(DATA.stamp);
  document.getElementById("summary").textContent = summary.join(" · ");
  buildFilters();
  drawList();
  const hint = "Click a question to see each run's answer, passages, cost and tree.";
  if (QS.length) document.getElementById("detail").append(el("p", { class: "meta", text: hint }));
})();
"""
