"use strict";
// agenttrace report.html: the run browser. Trace text only ever reaches the page as text
// nodes (createTextNode / textContent): never as markup, never in a URL or a selector.
(function () {
  var PAGE = 100;
  var SEVERITIES = ["critical", "high", "medium", "low"];
  var UNSAFE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

  function byId(id) { return document.getElementById(id); }
  function safe(s) { return s === null || s === undefined ? "" : String(s).replace(UNSAFE, "\ufffd"); }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.appendChild(document.createTextNode(safe(text)));
    return node;
  }
  function add(parent) {
    for (var i = 1; i < arguments.length; i++) {
      var c = arguments[i];
      if (c === null || c === undefined) continue;
      parent.appendChild(typeof c === "object" ? c : document.createTextNode(safe(c)));
    }
    return parent;
  }
  function clip(s, n) { s = safe(s); return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  function usd(v) {
    if (v === null || v === undefined) return "\u2014";
    if (Math.abs(v) >= 1) return "$" + v.toFixed(2);
    if (v === 0) return "$0";
    var d = Math.min(12, Math.max(2, 2 - Math.floor(Math.log10(Math.abs(v)))));
    return "$" + v.toFixed(d);
  }
  function num(v) { return v === null || v === undefined ? "\u2014" : String(v); }
  function ms(v) {
    if (v === null || v === undefined) return "\u2014";
    return v >= 1000 ? (v / 1000).toFixed(2) + " s" : v.toFixed(v >= 10 ? 0 : 1) + " ms";
  }

  async function decode(id) {
    var text = byId(id).textContent.trim();
    var bin = atob(text);
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return JSON.parse(await new Response(stream).text());
  }

  var D, R, N, order, shown, page = 0, sortKey = "rank", sortDir = 1, applied = 0;
  var chunks = {};
  var status = byId("ab-status");

  function statusOf(i) {
    if (R.findings[i] > 0) return "findings";
    if (R.label[i] === 0) return "labels wrong";
    if (!R.answered[i]) return "no answer";
    return "ok";
  }
  function failed(i) { return R.findings[i] > 0 || R.label[i] === 0 || !R.answered[i]; }

  function option(select, value, label) {
    var o = el("option", null, label);
    o.value = value;
    select.appendChild(o);
  }
  function fillSelect(id, values, label) {
    var s = byId(id);
    option(s, "", label);
    for (var i = 0; i < values.length; i++) option(s, String(i), values[i] === null ? "(none)" : values[i]);
  }

  function init(data) {
    D = data; R = data.runs; N = R.id.length;
    R.label = R.label || new Array(N).fill(null);
    fillSelect("ab-rule", D.rules, "any rule");
    fillSelect("ab-sev", D.severities, "any severity");
    fillSelect("ab-kind", D.kinds, "any kind");
    fillSelect("ab-agent", D.agents, "any agent");
    fillSelect("ab-model", D.models, "any model");
    fillSelect("ab-temp", D.temperatures.map(function (t) { return t === null ? null : String(t); }), "any temperature");
    var timer = null;
    byId("ab-q").addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(apply, 120);
    });
    ["ab-rule", "ab-sev", "ab-kind", "ab-agent", "ab-model", "ab-temp", "ab-fail"].forEach(function (id) {
      byId(id).addEventListener("change", apply);
    });
    var heads = document.querySelectorAll("#ab-runs th[data-key]");
    for (var i = 0; i < heads.length; i++) heads[i].addEventListener("click", onSort);
    byId("ab-prev").addEventListener("click", function () { if (page > 0) { page--; draw(); } });
    byId("ab-next").addEventListener("click", function () {
      if ((page + 1) * PAGE < shown.length) { page++; draw(); }
    });
    byId("ab-controls").hidden = false;
    byId("ab-table").hidden = false;
    order = D.order;  // worst first, as the static sections rank them
    apply();
  }

  // the text each run is searched by: built on the first search, not when the page opens
  function haystack() {
    if (R.hay) return R.hay;
    var hay = new Array(N);
    for (var i = 0; i < N; i++) {
      var parts = [R.id[i], R.case[i] || "", R.agent[i] === null ? "" : D.agents[R.agent[i]], R.answer[i] || ""];
      var ms_ = R.models[i];
      for (var j = 0; j < ms_.length; j++) parts.push(D.models[ms_[j]]);
      var f = R.found[i];
      if (f) for (j = 0; j < f.length; j++) parts.push(D.rules[f[j][0]], D.kinds[f[j][2]]);
      hay[i] = parts.join("\u0001").toLowerCase();
    }
    R.hay = hay;
    return hay;
  }

  function keyOf(k) {
    switch (k) {
      case "rank": return R.rank;
      case "run": return R.id;
      case "case": return R.case;
      case "agent": return R.agent.map(function (a) { return a === null ? null : D.agents[a]; });
      case "model": return R.models.map(function (m) { return m.length ? D.models[m[0]] : null; });
      case "temp": return R.temp;
      case "status": return R.id.map(function (_, i) { return statusOf(i); });
      default: return R[k];
    }
  }
  function sortRuns() {
    var key = keyOf(sortKey), dir = sortDir, ids = R.id;
    var arr = Array.prototype.slice.call(order);
    arr.sort(function (a, b) {
      var x = key[a], y = key[b];
      if (x === null || x === undefined) { if (!(y === null || y === undefined)) return 1; }
      else if (y === null || y === undefined) return -1;
      else if (x < y) return -dir;
      else if (x > y) return dir;
      return ids[a] < ids[b] ? -1 : ids[a] > ids[b] ? 1 : 0;
    });
    order = arr;
  }
  function onSort(ev) {
    var k = ev.currentTarget.getAttribute("data-key");
    if (k === sortKey) sortDir = -sortDir; else { sortKey = k; sortDir = 1; }
    var heads = document.querySelectorAll("#ab-runs th[data-key]");
    for (var i = 0; i < heads.length; i++) {
      var h = heads[i], mark = h.querySelector(".ab-dir");
      mark.textContent = h.getAttribute("data-key") === sortKey ? (sortDir > 0 ? " \u25b2" : " \u25bc") : "";
    }
    sortRuns();
    apply();
  }

  function sel(id) { var v = byId(id).value; return v === "" ? -1 : Number(v); }
  function apply() {
    var q = byId("ab-q").value.trim().toLowerCase();
    var rule = sel("ab-rule"), sev = sel("ab-sev"), kind = sel("ab-kind");
    var agent = sel("ab-agent"), model = sel("ab-model"), temp = sel("ab-temp");
    var onlyFailed = byId("ab-fail").checked;
    var tval = temp >= 0 ? D.temperatures[temp] : undefined;
    var byFinding = rule >= 0 || sev >= 0 || kind >= 0;
    var hay = q ? haystack() : null;
    var out = [];
    for (var n = 0; n < order.length; n++) {
      var i = order[n];
      if (onlyFailed && !failed(i)) continue;
      if (agent >= 0 && R.agent[i] !== agent) continue;
      if (model >= 0 && R.models[i].indexOf(model) < 0) continue;
      if (temp >= 0 && R.temp[i] !== tval) continue;
      if (byFinding) {
        var f = R.found[i], hit = false;
        if (f) for (var j = 0; j < f.length; j++) {
          if ((rule < 0 || f[j][0] === rule) && (sev < 0 || f[j][1] === sev) && (kind < 0 || f[j][2] === kind)) { hit = true; break; }
        }
        if (!hit) continue;
      }
      if (q && hay[i].indexOf(q) < 0) continue;
      out.push(i);
    }
    shown = out;
    page = 0;
    draw();
    // how many times the list was filtered: lets a test or a benchmark wait for the result
    byId("ab-table").setAttribute("data-applied", String(++applied));
  }

  function cell(tr, text, cls) { tr.appendChild(el("td", cls, text)); }
  function draw() {
    var body = byId("ab-body");
    var rows = document.createDocumentFragment();
    var end = Math.min(shown.length, (page + 1) * PAGE);
    for (var n = page * PAGE; n < end; n++) {
      var i = shown[n];
      var tr = el("tr", "ab-row");
      tr.setAttribute("data-i", String(i));
      var open = el("button", "ab-open mono", clip(R.id[i], 40));
      open.type = "button";
      open.title = "open this run";
      var td = el("td");
      td.appendChild(open);
      tr.appendChild(td);
      cell(tr, clip(R.case[i], 40));
      cell(tr, R.agent[i] === null ? "\u2014" : clip(D.agents[R.agent[i]], 30));
      cell(tr, clip(R.models[i].map(function (m) { return D.models[m]; }).join(", "), 50));
      cell(tr, R.temp[i] === null ? "\u2014" : String(R.temp[i]));
      var st = statusOf(i);
      cell(tr, st, "ab-st-" + st.replace(" ", "-"));
      cell(tr, num(R.findings[i]), "num");
      cell(tr, num(R.score[i]), "num");
      cell(tr, usd(R.cost[i]), "num");
      cell(tr, R.duration[i] === null ? "\u2014" : R.duration[i].toFixed(2) + " s", "num");
      rows.appendChild(tr);
    }
    body.textContent = "";
    body.appendChild(rows);
    var btns = body.querySelectorAll("button.ab-open");
    for (var b = 0; b < btns.length; b++) btns[b].addEventListener("click", onOpen);
    byId("ab-count").textContent = shown.length === 0 ? "no run matches" :
      "runs " + (page * PAGE + 1) + "\u2013" + end + " of " + shown.length + " matching (" + N + " in all)";
    byId("ab-prev").disabled = page === 0;
    byId("ab-next").disabled = end >= shown.length;
  }

  function onOpen(ev) {
    var i = Number(ev.currentTarget.parentNode.parentNode.getAttribute("data-i"));
    openRun(i).catch(function (e) { byId("ab-run").textContent = "could not open the run: " + e; });
  }

  // a run's steps come as one array per field: back into one object per step
  function rowsOf(cols) {
    if (!cols || Array.isArray(cols)) return cols;
    var keys = Object.keys(cols), n = keys.length ? cols[keys[0]].length : 0, out = new Array(n);
    for (var i = 0; i < n; i++) {
      var o = {};
      for (var k = 0; k < keys.length; k++) o[keys[k]] = cols[keys[k]][i];
      out[i] = o;
    }
    return out;
  }

  async function detailOf(i) {
    var c = R.chunk[i];
    if (c < 0) return null;
    if (!chunks[c]) {
      var rows = await decode("ab-detail-" + c), map = new Map();
      for (var k = 0; k < rows.length; k++) map.set(rows[k].run_id, rows[k]);
      chunks[c] = map;
    }
    var det = chunks[c].get(R.id[i]) || null;
    if (det) det.steps = rowsOf(det.steps);
    return det;
  }

  function dl(pairs) {
    var d = el("dl", "run");
    for (var i = 0; i < pairs.length; i++) add(d, el("dt", null, pairs[i][0]), el("dd", pairs[i][2] || null, pairs[i][1]));
    return d;
  }
  function table(cls, heads) {
    var t = el("table", cls), tr = el("tr");
    for (var i = 0; i < heads.length; i++) tr.appendChild(el("th", null, heads[i]));
    add(t, add(el("thead"), tr));
    var body = el("tbody");
    t.appendChild(body);
    return [t, body];
  }
  function pre(label, text) {
    var d = el("details", "ab-text");
    add(d, el("summary", null, label + " (" + safe(text).length + " characters)"), el("pre", null, text));
    return d;
  }

  // a model call's prompt: its messages, positions in the run's distinct messages (`M`)
  function promptOf(M, ids) {
    var d = el("details", "ab-text ab-prompt");
    add(d, el("summary", null, "Prompt: " + ids.length + (ids.length === 1 ? " message" : " messages")));
    ids.forEach(function (m) {
      var head = el("div", "ab-msg");
      add(head, el("span", "ab-role", M.role[m] === null ? "(no role)" : M.role[m]));
      if (M.call[m] !== null) add(head, " ", el("span", "muted mono", "tool call " + safe(M.call[m])));
      if (M.name[m] !== null) add(head, " ", el("span", "muted", M.name[m]));
      d.appendChild(head);
      d.appendChild(el("pre", null, M.content[m] === null ? "(no content)" : M.content[m]));
    });
    return d;
  }

  async function openRun(i) {
    var box = byId("ab-run");
    box.textContent = "";
    var det = await detailOf(i);
    var h = el("h3", null, "Run ");
    add(h, el("span", "mono", R.id[i]));
    box.appendChild(h);
    var close = el("button", null, "close");
    close.type = "button";
    close.addEventListener("click", function () { box.textContent = ""; box.hidden = true; });
    box.appendChild(close);
    box.hidden = false;
    var models = R.models[i].map(function (m) { return D.models[m]; }).join(", ");
    box.appendChild(dl([
      ["Case", R.case[i] === null ? "\u2014" : R.case[i]],
      ["Agent", R.agent[i] === null ? "\u2014" : D.agents[R.agent[i]]],
      ["Models", models || "\u2014"],
      ["Temperature", R.temp[i] === null ? "\u2014" : String(R.temp[i])],
      ["Status", statusOf(i)],
      ["Score", num(R.score[i])],
      ["Findings", num(R.findings[i])],
      ["Cost", usd(R.cost[i])],
      ["Duration", R.duration[i] === null ? "\u2014" : R.duration[i].toFixed(3) + " s"],
      ["Calls", num(R.model_calls[i]) + " model, " + num(R.tool_calls[i]) + " tool"],
      ["Answer", !R.answered[i] ? "no answer" : det && det.answer !== null ? det.answer :
        R.answer[i] !== null ? R.answer[i] : "(answered; its text was not recorded)", "ab-answer"],
    ]));
    if (!det) {
      box.appendChild(el("p", "muted", D.notes.no_detail));
      box.scrollIntoView();
      return;
    }
    var rows = {};
    if (det.labels && det.labels.length) {
      box.appendChild(el("h4", null, "Golden label fields: expected against answered"));
      var lt = table("ab-labels", ["Field", "Critical", "Verdict", "Expected", "Answered"]);
      det.labels.forEach(function (l) {
        var tr = el("tr", l.status === "correct" ? "ab-label-correct" : "ab-label-wrong");
        add(tr, el("td", null, l.field), el("td", null, l.critical ? "critical" : ""), el("td", null, l.status),
          el("td", "mono", l.expected === null ? "(none)" : l.expected), el("td", "mono", l.actual === null ? "(missing)" : l.actual));
        lt[1].appendChild(tr);
      });
      box.appendChild(lt[0]);
    }
    if (det.findings && det.findings.length) {
      box.appendChild(el("h4", null, "Findings"));
      var ft = table("ab-findings", ["Severity", "Rule", "Kind", "Tool", "Argument", "Detail", "Evidence (click: show the step)"]);
      det.findings.forEach(function (f) {
        var tr = el("tr");
        add(tr, el("td", "sev-" + (SEVERITIES.indexOf(f.severity) >= 0 ? f.severity : "low"), f.severity), el("td", null, f.rule), el("td", null, f.kind),
          el("td", null, f.tool === null ? "\u2014" : f.tool), el("td", null, f.argument === null ? "\u2014" : f.argument), el("td", null, f.detail));
        var ev = el("td");
        (f.spans || []).forEach(function (sid) {
          var b = el("button", "ab-span mono", sid);
          b.type = "button";
          b.addEventListener("click", function () { highlight(rows, sid); });
          ev.appendChild(b);
        });
        tr.appendChild(ev);
        ft[1].appendChild(tr);
      });
      box.appendChild(ft[0]);
    }
    if (!det.steps) {
      box.appendChild(el("p", "muted", D.notes.no_steps));
    } else {
      trajectory(box, det, rows);
    }
    box.scrollIntoView();
  }

  function highlight(rows, sid) {
    var prev = document.querySelectorAll("#ab-run tr.hl");
    for (var i = 0; i < prev.length; i++) prev[i].classList.remove("hl");
    var row = Object.prototype.hasOwnProperty.call(rows, sid) ? rows[sid] : null;
    var note = byId("ab-hl-note");
    if (!row) { if (note) note.textContent = "span " + safe(sid) + " is not a step of this run (an agent span, or not recorded)"; return; }
    if (note) note.textContent = "";
    row.classList.add("hl");
    if (row.nextSibling && row.nextSibling.classList.contains("ab-more")) {
      row.nextSibling.hidden = false;
      row.nextSibling.classList.add("hl");
    }
    row.scrollIntoView({ block: "center" });
  }

  function trajectory(box, det, rows) {
    var steps = det.steps, total = det.span_ms || 0;
    var cited = {};
    (det.findings || []).forEach(function (f) { (f.spans || []).forEach(function (s) { cited[s] = true; }); });
    // the span tree: a step's parent is the step whose span is its parent span, else the run
    var bySpan = {}, kids = {}, roots = [];
    steps.forEach(function (s) { if (s.span !== null) bySpan[s.span] = s; });
    steps.forEach(function (s) {
      var p = s.parent;
      if (p !== null && p !== s.span && Object.prototype.hasOwnProperty.call(bySpan, p)) (kids[p] = kids[p] || []).push(s);
      else roots.push(s);
    });
    var flat = [];
    (function walk(list, depth, seen) {
      list.forEach(function (s) {
        flat.push([s, depth]);
        if (s.span !== null && kids[s.span] && !seen[s.span]) { seen[s.span] = true; walk(kids[s.span], depth + 1, seen); }
      });
    })(roots, 0, {});
    var h = el("h4", null, "Trajectory: span tree and timeline");
    box.appendChild(h);
    box.appendChild(el("p", "muted", steps.length + " steps over " + ms(total) +
      (det.steps_cut ? "; the first " + steps.length + " of " + det.steps_cut + " shown" : "") +
      ". Click a step for its prompt messages, full arguments, result or output; \u2691 marks the steps a finding cites."));
    box.appendChild(el("p", "ab-note", null)).id = "ab-hl-note";
    var t = table("ab-steps", ["#", "Step", "Status", "Start", "Duration", "Timeline", "Tokens in / out", "Cost"]);
    flat.forEach(function (pair) {
      var s = pair[0], depth = pair[1];
      var tr = el("tr", "ab-step" + (cited[s.span] ? " cited" : ""));
      tr.appendChild(el("td", "num", String(s.index)));
      var name = el("td", "ab-name");
      name.style.paddingLeft = (4 + 16 * depth) + "px";
      add(name, el("span", "ab-kind ab-" + s.kind, s.kind === "model_call" ? "model" : "tool"), " ",
        el("span", null, s.name === null ? "(unnamed)" : s.name));
      if (cited[s.span]) add(name, " ", el("span", "ab-flag", "\u2691"));
      tr.appendChild(name);
      var st = s.status || "";
      if (s.error) st += " (" + s.error + ")";
      if (s.executed === false) st += " no span";
      tr.appendChild(el("td", s.status === "error" ? "sev-high" : null, st));
      tr.appendChild(el("td", "num", s.start === null ? "\u2014" : "+" + ms(s.start)));
      tr.appendChild(el("td", "num", ms(s.dur)));
      var lane = el("td", "ab-lane"), bar = el("div", "ab-bar ab-" + s.kind);
      if (s.start !== null && total > 0) {
        bar.style.marginLeft = (100 * s.start / total).toFixed(2) + "%";
        bar.style.width = Math.max(0.4, 100 * (s.dur || 0) / total).toFixed(2) + "%";
      }
      lane.appendChild(bar);
      tr.appendChild(lane);
      tr.appendChild(el("td", "num", s.kind === "model_call" ? num(s.in_tokens) + " / " + num(s.out_tokens) : ""));
      tr.appendChild(el("td", "num", s.kind === "model_call" ? usd(s.cost) : ""));
      var more = el("tr", "ab-more");
      more.hidden = true;
      var td = el("td");
      td.colSpan = 8;
      add(td, el("div", "muted mono", "span " + safe(s.span) + (s.parent ? ", parent " + safe(s.parent) : "")));
      if (s.prompt && s.prompt.length && det.messages) td.appendChild(promptOf(det.messages, s.prompt));
      if (s.requested && s.requested.length) {
        s.requested.forEach(function (c) { td.appendChild(pre("Requests " + safe(c.name), c.arguments === null || c.arguments === undefined ? "" : c.arguments)); });
      }
      if (s.arguments !== null && s.arguments !== undefined) td.appendChild(pre("Arguments", s.arguments));
      if (s.result !== null && s.result !== undefined) td.appendChild(pre(s.kind === "tool_call" ? "Result" : "Output", s.result));
      var opened = td.querySelectorAll("details.ab-text");
      for (var k = 0; k < opened.length; k++) opened[k].open = true;
      more.appendChild(td);
      tr.addEventListener("click", function () { more.hidden = !more.hidden; });
      if (s.span !== null && !Object.prototype.hasOwnProperty.call(rows, s.span)) rows[s.span] = tr;
      t[1].appendChild(tr);
      t[1].appendChild(more);
    });
    box.appendChild(t[0]);
  }

  decode("ab-index").then(function (data) {
    status.textContent = data.notes.scope;
    init(data);
    document.documentElement.setAttribute("data-browser", "ready");
  }).catch(function (e) {
    status.textContent = "The run browser could not load: " + e;
  });
})();
