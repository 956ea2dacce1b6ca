"use strict";
// traj-report's page: figures, histograms (SVG drawn here from the bins traj-report
// computed) and the trajectory viewer. Data comes from the JSON block above; text is
// only ever set with textContent, never parsed as HTML.
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const $ = (id) => document.getElementById(id);
  const SVG = "http://www.w3.org/2000/svg";
  function el(tag, props, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === null || v === undefined) continue;
      if (k === "text") e.textContent = v;
      else if (k === "class") e.className = v;
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k) e.append(k);
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  const FMT = {
    int: (x) => String(Math.round(x)),
    num: (x) => x.toFixed(1),
    score: (x) => x.toFixed(3),
    pct: (x) => (x * 100).toFixed(1) + "%",
    usd: (x) => "$" + x.toFixed(4),
    secs: (x) => x.toFixed(1) + "s",
  };
  const show = (v, f) => (v === null || v === undefined ? "-" : FMT[f](v));
  function diff(v, f) {
    if (v.length < 2 || v[0] === null || v[1] === null) return ["-", ""];
    const d = v[1] - v[0];
    const sign = d > 0 ? "+" : "";
    const text = f === "pct" ? sign + (d * 100).toFixed(1) + " pp" : sign + show(d, f);
    return [text, d > 0 ? "up" : d < 0 ? "down" : ""];
  }
  const names = D.datasets.map((d) => d.name);
  const two = names.length === 2;

  // About.
  const about = $("about");
  D.datasets.forEach((d, i) => {
    const label = two ? (i === 0 ? "A: " : "B: ") : "";
    about.append(el("div", { text: label + d.inputs.join(", ") + " - " + d.overview.rows + " rows, " +
      d.viewable + " trajectories and failures, " + d.embedded + " embedded in this page" }));
    // The first line of each kind that was not shown as a trajectory, with its place.
    if (d.overview.first_bad) about.append(el("div", { class: "warn", text: label +
      d.overview.bad_lines + " bad lines skipped; the first: " + d.overview.first_bad }));
    if (d.overview.first_unreadable) about.append(el("div", { class: "warn", text: label +
      d.overview.unreadable + " rows whose turns are not readable as a trajectory (shown as written); the first: " +
      d.overview.first_unreadable }));
  });
  about.append(el("div", { text: "Embedded: the rows with the extremes (fewest and most tokens, most turns, " +
    "tool calls and tool errors, lowest and highest reward) and a reproducible sample of the others (seed " +
    D.meta.seed + ", --max-rows " + D.meta.max_rows + "); every row is counted in the overview. Tokens: " +
    D.meta.tokenizer + (D.meta.budget ? ", budget " + D.meta.budget : "") + "." }));

  // Figures, by group.
  const groups = new Map();
  for (const f of D.figures) {
    if (!groups.has(f.group)) groups.set(f.group, []);
    groups.get(f.group).push(f);
  }
  const figs = el("div", { class: "groups" });
  for (const [g, list] of groups) {
    const t = el("table", { class: "figs", "data-group": g });
    const head = el("tr", {}, el("th", { text: g }));
    if (names.length > 1) {
      names.forEach((n, i) => head.append(el("th", { text: two ? (i === 0 ? "A" : "B") : n, title: n })));
      if (two) head.append(el("th", { text: "B - A" }));
    }
    t.append(el("thead", {}, head));
    const body = el("tbody");
    for (const f of list) {
      const tr = el("tr", { "data-fig": f.id }, el("th", { text: f.label }));
      f.v.forEach((v, i) => tr.append(el("td", { class: "v", "data-d": i, "data-value": v === null ? "" : v, text: show(v, f.fmt) })));
      if (two) {
        const [text, cls] = diff(f.v, f.fmt);
        tr.append(el("td", { class: "diff " + cls, text }));
      }
      body.append(tr);
    }
    t.append(body);
    figs.append(el("div", { class: "group" }, t));
  }
  $("figures").append(figs);

  // Histograms.
  const PLOTS = [
    ["tokens", "Tokens per row", true],
    ["turns", "Turns per row"],
    ["tool_calls", "Tool calls per row"],
    ["reasoning_pct", "Reasoning coverage (% of a row's assistant turns)"],
    ["compression.before", "Tokens before compression"],
    ["compression.after", "Tokens after compression", true],
    ["run.duration_ms", "Time per prompt (ms)"],
    ["run.cost", "Cost per prompt ($)"],
    ["run.api_calls", "API calls per prompt"],
    ["rollouts.reward", "Reward"],
  ];
  const get = (o, path) => path.split(".").reduce((v, k) => (v ? v[k] : undefined), o);
  const num = (x, scale) => {
    const v = x / scale;
    return Math.abs(v) >= 1000 ? Math.round(v).toLocaleString("en") : String(+v.toFixed(4));
  };
  function histogram(d, budget) {
    const W = 330, H = 130, L = 34, B = 18;
    const s = svg("svg", { width: W, height: H + B + 6, viewBox: "0 0 " + W + " " + (H + B + 6), role: "img" });
    const bars = d.bins.concat(d.over > 0 ? [d.over] : []);
    const max = Math.max(1, ...bars);
    const bw = (W - L - 4) / bars.length;
    s.append(svg("text", { x: 2, y: 10 }, String(max)));
    s.append(svg("line", { x1: L - 2, y1: 2, x2: L - 2, y2: H, stroke: "#bbb" }));
    bars.forEach((c, i) => {
      const h = (c / max) * (H - 4);
      const over = i === d.bins.length;
      const lo = d.lo + i * d.w;
      const r = svg("rect", { x: L + i * bw, y: H - h, width: Math.max(1, bw - 1), height: h,
        fill: over ? "#999" : "var(--a)", "data-count": c });
      const label = over ? "> " + num(d.top, d.scale) : num(lo, d.scale) + " to " + num(lo + d.w, d.scale);
      r.append(svg("title", {}, label + ": " + c + " rows"));
      s.append(r);
    });
    s.append(svg("text", { x: L, y: H + 13 }, num(d.lo, d.scale)));
    s.append(svg("text", { x: W - 4, y: H + 13, "text-anchor": "end" },
      (d.over > 0 ? "> " : "") + num(d.lo + d.bins.length * d.w, d.scale)));
    if (budget) {
      const span = d.bins.length * d.w;
      const x = L + ((budget - d.lo) / span) * (d.bins.length * bw);
      if (budget >= d.lo && budget <= d.lo + span) {
        s.append(svg("line", { x1: x, y1: 0, x2: x, y2: H, stroke: "var(--bad)", "stroke-dasharray": "4 2", class: "budget" }));
        s.append(svg("text", { x: x + 3, y: 20, fill: "var(--bad)" }, "budget " + budget));
      } else {
        s.append(svg("text", { x: W - 4, y: 20, "text-anchor": "end", fill: "var(--bad)" }, "budget " + budget + (budget > d.lo ? " (right of the axis)" : " (left of the axis)")));
      }
    }
    return s;
  }
  const grid = $("plot-grid");
  for (const [key, title, withBudget] of PLOTS) {
    const ds = D.datasets.map((x) => get(x.overview, key));
    if (!ds.some((d) => d && d.n > 0)) continue;
    const box = el("div", { class: "plot", "data-plot": key }, el("h3", { text: title }));
    const pair = el("div", { class: "pair" });
    ds.forEach((d, i) => {
      const col = el("div", { "data-d": i, "data-n": d ? d.n : 0 });
      if (two) col.append(el("div", { class: "sub", text: i === 0 ? "A" : "B" }));
      if (d && d.n > 0) {
        col.append(el("div", { class: "sub", text: "n " + d.n + ", mean " + num(d.mean, d.scale) + ", p50 " +
          num(d.p50, d.scale) + ", p90 " + num(d.p90, d.scale) + ", p99 " + num(d.p99, d.scale) + ", max " + num(d.max, d.scale) }));
        col.append(histogram(d, withBudget ? D.meta.budget : null));
      } else col.append(el("div", { class: "sub", text: "none" }));
      pair.append(col);
    });
    box.append(pair);
    grid.append(box);
  }

  // Viewer.
  const rows = D.rows;
  for (const r of rows) {
    const parts = [r.at];
    const add = (x) => { if (typeof x === "string") parts.push(x); };
    add(r.sys);
    for (const t of r.t) {
      add(t.x); add(t.k);
      for (const c of t.c || []) { add(c.n); add(c.a); }
      for (const x of t.res || []) { add(x.n); add(x.x); }
    }
    r._text = parts.join("\n").toLowerCase();
  }
  function options(sel, label, values) {
    sel.append(el("option", { value: "", text: label }));
    for (const v of values) sel.append(el("option", { value: v, text: v }));
  }
  const uniq = (f) => [...new Set(rows.flatMap(f))].sort();
  options($("f-dataset"), "all datasets", two ? names : []);
  if (!two) $("f-dataset").hidden = true;
  options($("f-tool"), "any tool", uniq((r) => r.tools));
  options($("f-status"), "any status", uniq((r) => [r.status]));
  options($("f-class"), "any failure class / stop reason", uniq((r) => (r.class ? [r.class] : [])));
  const list = $("list");
  let selected = null;
  function matches(r) {
    const q = $("q").value.trim().toLowerCase();
    if (q && !r._text.includes(q)) return false;
    const ds = $("f-dataset").value;
    if (ds !== "" && names[r.d] !== ds) return false;
    const tool = $("f-tool").value;
    if (tool && !r.tools.includes(tool)) return false;
    const st = $("f-status").value;
    if (st && r.status !== st) return false;
    const cl = $("f-class").value;
    if (cl && r.class !== cl) return false;
    const tmin = $("f-tmin").value, tmax = $("f-tmax").value, rmin = $("f-rmin").value;
    if (tmin !== "" && r.tokens < +tmin) return false;
    if (tmax !== "" && r.tokens > +tmax) return false;
    if (rmin !== "" && !(r.reward !== null && r.reward >= +rmin)) return false;
    return true;
  }
  function refresh() {
    list.replaceChildren();
    let n = 0;
    for (const r of rows) {
      if (!matches(r)) continue;
      n++;
      const li = el("li", { "data-n": r.n, "data-d": r.d });
      li.append(el("div", {}, el("b", { text: (two ? (r.d === 0 ? "A" : "B") + " " : "") + "#" + r.n }),
        document.createTextNode(" " + r.tokens + " tokens, " + r.turns + " turns, " + r.calls + " calls" +
          (r.errors ? ", " + r.errors + " tool errors" : "") + (r.reward !== null ? ", reward " + r.reward : ""))));
      const tags = el("div", { class: "meta" });
      tags.append(el("span", { class: "tag " + r.status.replace(" ", "-"), text: r.status }));
      if (r.class) tags.append(el("span", { class: "tag", text: r.class }));
      if (r.sum_at !== null && r.sum_at !== undefined) tags.append(el("span", { class: "tag", text: "summary" }));
      for (const p of r.pick) if (p !== "sample") tags.append(el("span", { class: "tag", text: p }));
      tags.append(document.createTextNode(" " + r.at));
      li.append(tags);
      li.addEventListener("click", () => open(r, li));
      list.append(li);
    }
    $("shown").textContent = n + " of " + rows.length + " embedded shown";
  }
  function pre(text) { return el("pre", { text }); }
  function fold(cls, label, body) {
    const d = el("details", { class: cls }, el("summary", { text: label }));
    d.append(body);
    return d;
  }
  function turnView(t, i) {
    const box = el("div", { class: "turn " + t.r, "data-turn": i });
    if (t.r === "human") box.append(el("div", { class: "role", text: "user" }), pre(t.x));
    else if (t.r === "summary") {
      box.append(el("div", { class: "role", text: "context summary (written by traj-compress)" }), pre(t.x));
      if (t.rep) {
        const inner = el("div", { class: "replaced" });
        for (const x of t.rep.turns) inner.append(el("div", { class: "role", text: x.role }), pre(x.x));
        box.append(fold("rep", "replaced turns " + t.rep.from + " to " + (t.rep.to - 1) + " of the uncompressed row (" + t.rep.turns.length + " turns)", inner));
      }
    } else if (t.r === "gpt") {
      box.append(el("div", { class: "role", text: "assistant" }));
      if (t.k) box.append(fold("think", "reasoning (" + (t.kn ?? t.k.length) + " chars)", pre(t.k)));
      if (t.x) box.append(pre(t.x));
      for (const c of t.c) box.append(el("div", { class: "call" }, el("b", { text: c.n }), pre(c.a)));
    } else if (t.r === "tool") {
      box.append(el("div", { class: "role", text: "tool results" }));
      for (const x of t.res) {
        box.append(fold("res " + (x.ok ? "ok" : "err"), x.n + " - " + x.b + " bytes" + (x.ok ? "" : " - failed"), pre(x.x)));
      }
    } else if (t.r === "error") box.append(el("div", { class: "role", text: "failure" }), pre(t.x));
    else box.append(el("div", { class: "role", text: t.role }), pre(t.x));
    return box;
  }
  function open(r, li) {
    if (selected) selected.classList.remove("sel");
    selected = li;
    li.classList.add("sel");
    const conv = $("conv");
    conv.replaceChildren();
    const facts = [r.at, r.tokens + " tokens", r.turns + " turns", r.calls + " tool calls", r.errors + " tool errors", r.status];
    if (r.class) facts.push(r.class);
    if (r.reward !== null) facts.push("reward " + r.reward);
    if (r.comp) facts.push("compressed " + r.comp.before + " -> " + r.comp.after + " tokens" + (r.comp.still_over ? " (still over: " + (r.comp.reason || "?") + ")" : ""));
    facts.push("embedded as: " + r.pick.join(", "));
    conv.append(el("h3", { text: (two ? names[r.d] + " " : "") + "#" + r.n }), el("div", { class: "facts", text: facts.join(" - ") }));
    if (r.unreadable) conv.append(el("div", { class: "turn error", text: "turns shown as written: " + r.unreadable }));
    if (r.sys) conv.append(fold("sys", "system prompt (" + (r.sysn ?? r.sys.length) + " chars)", pre(r.sys)));
    r.t.forEach((t, i) => conv.append(turnView(t, i)));
  }
  for (const id of ["q", "f-tmin", "f-tmax", "f-rmin"]) $(id).addEventListener("input", refresh);
  for (const id of ["f-dataset", "f-tool", "f-status", "f-class"]) $(id).addEventListener("change", refresh);
  refresh();
  document.body.setAttribute("data-ready", "1");
})();
