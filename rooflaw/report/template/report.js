// rooflaw report: draws the frontier, the problem, a sortable table and one point's detail from the embedded data.
// Data strings are written with textContent (never as HTML); SI units in the data, human units on the page.
"use strict";

const DATA = JSON.parse(document.getElementById("rooflaw-data").textContent);
const S = DATA.settings;
const LAT = S.latency_column;
const COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
const PLOT_CONFIG = { displaylogo: false, responsive: true };

// ---- formatting ------------------------------------------------------------------------------------------
function sig(x, n = 3) {  // n significant digits, trailing zeros after the point dropped
  const s = Number(x).toPrecision(n);
  if (s.includes("e")) return String(Number(s));
  return s.includes(".") ? s.replace(/\.?0+$/, "") : s;
}
function fmtTime(s) {
  if (s === null || s === undefined) return "n/a";
  if (s >= 1) return sig(s) + " s";
  if (s >= 1e-3) return sig(s * 1e3) + " ms";
  return sig(s * 1e6) + " µs";
}
function fmtUnit(x, unit) {
  if (x === null || x === undefined) return "n/a";
  const k = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]].find(([f]) => Math.abs(x) >= f);
  return k ? sig(x / k[0]) + " " + k[1] + unit : sig(x) + " " + unit;
}
function fmtValue(key, v) {
  if (v === null || v === undefined) return "n/a";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "number") return String(v);
  if (key.startsWith("tokens_per_s")) return sig(v, 4) + " tok/s";
  if (key.endsWith("_s")) return fmtTime(v);
  if (key.endsWith("_bytes") || key === "memory_capacity") return fmtUnit(v, "B");
  if (key.endsWith("_j") || key === "joules_per_token") return sig(v) + " J";
  if (key.startsWith("params")) return fmtUnit(v, "");
  if (key === "loss") return v.toFixed(4);
  return Number.isInteger(v) ? String(v) : sig(v, 4);
}
function el(tag, text, attrs = {}) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  return e;
}
function fillTable(table, rows) {  // rows: [label, text, field]
  table.replaceChildren();
  for (const [label, text, field] of rows) {
    const tr = el("tr");
    tr.append(el("th", label), el("td", text, field ? { "data-field": field } : {}));
    table.append(tr);
  }
}

// ---- the problem -----------------------------------------------------------------------------------------
function drawSettings() {
  document.getElementById("title").textContent = DATA.title;
  const s = DATA.summary;
  const parts = [`${s.frontier_size} frontier points`, `objectives ${DATA.settings.objectives.join(", ")}`];
  if (s.evaluated !== undefined) parts.unshift(`${s.evaluated.toLocaleString()} points evaluated, ${s.feasible.toLocaleString()} feasible`);
  if (s.trials !== undefined) parts.unshift(`${s.trials} trials (${s.sampler})`);
  document.getElementById("summary").textContent = parts.join(" · ");
  const budgets = Object.entries(S.budgets).map(([k, v]) => `${k} ≤ ${fmtValue(k === "latency" ? "x_s" : k === "energy" ? "x_j" : "x_bytes", v)}`);
  const J = S.joint;
  const rows = [
    ["device", `${S.device_name} (${S.device}), ${fmtUnit(S.memory_capacity_bytes, "B")}`],
    ["law", S.law], ["space", `${S.space} (${S.space_size.toLocaleString()} architectures)`],
    ["workload", `${J && J.batches.length > 1 ? "batches " + J.batches.join(", ") : "batch " + (J ? J.batches[0] : S.batch)}, `
      + `${S.input_tokens} prompt tokens, `
      + `${S.output_tokens} output tokens, ${S.attention} attention`],
    [J ? "precisions" : "precision", J ? J.precisions.join(", ") : S.precision]];
  if (J && J.systems.length) rows.push(["layouts", `${J.options.join("; ")} on ${J.systems.join(", ")}`]);
  fillTable(document.getElementById("settings"), rows.concat([
    ["latency that counts", S.phase],
    ["budgets", budgets.length ? budgets.join("; ") : "none"],
    ["cost model", `preset ${S.preset}, engine ${S.engine ?? "default"}`],
    ["frontier kind", DATA.kind],
  ]));
}

