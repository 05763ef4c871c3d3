// A document's page: clicking a chunk (in the text or the table) selects it everywhere.
"use strict";
(function () {
  function select(index) {
    document.querySelectorAll(".retrieval-chunk.retrieval-selected, tr.retrieval-selected").forEach(function (el) {
      el.classList.remove("retrieval-selected");
    });
    if (index === null) return;
    document.querySelectorAll(".retrieval-chunk[data-chunks]").forEach(function (el) {
      if (el.dataset.chunks.split(" ").indexOf(index) !== -1) el.classList.add("retrieval-selected");
    });
    var row = document.getElementById("retrieval-chunk-row-" + index);
    if (row) row.classList.add("retrieval-selected");
  }
  function fromHash() {
    var match = /^#retrieval-chunk-(\d+)$/.exec(window.location.hash);
    select(match ? match[1] : null);
  }
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".retrieval-text").forEach(function (text) {
      text.addEventListener("click", function (event) {
        var span = event.target.closest(".retrieval-chunk[data-chunks]");
        if (!span) return;
        var index = span.dataset.chunks.split(" ").pop();
        window.location.hash = "retrieval-chunk-" + index;
      });
    });
    window.addEventListener("hashchange", fromHash);
    fromHash();
  });
})();
