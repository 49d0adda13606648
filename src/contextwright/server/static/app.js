// contextwright inspector: a page over the HTTP API, no build step. Every number shown comes from
// the API (assemble result and its trace); this file only lays them out. DOM is built with
// textContent, never innerHTML, so record text cannot inject markup.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { result: null, trace: null, project: "", agent: "" };
const HINT = 0.7;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "style") node.setAttribute("style", v);
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("#apikey").value.trim();
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

async function api(method, path, body) {
  const res = await fetch(path, {
    method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) {
    const where = data.field ? ` [${data.field}]` : "";
    throw new Error(`${res.status} ${data.title || "error"}${where}: ${data.detail || res.statusText}`);
  }
  return data;
}

function showError(err) {
  const box = $("#error");
  if (!err) { box.hidden = true; box.textContent = ""; return; }
  box.hidden = false;
  box.textContent = err.message || String(err);
}

// A failed assemble or open leaves the last window on screen: it is greyed and labelled stale
// (body[data-stale]) until a request succeeds, so that it is never taken for the answer.
function markStale(stale) {
  if (stale) document.body.dataset.stale = "1";
  else delete document.body.dataset.stale;
  $("#stale-note").hidden = !stale;
}

async function run(fn, { window = false } = {}) {
  showError(null);
  try {
    await fn();
    if (window) markStale(false);
  } catch (err) {
    showError(err);
    if (window && state.trace) markStale(true);
  }
}

// Local time to the millisecond: two traces made in the same second must not look the same.
function fmtTime(ts) {
  const d = new Date(ts * 1000);
  const p = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ` +
    `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

const P = () => encodeURIComponent($("#project").value.trim());

// -- pickers ---------------------------------------------------------------------------------

async function loadProjects() {
  const data = await api("GET", "/v1/projects");
  $("#projects").replaceChildren(...data.projects.map((p) => el("option", { value: p })));
  if (!$("#project").value && data.projects.length) $("#project").value = data.projects[0];
}

async function loadAgents() {
  if (!P()) return;
  const data = await api("GET", `/v1/projects/${P()}/agents`);
  $("#agents").replaceChildren(
    ...data.agents.map((a) => el("option", { value: a.id, label: `${a.id} (${a.role})` })));
}

// -- window view -----------------------------------------------------------------------------

function renderGauge(result) {
  const b = result.breakdown;
  const frac = b.available ? b.tokens / b.available : 0;
  $("#gauge").hidden = false;
  $("#gauge-text").textContent =
    `${b.tokens} / ${b.available} tokens (${(frac * 100).toFixed(1)}%) · window ${b.window}, reserve ${b.reserve}`;
  const fill = $("#gauge-fill");
  fill.style.width = Math.min(100, frac * 100).toFixed(1) + "%";
  fill.className = frac >= HINT ? "hot" : "";
  $("#gauge-hint").textContent = frac >= HINT
    ? `Over ${HINT * 100}% of the window: compact the session before the next call.`
    : `Below the ${HINT * 100}% compaction hint.`;
}

async function renderSessionGauge() {
  const box = $("#session-gauge");
  box.replaceChildren();
  const session = $("#session").value.trim();
  if (!session) return;
  try {
    const g = await api("GET",
      `/v1/projects/${P()}/sessions/${encodeURIComponent(session)}/gauge?agent=${encodeURIComponent(state.agent)}` + ($("#budget").value.trim() ? `&budget=${encodeURIComponent($("#budget").value.trim())}` : ""));
    box.append(el("div", { class: "gauge-head" }, el("strong", {}, "Session " + session), " ",
      `${g.used} / ${g.limit} tokens (${(g.fraction * 100).toFixed(1)}%) · history ${(g.history_fraction * 100).toFixed(0)}% of ${g.history_available}`,
      " ", g.compaction_hint
        ? el("span", { class: "badge dropped", id: "compact-hint" }, `over ${HINT * 100}%: compact the session`)
        : el("span", { class: "badge kept" }, `below the ${HINT * 100}% hint`)));
    const barBox = el("div", { class: "bar" }, el("div", { class: "fill" + (g.compaction_hint ? " hot" : ""), style: `width:${Math.min(100, g.fraction * 100).toFixed(1)}%` }), el("div", { class: "mark" }));
    box.append(barBox);
  } catch (err) {
    box.append(el("p", { class: "muted" }, "Session gauge unavailable: " + err.message));
  }
}

function renderSections(result) {
  const box = $("#sections");
  box.replaceChildren();
  const names = Object.keys(result.breakdown.sections);
  for (const name of names) {
    const items = result.sections[name] || [];
    const tokens = result.breakdown.sections[name] || 0;
    if (!items.length) continue;
    const pct = result.available ? (100 * tokens / result.available).toFixed(1) : "0";
    const list = el("ol", { class: "items" }, items.map((it) =>
      el("li", { "data-key": it.key, class: "clickable", title: "open its record, score and reasons", onclick: () => run(() => openDetail(it.key)) },
        el("div", { class: "item-head" },
          el("span", { class: "tok" }, `${it.tokens} tok`),
          el("span", { class: "badge" }, it.kind),
          it.author ? el("span", { class: "muted" }, it.author) : null,
          it.day ? el("span", { class: "muted" }, `under ${it.day}`) : null,
          el("span", { class: "muted" }, `via ${it.sources.join(", ")} · score ${it.score}`),
          it.truncated ? el("span", { class: "badge truncated" }, it.omitted_tokens ? `truncated −${it.omitted_tokens}` : "truncated") : null,
          result.stored ? el("span", { class: "muted" }, "(preview)") : null),
        el("pre", {}, it.text),
        el("div", { class: "reasons" }, it.reasons.join(" · ")))));
    box.append(el("details", { class: "section", open: true, "data-section": name },
      el("summary", {}, el("strong", {}, name), ` ${tokens} tokens · ${items.length} items · ${pct}% of available`),
      list));
  }
  const warn = $("#warnings");
  warn.replaceChildren(...result.warnings.map((w) => el("p", { class: "warning" }, "⚠ " + w)));
}

// -- items, sources --------------------------------------------------------------------------

function components(obj) {
  return Object.entries(obj || {}).map(([k, v]) => `${k}=${v}`).join(" ");
}

function renderItems() {
  const trace = state.trace;
  if (!trace) return;
  const want = document.querySelector("input[name=decision]:checked").value;
  const rows = trace.items.filter((i) => want === "all" || i.decision === want);
  $("#items-count").textContent = `${rows.length} of ${trace.items.length} candidates`;
  $("#items tbody").replaceChildren(...rows.map((i) =>
    el("tr", { class: i.decision + " clickable", "data-key": i.key, onclick: () => run(() => openDetail(i.key)) },
      el("td", {}, el("span", { class: "badge " + i.decision }, i.decision)),
      el("td", {}, i.section), el("td", {}, i.sources.join(", ")), el("td", {}, i.kind),
      el("td", { class: "num" }, i.tokens), el("td", { class: "num" }, i.score),
      el("td", { class: "mono" }, components(i.components)),
      el("td", {}, i.reason), el("td", { class: "preview" }, i.preview))));
}

function bar(ms, max) {
  const w = max > 0 ? Math.max(1, (100 * ms) / max) : 0;
  return el("div", { class: "hbar" }, el("div", { style: `width:${w.toFixed(1)}%` }));
}

// Which definition produced a source's candidates (docs/pipelines.md): its digest, and where a
// definition other than the packaged one came from.
function pipelineCell(t, name) {
  const p = (t.notes || {}).pipelines;
  const digest = p && p.sources ? p.sources[name] : undefined;
  if (!digest) return el("td", {});
  const defined = (p.defined || {})[name];
  const from = defined ? defined.file : (p.from === "request" ? "this call's" : "default");
  return el("td", { class: "muted", title: JSON.stringify(defined || {}) }, `${from} · ${digest}`);
}

function renderSources() {
  const t = state.trace;
  if (!t) return;
  $("#latency").textContent = `Total ${t.latency_ms.toFixed(2)} ms · trace ${t.id}`;
  const max = Math.max(...t.sources.map((s) => s.ms), 0.001);
  $("#sources tbody").replaceChildren(...t.sources.map((s) =>
    el("tr", { "data-source": s.name }, el("td", {}, s.name), el("td", { class: "num" }, s.ms.toFixed(2)),
      el("td", {}, bar(s.ms, max)), el("td", { class: "num" }, s.candidates),
      el("td", {}, s.cache), el("td", { class: "error" }, s.error || ""), pipelineCell(t, s.name))));
  const steps = Object.entries(t.timings_ms || {});
  const tmax = Math.max(...steps.map(([, v]) => v), 0.001);
  $("#timings tbody").replaceChildren(...steps.map(([k, v]) =>
    el("tr", {}, el("td", {}, k), el("td", { class: "num" }, v.toFixed(2)), el("td", {}, bar(v, tmax)))));
}

// -- compare and replay ----------------------------------------------------------------------

function renderDiff(box, d) {
  box.replaceChildren();
  box.append(el("p", { class: "summary" },
    `tokens ${d.tokens.before} → ${d.tokens.after} (${d.tokens.delta >= 0 ? "+" : ""}${d.tokens.delta}) · ` +
    `available ${d.available.before} → ${d.available.after} · ` +
    `${d.kept_only_in_a} kept only in A · ${d.kept_only_in_b} kept only in B`));
  const req = Object.entries(d.request);
  if (req.length) {
    box.append(el("h3", {}, "Request changes"), el("ul", { class: "req" }, req.map(([k, v]) =>
      el("li", {}, el("code", {}, k), ": ", JSON.stringify(v.before), " → ", JSON.stringify(v.after)))));
  }
  const secs = Object.entries(d.sections);
  if (secs.length) {
    box.append(el("h3", {}, "Tokens per section"), el("ul", {}, secs.map(([k, v]) =>
      el("li", {}, `${k}: ${v.before} → ${v.after}`))));
  }
  box.append(el("h3", {}, `What changed (${d.changes.length} items)`));
  if (!d.changes.length) { box.append(el("p", { class: "muted" }, "Every item met the same fate.")); return; }
  box.append(el("table", { class: "diff" },
    el("thead", {}, el("tr", {}, ["item", "section", "before", "after", "why before", "why after", "tokens"].map((h) => el("th", {}, h)))),
    el("tbody", {}, d.changes.map((c) => el("tr", {},
      el("td", { class: "preview" }, c.preview || c.key), el("td", {}, c.section),
      el("td", {}, el("span", { class: "badge " + c.before }, c.before)),
      el("td", {}, el("span", { class: "badge " + c.after }, c.after)),
      el("td", {}, c.reason_before), el("td", {}, c.reason_after),
      el("td", { class: "num" }, `${c.tokens_before} → ${c.tokens_after}`))))));
}

async function loadTraces() {
  if (!P()) return;
  const agent = $("#agent").value.trim();
  const q = agent ? `?agent=${encodeURIComponent(agent)}&limit=50` : "?limit=50";
  const data = await api("GET", `/v1/projects/${P()}/traces${q}`);
  const opts = () => data.traces.map((t) => el("option", { value: t.id },
    `${fmtTime(t.created_at)} · ${t.agent} · ${t.task ? t.task.slice(0, 60) : "(no task)"} · ${t.tokens}/${t.available}`));
  $("#trace-a").replaceChildren(...opts());
  $("#trace-b").replaceChildren(...opts());
  $("#trace-open").replaceChildren(...opts());
  if (data.traces.length > 1) $("#trace-a").selectedIndex = 1;
}

async function compare() {
  const a = $("#trace-a").value, b = $("#trace-b").value;
  if (!a || !b) throw new Error("assemble at least twice, then pick two traces");
  renderDiff($("#compare-out"), await api("GET", `/v1/projects/${P()}/traces/${a}/diff/${b}`));
}

async function replay() {
  if (!state.trace) throw new Error("assemble first: a replay starts from a stored assembly");
  const body = { budget: Number($("#replay-budget").value) };
  const rules = $("#replay-rules").value.trim();
  if (rules) {
    try { body.rules = JSON.parse(rules); } catch (e) { throw new Error("rules: not JSON: " + e.message); }
  }
  const pipelines = $("#replay-pipelines").value.trim();
  if (pipelines) {
    try { body.pipelines = JSON.parse(pipelines); } catch (e) { throw new Error("pipelines: not JSON: " + e.message); }
  }
  const out = await api("POST", `/v1/projects/${P()}/traces/${state.trace.id}/replay`, body);
  renderDiff($("#replay-out"), out.diff);
}

// -- records ---------------------------------------------------------------------------------

async function browse() {
  const q = new URLSearchParams();
  const pairs = [["agent", "#rf-agent"], ["kind", "#rf-kind"], ["author", "#rf-author"], ["tag", "#rf-tag"],
    ["session", "#rf-session"], ["status", "#rf-status"], ["limit", "#rf-limit"]];
  for (const [k, sel] of pairs) { const v = $(sel).value.trim(); if (v) q.set(k, v); }
  const data = await api("GET", `/v1/projects/${P()}/records?${q}`);
  $("#records tbody").replaceChildren(...data.records.map((r) => el("tr", { class: r.visibility + " clickable", "data-id": r.id, onclick: () => showRecords(`Record ${r.id}`, [], [r]) },
    el("td", {}, new Date(r.created_at * 1000).toLocaleString()), el("td", { class: "mono" }, r.id),
    el("td", {}, r.author), el("td", {}, r.kind), el("td", {}, r.visibility), el("td", {}, r.to.join(", ")),
    el("td", {}, r.tags.join(", ")), el("td", {}, r.status || ""), el("td", { class: "num" }, r.tokens),
    el("td", { class: "preview" }, r.content))));
  if (!data.records.length) $("#records tbody").append(el("tr", {}, el("td", { colSpan: 10, class: "muted" }, "no records match")));
}

// -- wiring ----------------------------------------------------------------------------------

async function assemble() {
  state.project = $("#project").value.trim();
  state.agent = $("#agent").value.trim();
  const body = { agent: state.agent, task: $("#task").value, format: $("#format").value };
  const budget = $("#budget").value.trim();
  if (budget) body.budget = Number(budget);
  const session = $("#session").value.trim();
  if (session) body.session = session;
  const result = await api("POST", `/v1/projects/${P()}/assemble?trace=true`, body);
  state.result = result;
  state.trace = result.trace;
  showTrace(result, `Assembled just now: trace ${result.trace_id} · ${result.format}`);
  await renderSessionGauge();
  await loadTraces();
}

// -- one window on screen: a fresh assembly, or a stored trace ---------------------------------

function showTrace(result, source) {
  markStale(false);
  $("#replay-of").textContent = result.trace_id;
  $("#window-source").textContent = source;
  renderGauge(result);
  renderSections(result);
  renderItems();
  renderSources();
  renderPayload();
  document.body.dataset.trace = result.trace_id;
}

// A stored trace keeps each candidate's fate, score, reasons and the first 160 characters of
// its text, not the rendered window: its kept items are shown as the window, by section.
function traceAsResult(t) {
  const sections = {};
  for (const i of t.items) {
    if (i.decision === "dropped") continue;
    (sections[i.section] ||= []).push({ ...i, text: i.preview, truncated: i.decision === "truncated", day: null });
  }
  const b = t.budget || {};
  return {
    stored: true, trace_id: t.id, format: (t.request || {}).format, sections, tokens: t.tokens,
    available: b.available, warnings: t.warnings || [], payload: null,
    breakdown: { sections: t.sections, tokens: t.tokens, available: b.available, window: b.window, reserve: b.reserve },
  };
}

async function openTrace() {
  const id = $("#trace-open").value;
  if (!id) throw new Error("no stored trace to open: assemble first, or press Refresh traces");
  const t = await api("GET", `/v1/projects/${P()}/traces/${encodeURIComponent(id)}`);
  state.trace = t;
  state.result = null;
  state.agent = t.agent;
  const task = (t.request || {}).task;
  showTrace(traceAsResult(t),
    `Stored trace ${t.id} · ${t.agent} · ${fmtTime(t.created_at)} · ${task ? "task: " + task : "no task"} · item texts are the trace's previews`);
  $("#session-gauge").replaceChildren();
}

// -- payload ---------------------------------------------------------------------------------

function payloadText(payload) {
  return typeof payload === "string" ? payload : JSON.stringify(payload, null, 2);
}

const SHAPE = { openai: "the messages list", anthropic: "system and messages", markdown: "one text" };

function renderPayload() {
  const r = state.result;
  const box = $("#payload");
  $("#payload-recompute").hidden = true;
  if (r) {
    $("#payload-info").textContent =
      `Exactly what the model call would send (${r.format}: ${SHAPE[r.format]}), ${r.tokens} tokens · trace ${r.trace_id}`;
    box.textContent = payloadText(r.payload);
  } else if (state.trace) {
    $("#payload-info").textContent =
      `Trace ${state.trace.id} is stored without its payload. Recompute it: a replay of its request against the store as it is now.`;
    $("#payload-recompute").hidden = false;
    box.textContent = "";
  }
}

async function recomputePayload() {
  const t = state.trace;
  const out = await api("POST", `/v1/projects/${P()}/traces/${t.id}/replay`, {});
  $("#payload-info").textContent =
    `Recomputed by replay (trace ${out.trace_id}) of ${t.id}, ${out.format}: ${SHAPE[out.format]}, ${out.tokens} tokens`;
  $("#payload").textContent = payloadText(out.payload);
}

// -- an item's detail: its records, full score and reasons -----------------------------------

function kv(rows) {
  return el("table", { class: "kv" }, el("tbody", {}, rows.map(([k, v]) =>
    el("tr", {}, el("th", {}, k), el("td", {}, v)))));
}

async function openDetail(key) {
  const item = state.trace && state.trace.items.find((i) => i.key === key);
  if (!item) throw new Error(`item ${key} is not in the current trace`);
  const comps = Object.entries(item.components || {});
  const parts = [
    kv([
      ["decision", el("span", { class: "badge " + item.decision }, item.decision)],
      ["why", item.reason || ""],
      ["section", item.section], ["kind", item.kind], ["author", item.author || ""],
      ["sources", (item.sources || []).join(", ")], ["tokens", String(item.tokens)],
      ["score", String(item.score)],
    ]),
    el("h3", {}, "Score components"),
    comps.length
      ? el("table", { class: "components" }, el("tbody", {}, comps.map(([k, v]) =>
        el("tr", { "data-component": k }, el("td", { class: "mono" }, k), el("td", { class: "num" }, String(v))))))
      : el("p", { class: "muted" }, "none (an item the engine adds itself)"),
    el("h3", {}, "Reasons"),
    el("ul", { class: "reasons-list" }, (item.reasons || []).map((r) => el("li", {}, r))),
  ];
  const records = [];
  const agent = state.agent || $("#agent").value.trim();
  for (const id of item.record_ids || []) {
    records.push(await api("GET", `/v1/projects/${P()}/records/${encodeURIComponent(id)}?agent=${encodeURIComponent(agent)}`));
  }
  showRecords(`${item.kind} · ${item.decision}`, parts, records);
  $("#detail").dataset.key = key;
}

function showRecords(title, parts, records) {
  const body = $("#detail-body");
  body.replaceChildren(...parts);
  body.append(el("h3", {}, records.length ? `Record${records.length > 1 ? "s" : ""}` : "No record: the engine wrote this item"));
  for (const r of records) {
    body.append(el("div", { class: "record", "data-id": r.id },
      kv([
        ["id", el("code", {}, r.id)], ["created", fmtTime(r.created_at)], ["author", r.author],
        ["kind", r.kind], ["visibility", r.visibility], ["to", r.to.join(", ")],
        ["tags", r.tags.join(", ")], ["status", r.status || ""], ["session", r.session || ""],
        ["reply to", r.reply_to || ""], ["tokens", String(r.tokens)],
      ]),
      el("pre", { class: "content" }, r.content)));
  }
  $("#detail").dataset.key = "";
  $("#detail-title").textContent = title;
  if (!$("#detail").open) $("#detail").showModal();
}

function selectTab(name) {
  for (const b of document.querySelectorAll("#tabs button")) b.classList.toggle("active", b.dataset.tab === name);
  for (const s of document.querySelectorAll(".tab")) s.classList.toggle("active", s.id === "tab-" + name);
}

function init() {
  $("#apikey").value = localStorage.getItem("cw-key") || "";
  $("#apikey").addEventListener("change", () => { localStorage.setItem("cw-key", $("#apikey").value); run(async () => { await loadProjects(); await loadAgents(); }); });
  for (const b of document.querySelectorAll("#tabs button")) b.addEventListener("click", () => selectTab(b.dataset.tab));
  $("#ask").addEventListener("submit", (e) => { e.preventDefault(); run(assemble, { window: true }); });
  $("#open-trace").addEventListener("click", () => run(openTrace, { window: true }));
  $("#payload-recompute").addEventListener("click", () => run(recomputePayload));
  $("#detail-close").addEventListener("click", () => $("#detail").close());
  $("#project").addEventListener("change", () => run(loadAgents));
  for (const r of document.querySelectorAll("input[name=decision]")) r.addEventListener("change", renderItems);
  $("#compare").addEventListener("click", () => run(compare));
  $("#refresh-traces").addEventListener("click", () => run(loadTraces));
  $("#refresh-traces-window").addEventListener("click", () => run(loadTraces));
  $("#replay").addEventListener("click", () => run(replay));
  $("#record-filters").addEventListener("submit", (e) => { e.preventDefault(); run(browse); });
  const params = new URLSearchParams(location.search);
  for (const k of ["project", "agent", "task", "budget"]) if (params.get(k)) $("#" + k).value = params.get(k);
  run(async () => {
    await loadProjects();
    await loadAgents();
    // The stored-trace picker is filled at once when it can be; a key that may list no traces
    // is told so when it asks (Refresh traces), not before it has done anything.
    await loadTraces().catch(() => {});
    document.body.dataset.ready = "1";
  });
}

init();