// ---- the frontier ----------------------------------------------------------------------------------------
function group(p) {
  if (DATA.kind === "single") return "frontier";
  return DATA.kind === "layouts" ? `${p.precision} · ${p.option}` : `${p.precision} · batch ${p.batch}`;
}
function archText(p) {
  const moe = p.experts > 1 ? `, E/K ${p.experts}/${p.top_k}` : "";
  return `l=${p.layers}, d=${p.d_model}, heads ${p.heads}, kv ${p.kv_heads}, ffn ${p.ffn}${moe}`;
}
function hoverText(p) {
  const lines = [`<b>point ${p.id}</b>: ${archText(p)}`, `loss ${p.loss.toFixed(4)}`,
    `${S.phase} latency ${fmtTime(p[LAT])}`, `memory ${fmtUnit(p.memory_bytes, "B")}`];
  if (p.energy_j !== undefined && p.energy_j !== null) lines.push(`energy ${sig(p.energy_j)} J`);
  if (p.precision !== undefined) lines.push(`${p.precision}, batch ${p.batch}, ${p.option}`);
  if (p.tokens_per_s !== undefined) lines.push(`${sig(p.tokens_per_s, 4)} tok/s`);
  return lines.join("<br>");
}
function drawFrontier() {
  const groups = new Map();
  for (const p of DATA.points) {
    const g = group(p);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(p);
  }
  const traces = [...groups.entries()].map(([name, pts], i) => ({
    type: "scatter", mode: DATA.kind === "single" ? "lines+markers" : "markers", name,
    x: pts.map(p => p[LAT] * 1e3), y: pts.map(p => p.loss), customdata: pts.map(p => p.id),
    text: pts.map(hoverText), hoverinfo: "text", marker: { size: 8, color: COLOURS[i % COLOURS.length] },
    line: { width: 1.2 },
  }));
  traces.push({ type: "scatter", mode: "markers", name: "selected", x: [], y: [], hoverinfo: "skip",
    marker: { size: 16, color: "rgba(0,0,0,0)", line: { color: "#000", width: 2 } } });
  const layout = {
    margin: { t: 10, r: 10, b: 50, l: 60 }, hovermode: "closest", showlegend: groups.size > 1,
    legend: { orientation: "h", y: -0.2 },
    xaxis: { type: "log", title: { text: `${S.phase} latency (ms)` } }, yaxis: { title: { text: "loss" } },
  };
  const div = document.getElementById("frontier-plot");
  Plotly.newPlot(div, traces, layout, PLOT_CONFIG);
  div.on("plotly_click", ev => { if (ev.points.length && ev.points[0].customdata !== undefined) select(ev.points[0].customdata); });
}

// ---- one point -------------------------------------------------------------------------------------------
const FIGURES = ["prefill_s", "decode_s", "ttft_s", "tpot_s", "total_s", "memory_bytes", "memory_per_device_bytes",
  "weight_bytes", "kv_cache_bytes", "activation_bytes", "energy_j", "joules_per_token", "params_total",
  "params_active", "tokens_per_s_per_user", "tokens_per_s_per_device", "comm_s_prefill", "comm_s_decode", "fits_in_memory", "fits"];
