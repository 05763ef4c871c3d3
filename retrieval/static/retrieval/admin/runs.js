// The index run list: refresh the progress of queued and running runs in place.
"use strict";
(function () {
  var INTERVAL = 1000;

  function text(run) {
    return run.done + " / " + run.total + " " + run.units[0] + ", " + run.chunks + " " + run.units[1];
  }

  function update(run) {
    document.querySelectorAll('[data-retrieval-run="' + run.id + '"]').forEach(function (el) {
      var bar = el.querySelector("progress");
      bar.max = Math.max(run.total, 1);
      bar.value = run.done;
      el.querySelector(".retrieval-progress-text").textContent = text(run);
      el.dataset.active = run.active ? "1" : "";
    });
    document.querySelectorAll('[data-retrieval-run-status="' + run.id + '"]').forEach(function (el) {
      var badge = el.querySelector(".retrieval-status");
      badge.className = "retrieval-status retrieval-status-" + run.status;
      badge.textContent = run.status_label;
      badge.title = run.message;
    });
  }

  function poll() {
    var active = document.querySelectorAll('[data-retrieval-run][data-active="1"]');
    if (!active.length) return;  // nothing left to watch
    var ids = Array.prototype.map.call(active, function (el) { return el.dataset.retrievalRun; });
    fetch(active[0].dataset.url + "?ids=" + ids.join(","), {credentials: "same-origin"})
      .then(function (response) { return response.ok ? response.json() : {runs: []}; })
      .then(function (body) { body.runs.forEach(update); })
      .catch(function () {})
      .then(function () { window.setTimeout(poll, INTERVAL); });
  }

  document.addEventListener("DOMContentLoaded", function () { window.setTimeout(poll, INTERVAL); });
})();
