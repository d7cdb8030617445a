"use strict";
// Renders the requests inlined in #traces-data; ?session=<id> shows one session only (the
// server keeps those: <id> is the digest shown here or the session id the client sent).
(function () {
  const data = JSON.parse(document.getElementById("traces-data").textContent);
  const session = new URLSearchParams(location.search).get("session") || "";
  document.getElementById("session").value = session;
  const shown = data.requests;
  const tbody = document.querySelector("#requests tbody");

  function cell(row, text, className) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : String(text);
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }

  function ms(value) {
    return typeof value === "number" ? value.toFixed(2) : "";
  }

  function describe(span) {
    const parts = [span.name, ms(span.duration_ms) + " ms"];
    for (const [key, value] of Object.entries(span.attributes || {})) {
      parts.push(key.replace("toksplice.", "") + "=" + value);
    }
    for (const event of span.events || []) {
      parts.push(event.name + " at +" + ms(event.offset_ms) + " ms");
    }
    return parts.join(", ");
  }

  function waterfall(td, request) {
    const total = Math.max(request.duration_ms, 0.001);
    for (const span of request.spans) {
      const lane = document.createElement("div");
      lane.className = "lane";
      const bar = document.createElement("div");
      const slug = span.name.replace(/\s+/g, "-");
      bar.className = "bar span-" + slug;
      bar.dataset.span = span.name;
      bar.style.left = (100 * span.offset_ms) / total + "%";
      bar.style.width = (100 * span.duration_ms) / total + "%";
      bar.title = describe(span);
      const label = document.createElement("span");
      label.className = "label";
      label.textContent = span.name + " " + ms(span.duration_ms) + " ms";
      lane.appendChild(bar);
      lane.appendChild(label);
      td.appendChild(lane);
    }
  }

  for (const request of shown) {
    const row = document.createElement("tr");
    row.className = "request" + (request.outcome === "ok" ? "" : " error");
    row.dataset.route = request.route || "";
    row.dataset.session = request.session || "";
    row.dataset.api = request.api || "";
    cell(row, new Date(request.start_unix_ms).toISOString().slice(11, 23));
    cell(row, request.api);
    const link = document.createElement("a");
    link.href = "?session=" + encodeURIComponent(request.session || "");
    link.textContent = request.session;
    cell(row, "").appendChild(link);
    cell(row, request.route, "route");
    cell(row, request.prompt_tokens, "num prompt");
    const reused = request.reused_tokens || 0;
    const share = request.prompt_tokens ? Math.round((100 * reused) / request.prompt_tokens) : 0;
    cell(row, reused + " (" + share + "%)", "num reused");
    cell(row, ms(request.ttft_ms), "num");
    cell(row, ms(request.proxy_added_ms), "num");
    cell(row, ms(request.duration_ms), "num");
    waterfall(cell(row, "", "waterfall"), request);
    tbody.appendChild(row);
  }
  const refused = data.refused || [];
  const refusedBody = document.querySelector("#refused tbody");
  for (const entry of refused) {
    const row = document.createElement("tr");
    row.className = "refusal error";
    row.dataset.api = entry.api;
    row.dataset.status = String(entry.status);
    cell(row, new Date(entry.unix_ms).toISOString().slice(11, 23));
    cell(row, entry.api);
    cell(row, entry.status, "num status");
    cell(row, entry.reason, "reason");
    cell(row, entry.path);
    cell(row, entry.param);
    cell(row, entry.streaming ? "stream error event" : "HTTP status");
    refusedBody.appendChild(row);
  }
  document.getElementById("refused-summary").textContent =
    refused.length + " recent error answers (rejected requests and failed streams)";
  document.getElementById("summary").textContent =
    shown.length + " of " + data.total + " recent requests" +
    (session ? " in session " + session : "");
})();