function drawDetail(p, d) {
  document.getElementById("detail-id").textContent = String(p.id);
  document.getElementById("detail-spec").textContent = p.spec;
  const arch = d ? d.architecture : p;
  fillTable(document.getElementById("detail-arch"), ["layers", "d_model", "heads", "kv_heads", "head_dim", "ffn",
    "experts", "top_k", "vocab", "tied"].filter(k => arch[k] !== undefined).map(k => [k, fmtValue(k, arch[k]), k]));
  const rows = [["loss", p.loss.toFixed(4), "loss"]];
  if (p.precision !== undefined) rows.push(["precision", p.precision, "precision"], ["batch", String(p.batch), "batch"], ["option", p.option, "option"]);
  const ev = d ? d.evaluate : p;
  for (const k of FIGURES) if (ev[k] !== undefined && typeof ev[k] !== "object") rows.push([k, fmtValue(k, ev[k]), k]);
  if (d && ev.tokens_per_s && typeof ev.tokens_per_s === "object") rows.push(["decode tok/s", sig(ev.tokens_per_s.decode, 4), "tokens_per_s_decode"]);
  fillTable(document.getElementById("detail-figures"), rows);
  drawBands(d ? d.bands : null);
  document.getElementById("detail-explain").textContent = d ? d.explain
    : `no detail was computed for this point (the report details the first ${DATA.details_shown} points; rooflaw report --details N)`;
  drawRoofline(d);
  drawBreakdown(d);
  drawMemory(d);
}
function drawBands(bands) {
  const box = document.getElementById("detail-bands");
  box.replaceChildren();
  if (!bands || !Object.keys(bands).length) return;
  const t = el("table", undefined, { id: "bands-table" });
  t.append(el("caption", "error bands of the cost model"));
  for (const [k, v] of Object.entries(bands)) {
    const text = Array.isArray(v) && v.length === 2 ? `${fmtValue(k, v[0])} – ${fmtValue(k, v[1])}` : JSON.stringify(v);
    const tr = el("tr");
    tr.append(el("th", k), el("td", text));
    t.append(tr);
  }
  box.append(t);
}
function hide(div) { Plotly.purge(div); div.style.display = "none"; }
function drawRoofline(d) {
  const div = document.getElementById("roofline-plot");
  document.getElementById("roofline-note").textContent = d && !d.roofline ? "This point runs under a multi-device "
    + "layout: its figures are per device (table above); the roofline and breakdown are drawn for single-device points." : "";
  if (!d || !d.roofline) { hide(div); return; }
  div.style.display = "";
  const r = d.roofline;
  const xs = r.points.map(q => q.intensity).concat(r.roofs.map(q => q.ridge));
  const xlo = Math.min(...xs) / 4, xhi = Math.max(...xs) * 4;
  const top = r.roofs.reduce((a, b) => (b.peak > a.peak ? b : a));
  const traces = [{ type: "scatter", mode: "lines", name: `memory ${fmtUnit(r.bandwidth, "B/s")}`,
    x: [xlo, top.ridge], y: [xlo * r.bandwidth, top.peak], line: { color: "#000" } }];
  r.roofs.forEach((roof, i) => traces.push({ type: "scatter", mode: "lines", name: `${roof.dtype} ${fmtUnit(roof.peak, "FLOP/s")}${roof.used ? "" : " (unused)"}`,
    x: [roof.ridge, xhi], y: [roof.peak, roof.peak], line: { color: COLOURS[(i + 2) % COLOURS.length], dash: roof.used ? "solid" : "dash" } }));
  for (const [phase, colour, symbol] of [["prefill", "#1f77b4", "circle"], ["decode", "#d62728", "square"]]) {
    const pts = r.points.filter(q => q.phase === phase);
    traces.push({ type: "scatter", mode: "markers", name: phase, x: pts.map(q => q.intensity), y: pts.map(q => q.flops_per_s),
      text: pts.map(q => `${phase}: ${q.ops.join(", ")}<br>${sig(q.intensity)} FLOP/B, ${fmtUnit(q.flops_per_s, "FLOP/s")}`),
      hoverinfo: "text", marker: { color: colour, symbol, size: 8 } });
  }
  Plotly.react(div, traces, { title: { text: "roofline (decode: one mean step)", font: { size: 13 }, x: 0, xanchor: "left" }, margin: { t: 30, r: 10, b: 45, l: 60 },
    xaxis: { type: "log", title: { text: "arithmetic intensity (FLOP/byte)" } }, yaxis: { type: "log", title: { text: "FLOP/s" } },
    legend: { font: { size: 10 }, orientation: "h", y: -0.18 } }, PLOT_CONFIG);
}
function drawBreakdown(d) {
  const div = document.getElementById("breakdown-plot");
  const ops = d && d.evaluate.ops ? d.evaluate.ops : null;
  if (!ops) { hide(div); return; }
  div.style.display = "";
  const traces = ["prefill", "decode"].map((phase, i) => {
    const rows = ops.filter(o => o.phase === phase);
    return { type: "bar", orientation: "h", name: phase, y: rows.map(o => o.name), x: rows.map(o => o.seconds * 1e3),
      hovertext: rows.map(o => `${phase} ${o.name}: ${fmtTime(o.seconds)} (${(o.share * 100).toFixed(0)}%), ${o.bound}`),
      hoverinfo: "text", textposition: "none", marker: { color: COLOURS[i] } };
  });
  Plotly.react(div, traces, { title: { text: "time per operator (decode: all steps)", font: { size: 13 }, x: 0, xanchor: "left" }, barmode: "group",
    margin: { t: 30, r: 10, b: 45, l: 110 }, xaxis: { title: { text: "ms" } }, yaxis: { automargin: true, autorange: "reversed" } },
    PLOT_CONFIG);
}
function drawMemory(d) {
  const div = document.getElementById("memory-plot");
  if (!d) { hide(div); return; }
  div.style.display = "";
  const ev = d.evaluate;
  const parts = ev.weight_bytes !== undefined
    ? [["weights", ev.weight_bytes], ["KV cache", ev.kv_cache_bytes], ["activations", ev.activation_bytes]]
    : [["weights per device", ev.weight_bytes_per_device], ["KV cache per device", ev.kv_cache_bytes_per_device],
      ["other per device", ev.memory_per_device_bytes - ev.weight_bytes_per_device - ev.kv_cache_bytes_per_device]];
  const traces = parts.map(([name, v], i) => ({ type: "bar", orientation: "h", name, y: ["memory"], x: [v / 1e9],
    hovertext: [`${name} ${fmtUnit(v, "B")}`], hoverinfo: "text", textposition: "none", marker: { color: COLOURS[i + 2] } }));
  const cap = S.memory_capacity_bytes / 1e9;
  Plotly.react(div, traces, { title: { text: `memory (GB) against the device's ${fmtUnit(S.memory_capacity_bytes, "B")}`, font: { size: 13 }, x: 0, xanchor: "left" },
    barmode: "stack", margin: { t: 30, r: 10, b: 35, l: 70 }, xaxis: { range: [0, cap * 1.05] },
    shapes: [{ type: "line", x0: cap, x1: cap, y0: -0.5, y1: 0.5, line: { color: "#000", dash: "dot" } }] }, PLOT_CONFIG);
}
let selectedId = null;
function select(id) {
  selectedId = id;
  const p = DATA.points[id];
  drawDetail(p, DATA.details[String(id)] || null);
  const div = document.getElementById("frontier-plot");
  Plotly.restyle(div, { x: [[p[LAT] * 1e3]], y: [[p.loss]] }, [div.data.length - 1]);
  for (const tr of document.querySelectorAll("#points-table tbody tr")) tr.classList.toggle("selected", tr.dataset.id === String(id));
}

