/* The triage box: reads a pasted PyTorch error in the browser, no server.
 *
 * It reads by window.TRIAGE_RULES (triage_rules.js, written by
 * `python -m tools.triage` from chapter 6's rules cells and the
 * pinned torch's derivatives.yaml), the very table chapter 6's read_message
 * reads by: readMessage below follows read_message step by step, and
 * tests/test_triage_browser.py holds the two to the same readings. */
(function () {
  "use strict";
  var R = window.TRIAGE_RULES;

  function toInt(text) {                // chapter 6's _int
    return /^-?[0-9]{1,15}$/.test(text) ? parseInt(text, 10) : text;
  }

  function numbers(text) {              // chapter 6's _numbers
    return String(text).split(/[, \t\n\r\f\v]+/).filter(function (p) { return p; }).map(toInt);
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

  function where(text) {                // chapter 6's _where
    var best = null, at = -1;
    R.where_rules.forEach(function (rule) {
      var re = new RegExp(rule.pattern, "gi"), m;
      while ((m = re.exec(text)) !== null) {
        if (m[0] === "") { re.lastIndex++; continue; }
        if (re.lastIndex > at) { best = rule.where; at = re.lastIndex; }
      }
    });
    return best;
  }

  function reading(kind, autograd, fields, cause, at, candidates, ask) {
    return {kind: kind, autograd: autograd, fields: fields, cause: cause,
            where: at === undefined ? null : at, candidates: candidates || [], ask: !!ask};
  }

  function readMessage(text) {          // chapter 6's read_message
    try {
      text = String(text).replace(new RegExp(R.dash, "g"), "-").replace(new RegExp(R.wrap, "g"), "")
        .replace(new RegExp(R.space, "g"), " ").replace(/^ +| +$/g, "").slice(-200000);
      for (var r = 0; r < R.message_rules.length; r++) {
        var rule = R.message_rules[r];
        var match = new RegExp(rule.pattern, "i").exec(text);
        if (!match) continue;
        var fields = {};
        rule.groups.forEach(function (name, i) { fields[name] = match[i + 1]; });
        rule.shapes.forEach(function (k) { fields[k] = numbers(fields[k]); });
        rule.ints.forEach(function (k) { fields[k] = toInt(fields[k]); });
        var at = where(text.slice(0, match.index)), decision = rule.cause, i;
        if (decision === "built-in") {
          for (i = 0; i < R.node_rules.length; i++)
            if (new RegExp(R.node_rules[i].pattern).test(fields.node)) {
              decision = R.node_rules[i].cause; break;
            }
        }
        for (i = 0; i < R.hint_rules.length; i++) {
          var hint = R.hint_rules[i];
          if (hint.kinds.indexOf(rule.kind) >= 0 && (!hint.node || new RegExp(hint.node).test(fields.node || ""))
              && new RegExp(hint.pattern, "i").test(text)) {
            decision = hint.cause; break;
          }
        }
        var ask = "where" in rule && at === null;
        var key = at === null ? "none" : at;      // "none": no frame was pasted
        if (rule.where && Object.prototype.hasOwnProperty.call(rule.where, key))
          decision = rule.where[key];
        if (typeof decision === "string")
          return reading(rule.kind, rule.autograd, fields, decision, at);
        return reading(rule.kind, rule.autograd, fields, "cannot tell", at,     // never the whole story
                       decision.concat(["other"]), ask);
      }
    } catch (error) {
      return reading("unknown", false, {"reader error": String(error)}, "unknown");
    }
    return reading("unknown", false, {}, "unknown");
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

  function change(c) {                  // one changed dimension, in a few words
    var dim = c[0], was = c[1], now = c[2], what;
    if (now === null) what = "missing in got";
    else if (was === null) what = "only in got: summed away if the rest fits";
    else if (typeof was === "number" && typeof now === "number")
      what = now < was ? (was - now) + " fewer (smaller: a cut?)" : (now - was) + " more (larger)";
    else what = "changed";
    return "dim " + dim + ": expected " + (was === null ? "none" : was) + ", got "
      + (now === null ? "none" : now) + ": " + what;
  }

  /* The changed dimensions in one line: a run of dimensions only one shape
   * has is one phrase, and past four phrases the rest are counted. */
  function changes(list) {
    var out = [], i = 0, j, c;
    function only(x) { return x[1] === null ? "only in got" : x[2] === null ? "missing in got" : null; }
    while (i < list.length) {
      c = list[i];
      j = i;
      while (only(c) && j + 1 < list.length && only(list[j + 1]) === only(c)
             && list[j + 1][0] === list[j][0] + 1) j++;
      if (j > i) {
        out.push("dims " + c[0] + " to " + list[j][0] + ": " + (only(c) === "only in got"
          ? "only in got: summed away if the rest fits" : "missing in got"));
        i = j + 1;
      } else { out.push(change(c)); i++; }
    }
    if (out.length > 4) out = out.slice(0, 4).concat(["and " + (out.length - 4) + " more"]);
    return out.join("; ");
  }

  function causeLink(key) {
    var cause = R.causes[key];
    return cause.href ? el("a", {href: cause.href}, [cause.section]) : null;
  }

  function describe(reading) {
    var f = reading.fields, rows = [];
    if (reading.kind === "unknown") {
      return [el("p", {"class": "triage-verdict", "data-kind": "unknown", "data-cause": "unknown"},
        ["Not a message this page reads: none of the engine's checks (shape, dtype, layout, "
         + "device, number of gradients) and none of the known forward, optimizer or hook "
         + "errors reads from this text. If you pasted only part of it, paste the whole "
         + "error. " + R.causes.unknown.text + "."])];
    }
    rows.push(["kind", reading.kind + (reading.autograd ? " (a check of the backward pass)" : " (not the backward's check)")]);
    if (reading.where) rows.push(["raised in", R.where[reading.where]]);
    if ("node" in f && f.node) {
      rows.push(["node", f.node]);
      var info = nodeInput(f.node, f.index);
      rows.push(["made by", info ? "torch." + info.op + (info.name !== f.node ? " (as " + info.name + " in torch " + R.torch + ")" : "")
        : "no entry in torch " + R.torch + "'s derivatives.yaml: a custom autograd.Function, a node written in C++, or a node that torch no longer has"]);
      if ("index" in f) rows.push(["index", f.index + (info && info.input ? ": the input " + info.input : "")]);
    } else if ("index" in f) rows.push(["index", String(f.index)]);
    ["got", "expected", "tensor", "weight", "input", "shape", "dim", "size", "groups", "hook"].forEach(function (k) {
      if (k in f) rows.push([k, show(f[k])]);
    });
    if (Array.isArray(f.got) && Array.isArray(f.expected)) {
      var changed = shapeChanges(f.got, f.expected);
      if (changed.length) rows.push(["changed", changes(changed)]);
    }
    var table = el("table", {"class": "triage-table"}, [el("tbody", {}, rows.map(function (r) {
      return el("tr", {"data-row": r[0]}, [el("th", {scope: "row"}, [r[0]]), el("td", {}, [r[1]])]);
    }))]);
    var out = [table];
    if (reading.cause !== "cannot tell") {
      out.push(el("p", {"class": "triage-verdict", "data-kind": reading.kind, "data-cause": reading.cause},
        [el("strong", {}, ["Most likely: "]), R.causes[reading.cause].text + "."]));
      var link = causeLink(reading.cause);
      if (link) out.push(el("p", {"class": "triage-link"}, ["Explained, with the fix: ", link]));
      return out;
    }
    var list = el("ol", {"class": "triage-candidates"}, reading.candidates.map(function (key) {
      var cause = R.causes[key], item = [el("span", {"class": "triage-cause", "data-cause": key}, [cause.text + "."])];
      if (cause.question) item.push(el("span", {"class": "triage-question"}, [" Check: " + cause.question]));
      var link = causeLink(key);
      if (link) item.push(" (", link, ")");
      return el("li", {}, item);
    }));
    out.push(el("div", {"class": "triage-verdict", "data-kind": reading.kind, "data-cause": "cannot tell",
                        "data-candidates": reading.candidates.join("|")},
      [el("p", {}, [el("strong", {}, ["The text alone cannot tell. "]),
                    "In order, most likely first, each with the one check that tells it apart:"]),
       list].concat(reading.ask ? [el("p", {"class": "triage-ask"},
        ["Paste the whole traceback, not only the last line: where the error was raised "
         + "(optimizer.step(), backward(), a forward pass, a hook, an EMA update) narrows "
         + "this list, and decides where one cause is left."])] : [])
      .concat([el("p", {"class": "triage-doctor"},
        ["Or let the doctor look at your objects: run %load_ext pruning_doctor in your "
         + "notebook (chapter 6 says how to install it), then run the failing cell again."])])));
    return out;
  }

  function run(event) {
    var box = document.getElementById("triage-input"), answer = document.getElementById("triage-answer");
    if (!box || !answer) return;
    var reading = readMessage(box.value);
    answer.innerHTML = "";
    if (!box.value.trim()) {
      answer.appendChild(el("p", {}, ["Paste an error above."]));
      return;
    }
    describe(reading).forEach(function (n) { answer.appendChild(n); });
    if (event && event.type === "click") {       // show the verdict (on a phone, below the box)
      var verdict = answer.querySelector(".triage-verdict");
      if (verdict && verdict.scrollIntoView)
        verdict.scrollIntoView({block: verdict.offsetHeight < window.innerHeight * 0.8 ? "center" : "start"});
    }
  }

  window.triage = {readMessage: readMessage, nodeInput: nodeInput, shapeChanges: shapeChanges, run: run,
                   readAll: function (texts) { return texts.map(readMessage); }};
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
