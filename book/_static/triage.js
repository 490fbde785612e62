/* The triage box: reads a pasted PyTorch error in the browser, no server.
 *
 * It reads by window.TRIAGE_RULES (triage_rules.js, written by
 * `python -m tools.triage` from chapter 6's `message-rules` cell and the
 * pinned torch's derivatives.yaml), the very table chapter 6's read_message
 * reads by: readMessage below follows read_message step by step. */
(function () {
  "use strict";
  var R = window.TRIAGE_RULES;

  function numbers(text) {              // chapter 6's _numbers
    return String(text).split(",").map(function (p) { return p.trim(); })
      .filter(function (p) { return p; })
      .map(function (p) { return /^-?\d+$/.test(p) ? parseInt(p, 10) : p; });
  }

  function shapeChanges(got, expected) { // chapter 6's shape_changes
    var out = [], n, d;
    if (got.length === expected.length) {
      for (d = 0; d < got.length; d++)
        if (got[d] !== expected[d]) out.push([d, expected[d], got[d]]);
      return out;
    }
    n = Math.max(got.length, expected.length);
    function pad(s) { var p = []; while (p.length < n - s.length) p.push(null); return p.concat(s); }
    var g = pad(got), e = pad(expected);
    for (d = 0; d < n; d++) if (g[d] !== e[d]) out.push([d - n, e[d], g[d]]);
    return out;
  }

  function readMessage(text) {          // chapter 6's read_message
    try {
      text = String(text).replace(new RegExp(R.space, "g"), " ")
        .replace(/^ +| +$/g, "").slice(-200000);
      for (var r = 0; r < R.message_rules.length; r++) {
        var rule = R.message_rules[r];
        var match = new RegExp(rule.pattern, "i").exec(text);
        if (!match) continue;
        var fields = {};
        rule.groups.forEach(function (name, i) { fields[name] = match[i + 1]; });
        rule.shapes.forEach(function (k) { fields[k] = numbers(fields[k]); });
        rule.ints.forEach(function (k) { fields[k] = parseInt(fields[k], 10); });
        var cause = rule.cause;
        if (rule.kind === "shape" && "node" in fields) {
          for (var n = 0; n < R.node_rules.length; n++)
            if (new RegExp(R.node_rules[n].pattern).test(fields.node)) {
              cause = R.node_rules[n].cause; break;
            }
        }
        return {kind: rule.kind, autograd: rule.autograd, fields: fields, cause: cause};
      }
    } catch (error) {
      return {kind: "unknown", autograd: false, fields: {"reader error": String(error)}, cause: "unknown"};
    }
    return {kind: "unknown", autograd: false, fields: {}, cause: "unknown"};
  }

  /* Which forward operation made a node, and which of its inputs edge
   * `index` is, from derivatives.yaml. Names of torch < 1.10 had no number. */
  function nodeInput(node, index) {
    var names = [node], found = null, key, lower = node.toLowerCase();
    if (!/\d$/.test(node)) names.push(node + "0");
    for (var i = 0; i < names.length && !found; i++)
      if (Object.prototype.hasOwnProperty.call(R.nodes, names[i])) found = names[i];
    if (!found) for (key in R.nodes)
      if (key.toLowerCase() === lower) { found = key; break; }
    if (!found) return null;
    var op = R.nodes[found][0], inputs = R.nodes[found][1], input = null;
    if (index !== undefined && index !== null) {
      if (inputs.length === 1 && inputs[0][1]) input = inputs[0][0] + "[" + index + "]";
      else if (!inputs.some(function (x) { return x[1]; }) && index < inputs.length)
        input = inputs[index][0];
    }
    return {name: found, op: op, input: input};
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    for (var a in attrs || {}) node.setAttribute(a, attrs[a]);
    (children || []).forEach(function (c) {
      node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }

  function show(value) {
    return Array.isArray(value) ? "[" + value.join(", ") + "]" : String(value);
  }

  function describe(reading) {
    var f = reading.fields, rows = [], cause = R.causes[reading.cause];
    if (reading.kind === "unknown") {
      return [el("p", {"class": "triage-verdict", "data-kind": "unknown"},
        ["Not an autograd validation message: none of the engine's checks (shape, dtype, "
         + "layout, device, number of gradients) and none of the known forward errors "
         + "reads from this text. Paste the line that starts with RuntimeError."])];
    }
    rows.push(["kind", reading.kind + (reading.autograd ? " (a check of the backward pass)" : " (not the backward's check)")]);
    if ("node" in f && f.node) {
      rows.push(["node", f.node]);
      var info = nodeInput(f.node, f.index);
      rows.push(["made by", info ? "torch." + info.op + (info.name !== f.node ? " (as " + info.name + " in torch " + R.torch + ")" : "")
        : "no entry in torch " + R.torch + "'s derivatives.yaml: a custom autograd.Function, a node written in C++, or an older torch's node"]);
      if ("index" in f) rows.push(["index", f.index + (info && info.input ? ": the input " + info.input : "")]);
    } else if ("index" in f) rows.push(["index", String(f.index)]);
    if (reading.kind === "shape" || reading.kind === "gradient argument") {
      rows.push(["got", show(f.got)]);
      rows.push(["expected", show(f.expected)]);
      shapeChanges(f.got, f.expected).forEach(function (c) {
        var dim = c[0], was = c[1], now = c[2], what;
        if (now === null) what = "missing in got";
        else if (was === null) what = "only in got: summed away if the rest fits";
        else if (typeof was === "number" && typeof now === "number")
          what = now < was ? (was - now) + " fewer (smaller: a cut)" : (now - was) + " more (larger)";
        else what = "changed";
        rows.push(["dim " + dim, "expected " + (was === null ? "none" : was) + ", got " + (now === null ? "none" : now) + ": " + what]);
      });
    } else {
      ["expected", "got", "tensor", "weight", "input", "dim"].forEach(function (k) {
        if (k in f) rows.push([k, show(f[k])]);
      });
    }
    var table = el("table", {"class": "triage-table"}, [el("tbody", {}, rows.map(function (r) {
      return el("tr", {"data-row": r[0]}, [el("th", {scope: "row"}, [r[0]]), el("td", {}, [r[1]])]);
    }))]);
    var verdict = el("p", {"class": "triage-verdict", "data-kind": reading.kind, "data-cause": reading.cause},
      [el("strong", {}, ["Most likely: "]), cause.text + "."]);
    var out = [table, verdict];
    if (cause.href) out.push(el("p", {"class": "triage-link"}, ["Explained, with the fix: ",
      el("a", {href: cause.href}, [cause.section])]));
    return out;
  }

  function run() {
    var box = document.getElementById("triage-input"), answer = document.getElementById("triage-answer");
    if (!box || !answer) return;
    var reading = readMessage(box.value);
    answer.innerHTML = "";
    if (!box.value.trim()) {
      answer.appendChild(el("p", {}, ["Paste an error above."]));
      return;
    }
    describe(reading).forEach(function (n) { answer.appendChild(n); });
  }

  window.triage = {readMessage: readMessage, nodeInput: nodeInput, shapeChanges: shapeChanges, run: run};
  function start() {
    var box = document.getElementById("triage-input");
    if (!box) return;
    box.addEventListener("input", run);
    var button = document.getElementById("triage-read");
    if (button) button.addEventListener("click", run);
    run();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