// ---- the table -------------------------------------------------------------------------------------------
const TABLE_KEYS = ["id", "layers", "d_model", "heads", "kv_heads", "head_dim", "ffn", "experts", "top_k", "precision",
  "batch", "option", "loss", LAT, "memory_bytes", "energy_j", "params_total", "tokens_per_s", "trial"];
function drawTable() {
  const keys = [...new Set(TABLE_KEYS)].filter(k => DATA.points.length && DATA.points[0][k] !== undefined);
  const head = document.querySelector("#points-table thead");
  const body = document.querySelector("#points-table tbody");
  const tr = el("tr");
  let order = { key: LAT, dir: 1 };
  const rows = () => {
    const pts = [...DATA.points].sort((a, b) => {
      const x = a[order.key], y = b[order.key];
      return (x < y ? -1 : x > y ? 1 : 0) * order.dir || a.id - b.id;
    });
    body.replaceChildren(...pts.map(p => {
      const r = el("tr", undefined, { "data-id": String(p.id) });
      for (const k of keys) r.append(el("td", k === "id" ? String(p.id) : fmtValue(k, p[k])));
      if (p.id === selectedId) r.classList.add("selected");
      r.addEventListener("click", () => select(p.id));
      return r;
    }));
    for (const th of head.querySelectorAll("th")) th.className = th.dataset.key === order.key ? (order.dir > 0 ? "asc" : "desc") : "";
  };
  for (const k of keys) {
    const th = el("th", k, { "data-key": k });
    th.addEventListener("click", () => { order = { key: k, dir: order.key === k ? -order.dir : 1 }; rows(); });
    tr.append(th);
  }
  head.replaceChildren(tr);
  rows();
}

drawSettings();
drawFrontier();
drawTable();
if (DATA.points.length) {  // start on the lowest-loss point (the answer to "min loss s.t. the budgets")
  select(DATA.points.reduce((a, b) => (b.loss < a.loss ? b : a)).id);
}
